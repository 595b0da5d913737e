"""Security (issue 7, item 7), end to end: real programs under the shim,
the loopback peer (test/peer/pyroscope_peer.py, over HTTPS too), strace.

What is proven, by class:
- SecureExecution: a setgid program (AT_SECURE) that the loader DID
  preload the shim into (its /proc/self/maps says so) is left alone: no
  signal handler, no timer, no thread, no file, no output, no variable
  changed.  The same copy without the setgid bit, same library, same
  variables, is profiled -- so every detector is shown to work.
- Secrets: passwords, tokens, header values and URL user-info reach the
  server (the peer checks them) but never stderr at level debug, the log
  file, the local profiles (gunzipped too) or the uploaded payloads; bad
  secret values are reported by length only; a server echoing a secret
  in its error message is masked.
- ChildEnvironment: a child's environment differs from the one it gets
  without the shim only by the variables the shim documents exporting
  (PYROSCOPE_OUTPUT_DIR when it resolved a default or relative one,
  TRACEPARENT/TRACESTATE with trace correlation), with or without a
  server and secrets.
- TagInjection: tag members built to break Pyroscope's name{k=v} grammar
  (} { = , newline, CR, __name__, __reserved, bad names, duplicates) are
  dropped with one line that names no value; the peer, which parses the
  series name as the server does, accepts the request and sees exactly
  the valid tags.  An application name cannot inject labels either.
- Files: created directories are 0700 and profiles 0600 whatever the
  umask; a symlink planted at a final or a temporary file name, at the
  output directory or at the log file is never followed (targets
  untouched, dangling targets not created).
- Tls: certificates are verified by default (the peer sees the client
  refuse its certificate and accepts nothing), host names too with a CA
  file; PYROSCOPE_CA_FILE is accepted silently; PYROSCOPE_TLS_INSECURE=true
  is accepted with exactly one warning line.
- FileAccess: under strace, every path the program touches only because
  of the shim is configuration (output directory, log file, CA file),
  /proc/self, an ELF object mapped with PROT_EXEC, the separate debug file
  of one (by build id), or -- with a server -- an entry of LIBCURL_READS.

Five of these found library bugs, fixed with them (see the comments marked
"Found here").
"""
import base64
import gzip
import os
import re
import secrets
import select
import shutil
import stat
import struct
import subprocess
import tempfile
import time
import unittest

from common import PROG, SHIM, ShimTest, clean_env, run
from test_upload import UploadTest, free_port

PROBE = os.path.join(PROG, "sec_probe")
NOBODY = 65534


# --- helpers ------------------------------------------------------------

class Probe:
    """sec_probe's report: `state` (at_secure, itimer_prof, sigprof_caught,
    posix_timers, threads), `maps` (files mapped) and `env` (a dict)."""

    def __init__(self, r):
        self.r = r
        head, sep, env = r.out.partition(b"--env--\n")
        if not sep:
            raise AssertionError("sec_probe printed no report: rc %d, stderr %r" % (r.rc, r.err))
        self.state, self.maps = {}, []
        for line in head.decode().splitlines():
            key, _, value = line.partition(" ")
            if key == "map":
                self.maps.append(value)
            else:
                self.state[key] = value
        self.env = dict(e.decode().split("=", 1) for e in env.split(b"\0") if e)


def probe(env, *args, ms=200, cwd=None, exe=PROBE, timeout=60):
    return Probe(run([exe] + list(args) + [str(ms)], env, timeout=timeout, cwd=cwd))


def all_files(top):
    out = []
    for d, _, names in os.walk(top):
        out.extend(os.path.join(d, n) for n in names)
    return out


def contents(path):
    """A file's bytes, gunzipped as well when it is gzip."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        try:
            data += gzip.decompress(data)
        except (OSError, EOFError):
            pass
    return data


def make_cert(d, name, san):
    """A self-signed certificate (EC P-256, 2 days) and its key."""
    cert, key = os.path.join(d, name + ".crt"), os.path.join(d, name + ".key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "2", "-subj", "/CN=pyroshim-test", "-addext",
                    "subjectAltName=" + san], check=True, capture_output=True, timeout=60)
    return cert, key


def tls_refusals(peer, at_least=0, timeout=15):
    """Connections the client gave up at the TLS level: a failed handshake
    (certificate refused) or one closed before any request (host name
    refused after the handshake).  The peer notices those after the
    client has gone, so wait (bounded) until there are `at_least`."""
    deadline = time.monotonic() + timeout
    while True:
        found = [r for r in peer.rejected() if r[3].startswith("tls ")]
        if len(found) >= at_least or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def planted(path, target):
    os.symlink(target, path)
    return path


class Waiting:
    """sec_probe in `wait` mode: started, its pid read (within 30 s); go()
    lets it work and waits for its end (bounded).  test.addCleanup(close)
    kills it if the test ends first."""

    def __init__(self, env, ms=200, cwd=None):
        self.p = subprocess.Popen([PROBE, "wait", str(ms)], env=env, cwd=cwd,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        ready, _, _ = select.select([self.p.stdout], [], [], 30)
        line = self.p.stdout.readline() if ready else b""
        if not line.strip().isdigit():
            self.close()
            raise AssertionError("sec_probe wait printed %r" % line)
        self.pid = int(line)

    def go(self, timeout=60):
        try:
            out, err = self.p.communicate(b"go\n", timeout=timeout)
        except subprocess.TimeoutExpired:
            self.close()
            raise AssertionError("sec_probe did not end within %ss" % timeout)
        return self.p.returncode, out, err

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.communicate()


# --- secure-execution mode ----------------------------------------------

def trusted_lib_dir():
    """The directory libc was loaded from: one the loader searches in
    secure-execution mode."""
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if re.search(r"/libc\.so\.6$", path):
                return os.path.dirname(path)
    return None


@unittest.skipUnless(os.geteuid() == 0, "needs root: a set-user-ID copy of the shim in the "
                     "system library directory and a setgid program")
class SecureExecution(ShimTest):
    def setUp(self):
        super().setUp()
        libdir = trusted_lib_dir()
        self.assertTrue(libdir and os.path.isdir(libdir), "no system library directory")
        # glibc preloads in secure mode only a library named without a
        # slash, found in a system directory, with the set-user-ID bit.
        self.lib = "libpyroshim-sectest-%s.so" % secrets.token_hex(6)
        self.libpath = os.path.join(libdir, self.lib)
        self.addCleanup(lambda: os.path.exists(self.libpath) and os.unlink(self.libpath))
        shutil.copy(SHIM, self.libpath)
        os.chmod(self.libpath, 0o4755)
        # A setgid program: run by root (rgid 0) its egid is nogroup, so
        # the kernel sets AT_SECURE.  Not on a nosuid mount.
        bindir = self.tmp
        if os.statvfs(bindir).f_flag & os.ST_NOSUID:
            bindir = tempfile.mkdtemp(prefix="sectest-", dir=os.path.dirname(PROG))
            self.addCleanup(shutil.rmtree, bindir, True)
        os.chmod(bindir, 0o755)
        self.exe = os.path.join(bindir, "probe-setgid")
        shutil.copy(PROBE, self.exe)
        os.chown(self.exe, 0, NOBODY)
        os.chmod(self.exe, 0o2755)
        self.plain = os.path.join(bindir, "probe-plain")
        shutil.copy(PROBE, self.plain)
        os.chmod(self.plain, 0o755)

    def shim_env(self):
        # Every variable here would show if the shim acted on it: a config
        # line (bad rate) at level debug, a log file, a relative output
        # directory exported as absolute, TRACEPARENT exported.
        return clean_env({"LD_PRELOAD": self.lib, "PYROSCOPE_LOG_LEVEL": "debug",
                          "PYROSCOPE_SAMPLE_RATE": "fast", "PYROSCOPE_OUTPUT_DIR": "out",
                          "PYROSCOPE_LOG_FILE": os.path.join(self.tmp, "shim.log"),
                          "PYROSCOPE_TRACE_CORRELATION": "true",
                          "PYROSCOPE_ALLOC_SAMPLE_BYTES": "1"})

    def test_setgid_program_gets_the_shim_loaded_and_the_shim_does_nothing(self):
        env = self.shim_env()
        mapped = os.path.realpath(self.libpath)
        work = os.path.join(self.tmp, "cwd")
        os.mkdir(work)

        # Control: the same program without the setgid bit, the same
        # library by the same name -- profiled, and every detector sees it.
        p = probe(env, exe=self.plain, cwd=work)
        self.assertEqual(p.r.rc, 0, p.r.err)
        self.assertEqual(p.state["at_secure"], "0")
        self.assertIn(mapped, p.maps)
        # The shim's signal is a real-time one; SIGPROF stays the program's.
        self.assertEqual(p.state["rt_caught"], "1", "control: no handler of the shim's seen")
        self.assertEqual(p.state["sigprof_caught"], "0", "control: the shim took SIGPROF")
        self.assertGreaterEqual(int(p.state["posix_timers"]), 1, "control: no timer seen")
        self.assertEqual(p.env["PYROSCOPE_OUTPUT_DIR"], os.path.join(work, "out"))
        self.assertRegex(p.env.get("TRACEPARENT", ""), r"^00-[0-9a-f]{32}-[0-9a-f]{16}-0[0-3]$")
        self.assertIn(b"PYROSCOPE_SAMPLE_RATE=fast", p.r.err)
        self.assertTrue(os.listdir(os.path.join(work, "out")), "control: no profile written")
        self.assertTrue(os.path.exists(os.path.join(self.tmp, "shim.log")))
        shutil.rmtree(work)
        os.unlink(os.path.join(self.tmp, "shim.log"))
        os.mkdir(work)

        # The setgid copy without the shim: what the program sees alone.
        alone = probe(clean_env({k: v for k, v in env.items() if k != "LD_PRELOAD"},
                                preload=False), exe=self.exe, cwd=work)
        self.assertEqual(alone.state["at_secure"], "1", "the setgid bit did not set AT_SECURE")

        p = probe(env, exe=self.exe, cwd=work)
        self.assertEqual(p.state["at_secure"], "1")
        # The test only means something if the loader did preload it.
        self.assertIn(mapped, p.maps, "the loader did not preload the set-user-ID copy")
        self.assertEqual((p.r.rc, p.r.err), (0, b""))
        self.assertEqual(p.state["sigprof_caught"], "0", "a SIGPROF handler is installed")
        self.assertEqual(p.state["rt_caught"], "0", "a real-time signal handler is installed")
        self.assertEqual(p.state["itimer_prof"], "0 0", "ITIMER_PROF is armed")
        self.assertEqual(p.state["posix_timers"], "0", "a POSIX timer exists")
        self.assertEqual(p.state["threads"], "2", "a thread other than the program's two")
        # Identical environment (glibc itself removes LD_PRELOAD here).
        self.assertEqual(p.env, alone.env)
        self.assertEqual(os.listdir(work), [], "files were written")
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "shim.log")), "log file created")

    def test_setgid_program_in_a_profiled_tree_is_left_alone(self):
        """bash leads a tree (it is profiled), then execs the setgid copy:
        that image inherits PYROSHIM_HELPER but neither joins the tree's
        helper nor starts anything of its own."""
        env = self.shim_env()
        work = os.path.join(self.tmp, "cwd")
        os.mkdir(work)
        p = Probe(run(["bash", "-c", 'exec "$0" "$@"', self.exe, "200"], env, cwd=work))
        self.assertEqual(p.r.rc, 0, p.r.err)
        self.assertEqual(p.state["at_secure"], "1")
        self.assertIn("PYROSHIM_HELPER", p.env, "bash led no tree: the test means nothing")
        self.assertEqual(p.state["rt_caught"], "0", "a real-time signal handler is installed")
        self.assertEqual(p.state["posix_timers"], "0", "a POSIX timer exists")
        self.assertEqual(p.state["threads"], "2", "a thread other than the program's two")
        self.assertEqual([f for f in all_files(work) if "probe" in f], [])
        with open(os.path.join(self.tmp, "shim.log")) as f:
            log = f.read()
        self.assertNotIn("joined", log)
        self.assertNotIn("probe", log)


# --- secrets ------------------------------------------------------------

PW = "pw-7Hq2Lr9Xw"          # PYROSCOPE_BASIC_AUTH_PASSWORD
URL_PW = "urlpw-Ek8Pf3Ua"    # password in the server URL's user-info
TOKEN = "tok-Vb3Nq8Kd"       # PYROSCOPE_AUTH_TOKEN
HDR = "hdr-Mm4Tz6Yp"         # a PYROSCOPE_HTTP_HEADERS value
OTLP_HDR = "otlp-Rg5Wc2Js"   # an OTEL_EXPORTER_OTLP_HEADERS value
SECRETS = [PW, URL_PW, TOKEN, HDR, OTLP_HDR]


def b64(s):
    return base64.b64encode(s.encode()).decode()


class Delivered(UploadTest):
    """UploadTest whose runs wait up to 10 s at exit for their last
    uploads (default 3 s): loading libcurl and a TLS handshake on a loaded
    2-core machine must not turn "sent" into "dropped"."""

    def env(self, server, **extra):
        extra.setdefault("PYROSCOPE_FLUSH_TIMEOUT", "10s")
        return super().env(server, **extra)

    def work(self, env, ms=100):
        """sec_probe: something is always uploaded.  Not CPU samples --
        under CPU contention this VM delivers no CPU-timer signal at all in
        a few percent of 100 ms runs (measured with a bare timer_create
        program too) -- but allocations: ~130 MB (16000 blocks) in 100 ms,
        so about 250 samples at the default 512 KiB mean."""
        r = run([PROBE, "quiet", str(ms)], env, timeout=60)
        self.assertEqual((r.rc, r.out), (0, b""), r.err)
        return r


class SecretTest(Delivered):
    app = "sec"

    def forbidden(self, extra=()):
        """Each secret, and the Basic credentials as they go on the wire."""
        return SECRETS + [b64("alice:" + URL_PW), b64("bob:" + PW)] + list(extra)

    def assert_nowhere(self, r, dirs=(), files=(), peers=(), extra=()):
        """No secret in stderr or stdout, in any file under dirs or in
        files (gunzipped too), or in any payload a peer stored (the .json
        records hold the request headers, where secrets belong)."""
        paths = list(files)
        for d in dirs:
            paths += all_files(d)
        for p in peers:
            paths += [x["payload"] for x in p.records() if x.get("payload")]
        self.assertTrue(paths or not (dirs or files or peers), "nothing to search")
        for s in self.forbidden(extra):
            self.assertNotIn(s.encode(), r.err, "secret on stderr:\n%s" % r.err.decode())
            self.assertNotIn(s.encode(), r.out)
            for path in paths:
                self.assertNotIn(s.encode(), contents(path), "secret %s in %s" % (s, path))


class Secrets(SecretTest):
    def burn(self, env, ms=600):
        r = run([os.path.join(PROG, "upload_burn"), str(ms)], env, timeout=60)
        self.assertEqual(r.rc, 0, r.err)
        return r

    def test_secrets_reach_the_server_and_nowhere_else_at_level_debug(self):
        log = os.path.join(self.tmp, "shim.log")
        common = {"PYROSCOPE_LOG_LEVEL": "debug", "PYROSCOPE_OUTPUT_DIR": self.out,
                  "PYROSCOPE_UPLOAD_INTERVAL": "200ms", "PYROSCOPE_ALLOC_SAMPLE_BYTES": "4096"}

        # User-info in the URL, a header, the tenant, and the span with its
        # OTLP header (to a peer of its own: the first one wants Basic
        # credentials on every path): every pass logs at level debug.
        peer = self.peer("--require-basic", "alice:" + URL_PW, "--require-tenant", "t-1")
        otlp = self.peer()
        r = self.burn(self.env("http://alice:%s@127.0.0.1:%d" % (URL_PW, peer.port),
                               PYROSCOPE_HTTP_HEADERS='{"X-Api-Key":"%s"}' % HDR,
                               PYROSCOPE_TENANT_ID="t-1", PYROSCOPE_TRACE_CORRELATION="true",
                               OTEL_EXPORTER_OTLP_ENDPOINT=otlp.url,
                               OTEL_EXPORTER_OTLP_HEADERS="x-otlp-key=" + OTLP_HDR, **common))
        self.assertIn(b"debug: ", r.err, "level debug printed nothing: the check would be empty")
        ingest = peer.ingest()
        self.assertGreaterEqual(len(ingest), 2, "no uploads: the secrets were never used")
        for rec in ingest:
            self.assertEqual(rec["headers"]["Authorization"], "Basic " + b64("alice:" + URL_PW))
            self.assertEqual(rec["headers"]["X-Api-Key"], HDR)
        (span,) = otlp.records("/v1/traces")
        self.assertEqual(span["headers"]["x-otlp-key"], OTLP_HDR)
        self.assertEqual(peer.rejected() + otlp.rejected(), [])
        self.assertTrue(self.files(), "no local profile written")
        self.assert_nowhere(r, dirs=[self.out], peers=[peer, otlp])

        # Basic credentials from the variables, and a log file.
        shutil.rmtree(self.out)
        peer = self.peer("--require-basic", "bob:" + PW)
        r = self.burn(self.env(peer.url, PYROSCOPE_BASIC_AUTH_USER="bob",
                               PYROSCOPE_BASIC_AUTH_PASSWORD=PW, PYROSCOPE_LOG_FILE=log,
                               **common))
        self.assertEqual(r.err, b"", "PYROSCOPE_LOG_FILE: nothing should go to stderr")
        self.assertIn(b"debug: ", open(log, "rb").read())
        self.assertEqual(os.stat(log).st_mode & 0o777, 0o600)
        self.assertGreaterEqual(len(peer.ingest()), 2)
        self.assertEqual(peer.rejected(), [])
        self.assert_nowhere(r, dirs=[self.out], files=[log], peers=[peer])

        # A bearer token.
        shutil.rmtree(self.out)
        peer = self.peer("--require-bearer", TOKEN)
        r = self.burn(self.env(peer.url, PYROSCOPE_AUTH_TOKEN=TOKEN, **common))
        self.assertGreaterEqual(len(peer.ingest()), 2)
        self.assertEqual(peer.rejected(), [])
        self.assert_nowhere(r, dirs=[self.out], peers=[peer])

    def test_bad_secret_values_are_reported_by_length_only(self):
        peer = self.peer()
        long_pw = (PW * 30)[:300]                  # the field holds 255 bytes
        long_token = (TOKEN * 100)[:1100]          # 1023
        long_otlp = "k=" + (OTLP_HDR * 400)[:4200]  # 4095
        env = self.env(peer.url, PYROSCOPE_BASIC_AUTH_USER="bob",
                       PYROSCOPE_BASIC_AUTH_PASSWORD=long_pw, PYROSCOPE_AUTH_TOKEN=long_token,
                       PYROSCOPE_HTTP_HEADERS='{"X-Api-Key": "%s"' % HDR,   # no closing brace
                       OTEL_EXPORTER_OTLP_ENDPOINT=peer.url, OTEL_EXPORTER_OTLP_HEADERS=long_otlp,
                       PYROSCOPE_TRACE_CORRELATION="true")
        r = run([os.path.join(PROG, "spin"), "100"], env, timeout=60)
        self.assertEqual(r.rc, 0)
        self.assertEqual(sorted(r.err.decode().splitlines()), sorted([
            "pyroshim: PYROSCOPE_BASIC_AUTH_PASSWORD=(300 bytes, not shown): too long; using none",
            "pyroshim: PYROSCOPE_AUTH_TOKEN=(1100 bytes, not shown): too long; using none",
            "pyroshim: OTEL_EXPORTER_OTLP_HEADERS=(%d bytes, not shown): too long; using none"
            % len(long_otlp),
            "pyroshim: PYROSCOPE_HTTP_HEADERS: not a JSON object of strings; using none"]))
        self.assert_nowhere(r, peers=[peer])

        # Values that would inject header lines: dropped, named by their
        # header name or count only; a token with CR LF fails the request.
        peer = self.peer()
        env = self.env(peer.url, PYROSCOPE_LOG_LEVEL="debug",
                       PYROSCOPE_HTTP_HEADERS='{"X-Api-Key": "%s\\r\\nX-Injected: 1"}' % HDR,
                       PYROSCOPE_AUTH_TOKEN=TOKEN + "\r\nX-Injected: 1",
                       OTEL_EXPORTER_OTLP_ENDPOINT=peer.url, PYROSCOPE_TRACE_CORRELATION="true",
                       OTEL_EXPORTER_OTLP_HEADERS="k=%s%%0D%%0AX-Injected:%%201" % OTLP_HDR)
        r = self.work(env)
        config = [l for l in r.err.decode().splitlines() if l.startswith("pyroshim: ")]
        self.assertEqual(len(config), 2, r.err)
        self.assertTrue(any(l.startswith("pyroshim: PYROSCOPE_HTTP_HEADERS: dropped 1 header(s), "
                                         "the first X-Api-Key") for l in config), config)
        self.assertIn("pyroshim: OTEL_EXPORTER_OTLP_HEADERS: 1 member(s) not name=value; "
                      "using the others", config)
        self.assertIn(b"upload failed: Invalid argument", r.err)
        self.assertEqual(len(peer.records("/v1/traces")), 1, "the span did not arrive")
        for rec in peer.records():
            self.assertNotIn("X-Injected", rec["headers"])
        self.assert_nowhere(r, peers=[peer])

    def test_secret_echoed_by_the_server_is_masked(self):
        body = "denied: password %s token %s" % (URL_PW, TOKEN)
        peer = self.peer("--status", "401", "--body", body)
        # Level debug: the line is at level warn, the rest explains a miss.
        for server, extra, shown in (
                ("http://alice:%s@127.0.0.1:%d" % (URL_PW, peer.port), {},
                 b"password %s token %s" % (b"*" * len(URL_PW), TOKEN.encode())),
                (peer.url, {"PYROSCOPE_AUTH_TOKEN": TOKEN},
                 b"password %s token %s" % (URL_PW.encode(), b"*" * len(TOKEN)))):
            r = self.work(self.env(server, PYROSCOPE_LOG_LEVEL="debug", **extra))
            self.assertIn(b"upload rejected: HTTP 401: denied: " + shown, r.err)

    # Found here (fixed; uploader/http.c set_message): only the password and the bearer
    # token are masked in a server's error message; PYROSCOPE_HTTP_HEADERS
    # values (API keys) and OTLP header values are printed as echoed,
    # although pyroshim(7) SECURITY says header values are never printed.
    def test_header_value_echoed_by_the_server_is_masked(self):
        peer = self.peer("--status", "401", "--body", "denied: key %s" % HDR)
        env = self.env(peer.url, PYROSCOPE_HTTP_HEADERS='{"X-Api-Key":"%s"}' % HDR,
                       PYROSCOPE_LOG_LEVEL="warn")
        r = self.work(env)
        self.assertIn(b"upload rejected: HTTP 401: denied: key ", r.err)
        self.assert_nowhere(r)

    # Found here (fixed; init/init.c start): the info line "profiling ... output %s"
    # prints c->server, the URL as given, user-info password included,
    # when there is no output directory.
    def test_info_line_never_shows_the_password_of_the_server_url(self):
        peer = self.peer("--require-basic", "alice:" + URL_PW)
        r = self.work(self.env("http://alice:%s@127.0.0.1:%d" % (URL_PW, peer.port),
                               PYROSCOPE_LOG_LEVEL="info"))
        self.assertIn(b"info: profiling", r.err)
        self.assertGreaterEqual(len(peer.ingest()), 1)
        self.assert_nowhere(r)

    # Found here (fixed; uploader/remote.c ps_remote_setup, common/config.c printable): the
    # configuration line about an invalid or too long server URL (and a
    # too long OTLP endpoint) echoes the URL, user-info password included.
    def test_invalid_server_url_line_never_shows_its_password(self):
        bad = ["http://alice:%s@127.0.0.1:99999" % URL_PW,         # port out of range
               "ftp://alice:%s@127.0.0.1" % URL_PW,                # not http(s)
               "http://alice:%s@127.0.0.1/%s" % (URL_PW, "a" * 1100)]  # too long
        for url in bad:
            r = run([os.path.join(PROG, "spin"), "50"],
                    clean_env({"PYROSCOPE_SERVER_ADDRESS": url, "PYROSCOPE_OUTPUT_DIR": self.out}),
                    timeout=60)
            self.assertEqual(len(r.err.splitlines()), 1, r.err)
            self.assertTrue(r.err.startswith(b"pyroshim: PYROSCOPE_SERVER_ADDRESS"), r.err)
            self.assert_nowhere(r)
        r = run([os.path.join(PROG, "spin"), "50"], clean_env({
            "PYROSCOPE_OUTPUT_DIR": self.out, "PYROSCOPE_TRACE_CORRELATION": "true",
            "OTEL_EXPORTER_OTLP_ENDPOINT": bad[2]}), timeout=60)
        self.assertTrue(r.err.startswith(b"pyroshim: OTEL_EXPORTER_OTLP_ENDPOINT"), r.err)
        self.assert_nowhere(r)


class ChildEnvironment(SecretTest):
    """`sh -c env` with and without the shim, same variables otherwise."""

    def child_env(self, extra, preload):
        env = clean_env(extra, preload=preload)
        r = run(["sh", "-c", "env -0"], env, timeout=60, cwd=self.tmp)
        self.assertEqual(r.rc, 0, r.err)
        self.assertEqual(r.err, b"")
        got = dict(e.decode().split("=", 1) for e in r.out.split(b"\0") if e)
        if preload:
            self.assertEqual(got.pop("LD_PRELOAD"), SHIM)
        return got

    def assert_only_documented_changes(self, extra, exported):
        without = self.child_env(extra, preload=False)
        with_shim = self.child_env(extra, preload=True)
        changed = {k for k in set(without) | set(with_shim) if without.get(k) != with_shim.get(k)}
        self.assertEqual(changed, set(exported), "variables changed by the shim")
        for k in extra:
            if k not in exported:
                self.assertEqual(with_shim.get(k), extra[k], k)
        for k in exported:
            value = with_shim.get(k, "")
            for s in self.forbidden():
                self.assertNotIn(s, value, "%s carries a secret" % k)
        return with_shim

    def test_only_documented_variables_change_locally_and_with_a_server(self):
        secret_vars = {"PYROSCOPE_BASIC_AUTH_USER": "bob", "PYROSCOPE_BASIC_AUTH_PASSWORD": PW,
                       "PYROSCOPE_AUTH_TOKEN": TOKEN,
                       "PYROSCOPE_HTTP_HEADERS": '{"X-Api-Key":"%s"}' % HDR,
                       "OTEL_EXPORTER_OTLP_HEADERS": "k=" + OTLP_HDR,
                       "PYROSCOPE_APPLICATION_NAME": "envtest"}
        # Local mode, default directory, trace correlation: both exports,
        # and the name of the tree's helper (pyroshim(7), PROCESS TREES).
        got = self.assert_only_documented_changes(
            dict(secret_vars, PYROSCOPE_TRACE_CORRELATION="true"),
            ["PYROSCOPE_OUTPUT_DIR", "TRACEPARENT", "PYROSHIM_HELPER"])
        self.assertEqual(got["PYROSCOPE_OUTPUT_DIR"], os.path.join(self.tmp, "pyroshim-profiles"))
        self.assertRegex(got["TRACEPARENT"], r"^00-[0-9a-f]{32}-[0-9a-f]{16}-0[0-3]$")
        # The socket, then the helper and its bell's descriptor.
        self.assertRegex(got["PYROSHIM_HELPER"], r"^pyroshim-[0-9]+-[0-9a-f]{16}-[0-9]+-[0-9]+$")
        # An absolute directory is not rewritten; no correlation, no trace.
        self.assert_only_documented_changes(
            dict(secret_vars, PYROSCOPE_OUTPUT_DIR=self.out), ["PYROSHIM_HELPER"])
        # A /debug/pprof address: the tree's is said, as a digest.
        got = self.assert_only_documented_changes(
            dict(secret_vars, PYROSCOPE_OUTPUT_DIR=self.out,
                 PYROSCOPE_PPROF_ADDRESS="127.0.0.1:%d" % free_port()),
            ["PYROSHIM_HELPER", "PYROSHIM_PPROF"])
        self.assertRegex(got["PYROSHIM_PPROF"], r"^[0-9a-f]{16}$")
        # A server with every secret, a caller's trace context: only the
        # span handed to the children changes.
        peer = self.peer()
        tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        got = self.assert_only_documented_changes(
            dict(secret_vars, PYROSCOPE_SERVER_ADDRESS="http://u:%s@127.0.0.1:%d"
                 % (URL_PW, peer.port), PYROSCOPE_TRACE_CORRELATION="true",
                 TRACEPARENT=tp, TRACESTATE="vendor=x", OTEL_EXPORTER_OTLP_ENDPOINT=peer.url),
            ["TRACEPARENT", "PYROSHIM_HELPER"])
        self.assertTrue(got["TRACEPARENT"].startswith(tp[:36]), got["TRACEPARENT"])
        self.assertEqual(got["TRACESTATE"], "vendor=x")


# --- tags ---------------------------------------------------------------

class TagInjection(Delivered):
    app = "tags"

    def test_injection_attempts_are_dropped_and_only_valid_tags_arrive(self):
        attempts = ["inj1=x}y", "inj2=x{y", "inj3=x=y", "inj4=x\ny", "inj5=x\ry",
                    "inj6=x\x7fy", "__name__=hack", "__meta=hack", "a}b=hack", "c{d=hack",
                    "e f=hack", "env=prod"]
        good = ["env=dev", "service_name=svc", "sp=a b", "utf=\u00fcn\u00ef"]
        tags = ",".join(good[:1] + attempts + good[1:])
        peer = self.peer()
        r = self.work(self.env(peer.url, PYROSCOPE_TAGS=tags))
        lines = r.err.decode().splitlines()
        self.assertEqual(len(lines), 1, r.err)
        self.assertTrue(lines[0].startswith("pyroshim: PYROSCOPE_TAGS: dropped %d tag(s): "
                                            % len(attempts)), lines)
        self.assertNotIn("hack", lines[0], "a dropped tag's value was printed")
        self.assertEqual(peer.rejected(), [], "the peer refused the series name")
        recs = peer.ingest()
        self.assertGreaterEqual(len(recs), 1)
        for rec in recs:
            self.assertEqual(rec["labels"], {"env": "dev", "service_name": "svc", "sp": "a b",
                                             "utf": "\u00fcn\u00ef"})
            self.assertEqual(rec["dropped_labels"], [])
            self.assertEqual(rec["app_name"], self.app)
            self.assertEqual(rec["query"]["name"],
                             "tags{env=dev,service_name=svc,sp=a b,utf=\u00fcn\u00ef}")

    def test_application_name_cannot_inject_labels(self):
        peer = self.peer()
        env = self.env(peer.url, PYROSCOPE_APPLICATION_NAME="app{__name__=x,service_name=evil}",
                       PYROSCOPE_TAGS="env=dev")
        r = self.work(env)
        self.assertEqual(r.err, b"")
        self.assertEqual(peer.rejected(), [])
        self.assertGreaterEqual(len(peer.ingest()), 1)
        for rec in peer.ingest():
            self.assertEqual(rec["labels"], {"env": "dev"})
            self.assertEqual(rec["app_name"], "app___name___x_service_name_evil_")


# --- files --------------------------------------------------------------

class Files(ShimTest):
    app = "files"

    def env(self, **extra):
        e = {"PYROSCOPE_APPLICATION_NAME": self.app, "PYROSCOPE_OUTPUT_DIR": self.out}
        e.update(extra)
        return clean_env(e)

    def victim(self, name, mode=0o644):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write("victim %s\n" % name)
        os.chmod(path, mode)
        return path

    def assert_untouched(self, path):
        st = os.lstat(path)
        self.assertTrue(stat.S_ISREG(st.st_mode), path)
        self.assertEqual(st.st_mode & 0o777, 0o644, path)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), b"victim %s\n" % os.path.basename(path).encode(),
                             "%s was written through a symlink" % path)

    def assert_private_files(self, d):
        """A profile was written, and every file is ours and 0600.  (The
        allocation profile: sec_probe always has allocation samples.)"""
        names = os.listdir(d)
        regular = [n for n in names if stat.S_ISREG(os.lstat(os.path.join(d, n)).st_mode)]
        self.assertTrue(any(n.endswith(".alloc.pb.gz") for n in regular), names)
        for n in regular:
            st = os.lstat(os.path.join(d, n))
            self.assertEqual((st.st_mode & 0o777, st.st_uid), (0o600, os.geteuid()), n)

    def test_directories_are_0700_and_files_0600_whatever_the_umask(self):
        out = os.path.join(self.tmp, "a", "b", "c")
        log = os.path.join(self.tmp, "shim.log")
        old = os.umask(0)
        try:
            r = run([PROBE, "200"], self.env(PYROSCOPE_OUTPUT_DIR=out, PYROSCOPE_LOG_FILE=log,
                                             PYROSCOPE_LOG_LEVEL="info"), timeout=60)
        finally:
            os.umask(old)
        self.assertEqual((r.rc, r.err), (0, b""))
        for d in ("a", "a/b", "a/b/c"):
            self.assertEqual(os.stat(os.path.join(self.tmp, d)).st_mode & 0o777, 0o700, d)
        self.assert_private_files(out)
        self.assertEqual(os.stat(log).st_mode & 0o777, 0o600)

    def plant_and_run(self, plants):
        """Start sec_probe (wait mode), plant symlinks at the names it
        will use, {kind: ("final" or "tmp", target)}, let it run; returns
        kind -> final file name for its pid."""
        w = Waiting(self.env())
        self.addCleanup(w.close)
        for kind, (where, target) in plants.items():
            planted(os.path.join(self.out, ("%s.%d.%s" if where == "final" else ".%s.%d.%s.tmp")
                                 % (self.app, w.pid, kind)), target)
        rc, _, err = w.go()
        self.assertEqual((rc, err), (0, b""))
        return lambda kind: os.path.join(self.out, "%s.%d.%s" % (self.app, w.pid, kind))

    def test_symlinks_at_final_and_temporary_names_are_not_followed(self):
        os.mkdir(self.out, 0o700)
        victims = [self.victim("target-%d" % i) for i in range(3)]
        dangling = [os.path.join(self.tmp, "not-created-%d" % i) for i in range(3)]
        # The names of this run (app.pid.kind): nothing sits at a final
        # .pb.gz name, so the shim has no reason to pick other names.
        # Allocation files only: sec_probe always has allocation samples.
        name = self.plant_and_run({"alloc.pb.gz": ("tmp", victims[0]),
                                   "inuse_space.folded": ("tmp", dangling[0]),
                                   "alloc_objects.folded": ("final", victims[1]),
                                   "alloc_space.folded": ("final", dangling[1])})
        # A link at a final name is replaced by the rename, never written
        # through.  (At a temporary name the file may be skipped.)
        for kind in ("alloc_objects.folded", "alloc_space.folded"):
            self.assertTrue(stat.S_ISREG(os.lstat(name(kind)).st_mode), kind)
        # A link at a final .pb.gz name: an earlier image's file, for the
        # shim, which writes its own next to it.
        name = self.plant_and_run({"alloc.pb.gz": ("final", victims[2]),
                                   "cpu.pb.gz": ("final", dangling[2])})
        self.assertTrue(os.path.islink(name("alloc.pb.gz")))
        for v in victims:
            self.assert_untouched(v)
        for d in dangling:
            self.assertFalse(os.path.lexists(d), "%s was created through a symlink" % d)
        self.assert_private_files(self.out)

    def test_symlink_in_place_of_the_output_directory_or_log_file_is_refused(self):
        elsewhere = os.path.join(self.tmp, "elsewhere")
        os.mkdir(elsewhere, 0o700)
        victim = self.victim("log-target")
        for i, target in enumerate((elsewhere, os.path.join(self.tmp, "missing-dir"))):
            if os.path.lexists(self.out):
                os.unlink(self.out)
            os.symlink(target, self.out)
            log = planted(os.path.join(self.tmp, "log.%d" % i), victim)
            r = run([PROBE, "200"], self.env(PYROSCOPE_LOG_FILE=log, PYROSCOPE_LOG_LEVEL="warn"),
                    timeout=60)
            self.assertEqual(r.rc, 0)
            lines = r.err.decode().splitlines()
            self.assertTrue(any(l.startswith("pyroshim: PYROSCOPE_LOG_FILE=%s: " % log)
                                for l in lines), lines)
            self.assertIn("pyroshim: PYROSCOPE_OUTPUT_DIR=%s: Not a directory; "
                          "local profiles are not written" % self.out, lines)
            self.assertEqual(os.listdir(elsewhere), [])
            self.assertFalse(os.path.lexists(os.path.join(self.tmp, "missing-dir")))
            self.assert_untouched(victim)

    # Found here (fixed; uploader/files.c ps_files_write): the temporary file is opened
    # with O_CREAT|O_TRUNC but without O_EXCL, so a regular file planted
    # at the predictable name ".<app>.<pid>.<kind>.tmp" in a directory
    # others can write (PYROSCOPE_OUTPUT_DIR=/tmp, say) is reused: the
    # profile is written into the other user's file, keeps its owner and
    # mode (0666 here), and is renamed to the final name.
    @unittest.skipUnless(os.geteuid() == 0, "needs root to plant a file owned by nobody")
    def test_file_planted_at_a_temporary_name_does_not_receive_the_profile(self):
        os.mkdir(self.out)
        os.chmod(self.out, 0o1777)      # like /tmp
        w = Waiting(self.env())
        self.addCleanup(w.close)
        tmp = os.path.join(self.out, ".%s.%d.alloc.pb.gz.tmp" % (self.app, w.pid))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        os.write(fd, b"planted\n")
        os.close(fd)
        os.chown(tmp, NOBODY, NOBODY)
        os.chmod(tmp, 0o666)
        rc, _, err = w.go()
        self.assertEqual((rc, err), (0, b""))
        st = os.lstat(os.path.join(self.out, "%s.%d.alloc.pb.gz" % (self.app, w.pid)))
        self.assertEqual((st.st_mode & 0o777, st.st_uid), (0o600, os.geteuid()),
                         "the profile took the planted file's mode and owner")


class VdsoFile(ShimTest):
    # Found here (fixed; symbolize/symbols.c module_names): the vDSO's name "linux-vdso.so.1"
    # is opened as a path relative to the working directory.  A FIFO of
    # that name there blocks the open forever, in the exiting thread of a
    # local-mode program: the program never exits (no bound at all, the
    # flush timeout does not apply).  Any file of that name is read.
    def test_fifo_named_like_the_vdso_in_the_working_directory_cannot_hang_exit(self):
        cwd = os.path.join(self.tmp, "cwd")
        os.mkdir(cwd)
        os.mkfifo(os.path.join(cwd, "linux-vdso.so.1"))
        env = clean_env({"PYROSCOPE_OUTPUT_DIR": self.out, "PYROSCOPE_SAMPLE_RATE": "1000",
                         "PYROSCOPE_FLUSH_TIMEOUT": "500ms"})
        # 0.5 s of CPU nearly all in the vDSO (see sec_probe vdso): at
        # 1000 Hz, 66 to 102 samples in 30 runs next to two CPU hogs, so
        # the vDSO is certainly symbolized.  10 s is ample.
        r = run([PROBE, "vdso", "500"], env, timeout=10, cwd=cwd)
        self.assertEqual((r.rc, r.err), (0, b""))


# --- TLS ----------------------------------------------------------------

@unittest.skipUnless(shutil.which("openssl"), "openssl is not installed (Debian: openssl)")
class Tls(Delivered):
    app = "tls"

    @classmethod
    def setUpClass(cls):
        cls.certdir = tempfile.mkdtemp(prefix="pyroshim-tls-")
        cls.good = make_cert(cls.certdir, "good", "IP:127.0.0.1,DNS:localhost")
        cls.wrong = make_cert(cls.certdir, "wrong", "DNS:wrong.invalid")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.certdir, ignore_errors=True)

    def tls_peer(self, pair):
        p = self.peer("--tls-cert", pair[0], "--tls-key", pair[1])
        p.url = "https://127.0.0.1:%d" % p.port
        return p

    def upload(self, peer, **extra):
        return self.work(self.env(peer.url, **extra))

    def assert_refused(self, peer, runs):
        self.assertEqual(peer.records(), [], "a request was accepted without verification")
        # One connection per queued request at exit (CPU, allocations):
        # at least one per run, each refused by the client.
        fails = tls_refusals(peer, at_least=runs)
        self.assertGreaterEqual(len(fails), runs, peer.rejected())
        return fails

    def test_certificate_is_verified_by_default(self):
        peer = self.tls_peer(self.good)
        r = self.upload(peer)
        self.assertEqual(peer.records(), [], "accepted without a CA file or insecure mode")
        self.assertEqual(r.err, b"", "a refused certificate is silent at the default level")
        r = self.upload(peer, PYROSCOPE_TLS_INSECURE="false", PYROSCOPE_LOG_LEVEL="warn")
        drops = r.err.decode().splitlines()
        self.assertTrue(drops, "level warn: no line about the refused uploads")
        for line in drops:
            self.assertRegex(line, r"^pyroshim\[\d+\]: warn: \w+ upload failed")
        r = self.upload(peer, PYROSCOPE_TLS_INSECURE="maybe")
        self.assertEqual(r.err, b"pyroshim: PYROSCOPE_TLS_INSECURE=maybe: expected true or "
                         b"false; using false\n")
        for f in self.assert_refused(peer, 3):
            self.assertIn("UNKNOWN_CA", f[3], "the client did not refuse the certificate")

    def test_ca_file_is_accepted_silently_and_host_name_still_checked(self):
        peer = self.tls_peer(self.good)
        r = self.upload(peer, PYROSCOPE_CA_FILE=self.good[0])
        self.assertEqual(r.err, b"")
        self.assertGreaterEqual(len(peer.ingest()), 1)
        self.assertEqual(peer.rejected(), [])
        # Signed by the given CA but for another name: refused.
        peer = self.tls_peer(self.wrong)
        self.upload(peer, PYROSCOPE_CA_FILE=self.wrong[0])
        for f in self.assert_refused(peer, 1):
            self.assertEqual(f[3], "tls connection closed before any request")

    def test_insecure_accepts_any_certificate_with_exactly_one_warning(self):
        for pair in (self.good, self.wrong):
            peer = self.tls_peer(pair)
            r = self.upload(peer, PYROSCOPE_TLS_INSECURE="true")
            self.assertEqual(r.err, b"pyroshim: PYROSCOPE_TLS_INSECURE=true: TLS certificates "
                             b"are not verified\n")
            self.assertGreaterEqual(len(peer.ingest()), 1)
            self.assertEqual(tls_refusals(peer), [])


# --- file access --------------------------------------------------------

TRACED = ("open,openat,openat2,creat,stat,lstat,newfstatat,statx,readlink,readlinkat,access,"
          "faccessat,faccessat2,execve,mkdir,mkdirat,rename,renameat,renameat2,unlink,unlinkat,"
          "chdir,mmap")
CALL = re.compile(r"^(\d+) +(\w+)\((.*)$")     # strace pads short pids
# First argument a path, or a dirfd (AT_FDCWD</cwd> or N</dir>) and a path.
AT_PATH = re.compile(r'^(?:(?:AT_FDCWD|-?\d+)<([^>]*)>, )?"((?:[^"\\]|\\.)*)"')
MMAP_EXEC = re.compile(r'^[^,]*, \d+, [A-Z_|]*PROT_EXEC[A-Z_|]*, [A-Z_|]+, \d+<([^>]*)>')
# What libcurl and the libraries it loads read, with a server configured:
# OpenSSL's and GnuTLS's configuration, the system CA store (bundle, and
# CApath lookups by subject hash), the time zone, and name resolution.
LIBCURL_READS = {
    "/usr/lib/ssl/openssl.cnf", "/etc/ssl/openssl.cnf", "/etc/gnutls/config",
    "/etc/ssl/certs/ca-certificates.crt", "/etc/ssl/certs", "/usr/lib/ssl/cert.pem",
    "/usr/lib/ssl/certs", "/etc/localtime", "/etc/nsswitch.conf", "/etc/host.conf",
    "/etc/resolv.conf", "/etc/hosts", "/etc/gai.conf", "/etc/services",
}
LIBCURL_READS_RE = re.compile(r"^/etc/ssl/certs/[0-9a-f]{8}\.\d+$")


def build_id(path):
    """The GNU build id of an ELF file (hex), or None."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return None
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for i in range(phnum):
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", data,
                                                                 phoff + i * phentsize)
        if p_type != 4:   # PT_NOTE
            continue
        off, end = p_offset, p_offset + p_filesz
        while off + 12 <= end:
            namesz, descsz, ntype = struct.unpack_from("<III", data, off)
            name = data[off + 12:off + 12 + namesz]
            desc = off + 12 + ((namesz + 3) & ~3)
            if ntype == 3 and name == b"GNU\0":
                return data[desc:desc + descsz].hex()
            off = desc + ((descsz + 3) & ~3)
    return None


def traced_run(tmp, name, argv, shim_vars, preload, cwd, timeout=60):
    """Run argv under strace -f; returns (run, accesses, exec_mapped) where
    accesses is a set of absolute paths (as given, joined to their dirfd)
    and exec_mapped the real paths of files mapped executable."""
    log = os.path.join(tmp, name + ".strace")
    argv_s = ["strace", "-f", "-y", "-qq", "-e", "trace=" + TRACED, "-e", "signal=none",
              "-o", log]
    for k, v in shim_vars.items():
        argv_s += ["-E", "%s=%s" % (k, v)]
    if preload:
        argv_s += ["-E", "LD_PRELOAD=" + SHIM]
    r = run(argv_s + argv, clean_env(preload=False), timeout=timeout, cwd=cwd)
    paths, mapped = set(), set()
    with open(log) as f:
        lines = f.readlines()
    if not any(" execve(\"%s\"" % argv[0] in l for l in lines):
        raise AssertionError("strace saw no execve of %s: rc %d, %d lines, stderr %r"
                             % (argv[0], r.rc, len(lines), r.err))
    for line in lines:
        m = CALL.match(line)
        if not m:
            # The other half of a call split by another thread's, an exit,
            # or a thread gone mid-call ("???( <detached ...>"); anything
            # else means this parser misreads strace.
            if not re.match(r"^\d+ +(<\.\.\. \w+ resumed>|\+\+\+ |\?\?\?\( <detached)", line):
                raise AssertionError("strace line not understood: %r" % line)
            continue
        call, args = m.group(2), m.group(3)
        if call == "mmap":
            x = MMAP_EXEC.match(args)
            if x:
                mapped.add(os.path.realpath(x.group(1)))
            continue
        a = AT_PATH.match(args)
        if not a or not a.group(2):
            continue   # fstat of a descriptor (AT_EMPTY_PATH)
        p = a.group(2).encode().decode("unicode_escape")
        if not p.startswith("/"):
            p = os.path.join(a.group(1) or cwd, p)
        paths.add(os.path.normpath(p))
        if call == "execve":
            mapped.add(os.path.realpath(p))
    return r, paths, mapped


@unittest.skipUnless(shutil.which("strace"), "strace is not installed")
class FileAccess(UploadTest):
    app = "access"

    def extra_accesses(self, shim_vars, ms=300):
        cwd = os.path.join(self.tmp, "cwd")
        os.makedirs(cwd, exist_ok=True)
        argv = [PROBE, str(ms)]
        r0, base, _ = traced_run(self.tmp, "without", argv, shim_vars, False, cwd)
        r1, seen, mapped = traced_run(self.tmp, "with", argv, shim_vars, True, cwd)
        for r in (r0, r1):
            self.assertEqual(r.rc, 0, r.err)
        # The kernel maps the program and the loader without mmap: take
        # them (and everything else mapped by then) from the probe itself.
        mapped |= {os.path.realpath(m) for m in Probe(r1).maps}
        return cwd, sorted(seen - base), mapped

    @staticmethod
    def prefixes(path):
        """"/a/b/c" -> ["/a/b/c", "/a/b", "/a"]."""
        out = []
        while path not in ("/", ""):
            out.append(path)
            path = os.path.dirname(path)
        return out

    def unexplained(self, paths, mapped, cwd, config=(), out=None, allow=None):
        ids = {build_id(p) for p in mapped} - {None}
        debug = {"/usr/lib/debug/.build-id/%s/%s.debug" % (i[:2], i[2:]) for i in ids}
        # libdw (source lines, symbolize/dwarf.c) resolves each file it opens
        # with realpath, which reads every directory on the way: the
        # ancestors of a mapped object, of its debug file, or of
        # /proc/self/exe, and nothing else.
        ancestors = {os.path.dirname(a) for f in (mapped | debug | {"/proc/self/exe"})
                     for a in self.prefixes(f)}
        # The symbol cache (pyroshim(7), FILES): its directory and its
        # parent (made if missing), and the entries of that directory (the
        # files of mapped objects are read and written; the others only
        # looked at when the directory is kept within its bound).  The
        # tests of one run share it, so it holds other programs' objects.
        cache = os.path.join(os.environ["XDG_CACHE_HOME"], "pyroshim")
        bad, seen_kinds = [], set()
        for p in paths:
            if out and (p == out or p.startswith(out + "/") or out.startswith(p + "/")):
                kind = "output"          # the directory, its files, mkdir -p of its parents
            elif p in (cache, os.path.dirname(cache)) or os.path.dirname(p) == cache:
                kind = "cache"
            elif p in config:
                kind = "config"
            elif p == "/dev/null":
                kind = "helper"          # the uploader process's standard streams
            elif re.match(r"^/proc/(self|thread-self|\d+)(/|$)", p):
                kind = "proc"
            elif os.path.realpath(p) in mapped:
                kind = "mapped"
            elif p in debug:
                kind = "debug"
            elif p in ancestors:
                kind = "ancestor"
            elif allow and (p in LIBCURL_READS or LIBCURL_READS_RE.match(p)):
                kind = "libcurl"
            else:
                bad.append(p)
                continue
            seen_kinds.add(kind)
        return bad, seen_kinds

    def test_local_mode_reads_only_configuration_proc_self_and_mapped_elf_files(self):
        # Another program's entry in the symbol cache, as the tests before
        # this one leave there: the bound's scan looks at it.
        cache = os.path.join(os.environ["XDG_CACHE_HOME"], "pyroshim")
        os.makedirs(cache, mode=0o700, exist_ok=True)
        with open(os.path.join(cache, "0123456789abcdef0123456789abcdef01234567"), "wb") as f:
            f.write(b"not a cache file")
        log = os.path.join(self.tmp, "shim.log")
        shim_vars = {"PYROSCOPE_OUTPUT_DIR": self.out, "PYROSCOPE_APPLICATION_NAME": self.app,
                     "PYROSCOPE_LOG_FILE": log, "PYROSCOPE_LOG_LEVEL": "debug"}
        cwd, extra, mapped = self.extra_accesses(shim_vars)
        bad, kinds = self.unexplained(extra, mapped, cwd, config={log}, out=self.out)
        self.assertEqual(bad, [], "paths touched only with the shim, unexplained")
        # The classification saw the shim at work (not an empty trace).
        self.assertTrue({"output", "config", "proc", "mapped"} <= kinds, kinds)
        self.assertTrue(self.files())

    @unittest.skipUnless(shutil.which("openssl"), "openssl is not installed (Debian: openssl)")
    def test_server_mode_adds_only_what_libcurl_reads(self):
        d = os.path.join(self.tmp, "cert")
        os.mkdir(d)
        cert, key = make_cert(d, "peer", "IP:127.0.0.1,DNS:localhost")
        peer = self.peer("--tls-cert", cert, "--tls-key", key)
        shim_vars = {"PYROSCOPE_SERVER_ADDRESS": "https://localhost:%d" % peer.port,
                     "PYROSCOPE_CA_FILE": cert, "PYROSCOPE_APPLICATION_NAME": self.app,
                     "PYROSCOPE_LOG_LEVEL": "debug", "PYROSCOPE_FLUSH_TIMEOUT": "10s"}
        cwd, extra, mapped = self.extra_accesses(shim_vars)
        self.assertGreaterEqual(len(peer.ingest()), 1, "nothing was uploaded")
        bad, kinds = self.unexplained(extra, mapped, cwd, config={cert}, allow=True)
        self.assertEqual(bad, [], "paths touched only with the shim, unexplained")
        self.assertTrue({"config", "proc", "mapped", "libcurl"} <= kinds, kinds)
        self.assertTrue(any(os.path.basename(m).startswith("libcurl") for m in mapped), mapped)


if __name__ == "__main__":
    unittest.main()
