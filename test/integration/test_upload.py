"""Upload to a Pyroscope server (issue 4): real programs under the shim
talk to test/peer/pyroscope_peer.py, started here on a free loopback port;
what the peer accepted is decoded with go tool pprof and compared with the
local copy the same run wrote (PYROSCOPE_OUTPUT_DIR).

Why the comparisons are exact: the last export pass writes the local files
and queues the last interval from the same fold, and the intervals are
deltas of that fold's cumulative values, so the sum of every uploaded CPU
profile equals the local total to the nanosecond -- a request lost or sent
twice changes it.  Timing checks measure only what the shim adds (the time
between main's return and the reaped exit), never the program's own run
time, which a busy machine stretches at will."""
import base64
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import unittest

from common import (PROG, ROOT, ShimTest, clean_env, flat_and_cum, have_go, pprof_by_pid, pprof_raw,
                    read_folded, run)

PEER = os.path.join(ROOT, "test", "peer", "pyroscope_peer.py")


class Peer:
    """pyroscope_peer.py on a free port, in its own directory."""

    def __init__(self, tmp, *args):
        self.dir = tempfile.mkdtemp(prefix="peer-", dir=tmp)
        port_file = os.path.join(self.dir, "port")
        self.log = open(os.path.join(self.dir, "peer.stderr"), "wb")
        self.p = subprocess.Popen([sys.executable, PEER, "--dir", os.path.join(self.dir, "d"),
                                   "--port-file", port_file, "--max-seconds", "120"] + list(args),
                                  stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.monotonic() + 15
        while not os.path.exists(port_file):
            if self.p.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError("peer did not start: %s" % self.stderr())
            time.sleep(0.02)
        self.port = int(open(port_file).read())
        self.url = "http://127.0.0.1:%d" % self.port

    def stderr(self):
        with open(os.path.join(self.dir, "peer.stderr"), "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(timeout=10)
        self.log.close()

    def records(self, path_suffix=None):
        """Every accepted request's metadata, in arrival order; the payload
        path is added as 'payload'."""
        d = os.path.join(self.dir, "d")
        out = []
        for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if re.match(r"^\d{4}\.json$", f):
                with open(os.path.join(d, f)) as fh:
                    r = json.load(fh)
                if r.get("payload_file"):
                    r["payload"] = os.path.join(d, r["payload_file"])
                if path_suffix is None or r["path"].endswith(path_suffix):
                    out.append(r)
        return out

    def ingest(self, units=None):
        """Accepted profile uploads, through /ingest or the push API."""
        rs = [r for r in self.records() if r["path"].endswith(
            ("/ingest", "/push.v1.PusherService/Push"))]
        return [r for r in rs if units is None or r["units"] == units]

    def rejected(self):
        """(time, status, path, reason) of every fault or rejection."""
        path = os.path.join(self.dir, "d", "rejected.log")
        if not os.path.exists(path):
            return []
        out = []
        for line in open(path):
            t, status, p, reason = line.rstrip("\n").split(" ", 3)
            out.append((float(t), int(status), p, reason))
        return out


def free_port():
    """A loopback port nobody listens on (bound, then released)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def pprof_total(paths, index):
    """Sum of sample value `index` over the profiles, merged by go tool
    pprof (which adds up the samples of all its sources)."""
    env = dict(os.environ, PPROF_TMPDIR=tempfile.gettempdir(), HOME=os.environ.get("HOME", "/tmp"))
    p = subprocess.run(["go", "tool", "pprof", "-raw", "-symbolize=none"] + list(paths),
                       capture_output=True, text=True, env=env, timeout=120)
    if p.returncode != 0:
        raise AssertionError("go tool pprof failed: %s" % p.stderr)
    total, section = 0, False
    for line in p.stdout.splitlines():
        if line.startswith("Samples:"):
            section = True
        elif line.startswith("Locations"):
            section = False
        elif section:
            m = re.match(r"\s*([-\d\s]+):", line)
            if m:
                total += int(m.group(1).split()[index])
    return total


class PeerTest(ShimTest):
    """Peers started by `self.peer(...)`, stopped before the test's
    directory goes."""

    def setUp(self):
        super().setUp()
        self.peers = []

    def tearDown(self):
        for p in self.peers:
            p.stop()
        super().tearDown()

    def peer(self, *args):
        p = Peer(self.tmp, *args)
        self.peers.append(p)
        return p

    def assert_contiguous(self, recs, start=None):
        """Each request's from is the previous one's until (so none arrived
        twice), every interval is non-empty, and /ingest's query gives them
        in 19-digit nanoseconds (the push API carries them in the pprof)."""
        prev = start
        for r in sorted(recs, key=lambda r: r["from_ns"]):
            if r["kind"] != "push":
                self.assertRegex(r["query"]["from"], r"^\d{19}$")
                self.assertRegex(r["query"]["until"], r"^\d{19}$")
            self.assertLess(r["from_ns"], r["until_ns"])
            if prev is not None:
                self.assertEqual(r["from_ns"], prev, "intervals must line up: %s" %
                                 [(x["from_ns"], x["until_ns"]) for x in recs])
            prev = r["until_ns"]


class UploadTest(PeerTest):
    """A peer per test; `self.go(...)` runs a program against it."""

    app = "up"

    def env(self, server, **extra):
        e = {"PYROSCOPE_SERVER_ADDRESS": server, "PYROSCOPE_APPLICATION_NAME": self.app}
        e.update(extra)
        return clean_env(e)

    def local_pid(self):
        pids = {int(f.split(".")[1]) for f in self.files() if f.endswith(".cpu.pb.gz")}
        self.assertEqual(len(pids), 1, self.files())
        return pids.pop()


@unittest.skipUnless(have_go(), "go tool pprof is not installed")
class Periodic(UploadTest):
    def burn(self, peer, ms, **extra):
        opts = {"PYROSCOPE_UPLOAD_INTERVAL": "500ms", "PYROSCOPE_OUTPUT_DIR": self.out,
                "PYROSCOPE_ALLOC_SAMPLE_BYTES": "16384"}
        opts.update(extra)
        env = self.env(peer.url, **opts)
        r = run([os.path.join(PROG, "upload_burn"), str(ms)], env, timeout=60)
        self.assertEqual(r.rc, 0, r.err)
        self.assertEqual(r.err, b"", "the shim must be silent by default")
        return r

    def assert_delivered_once(self, peer):
        """CPU and allocations: contiguous intervals, and the uploads add
        up exactly to the local copy of the whole run."""
        cpu, alloc = peer.ingest("samples"), peer.ingest("bytes")
        pid = self.local_pid()
        for recs in (cpu, alloc):
            self.assertEqual(len({(r["from_ns"], r["until_ns"]) for r in recs}), len(recs),
                             "an interval arrived twice")
            self.assert_contiguous(recs)
        self.assertEqual(min(r["from_ns"] for r in cpu), min(r["from_ns"] for r in alloc))
        # An interval with nothing of one family is not sent: the last pass
        # at exit lasts a few milliseconds and, on a loaded machine, may hold
        # an allocation but no CPU sample (or the reverse).  So the two
        # families may end one pass apart, never more than one interval.
        self.assertLessEqual(abs(max(r["until_ns"] for r in cpu) - max(r["until_ns"] for r in alloc)),
                             500 * 1000 * 1000)
        local = self.profile(self.app, pid, "cpu.pb.gz")
        self.assertEqual(pprof_total([r["payload"] for r in cpu], 1), pprof_total([local], 1))
        self.assertEqual(pprof_total([r["payload"] for r in cpu], 0), pprof_total([local], 0))
        # alloc_space (index 1) sums over intervals like CPU.
        local = self.profile(self.app, pid, "alloc.pb.gz")
        self.assertEqual(pprof_total([r["payload"] for r in alloc], 1), pprof_total([local], 1))
        return cpu, alloc

    def test_push_api_delivers_every_interval_once_with_the_servers_labels(self):
        # PYROSCOPE_UPLOAD_API=push: the same profiles through
        # push.v1.PusherService/Push; the peer applies the server's label
        # rules (ValidateLabels) and the Connect protocol's content type.
        peer = self.peer()
        self.burn(peer, 1500, PYROSCOPE_UPLOAD_API="push",
                  PYROSCOPE_TAGS="env=dev,region.name=eu-1")
        self.assertEqual(peer.rejected(), [])
        recs = peer.ingest()
        self.assertEqual({r["kind"] for r in recs}, {"push"})
        for r in recs:
            self.assertEqual(r["content_type"], "application/proto")
            self.assertEqual(r["connect_protocol_version"], "1")
            self.assertEqual((r["series"], r["samples_per_series"]), (1, [1]))
            want = {"__name__": "process_cpu" if r["units"] == "samples" else "memory",
                    "__delta__": "false", "service_name": self.app, "pyroscope_spy": "pyroshim",
                    "env": "dev", "region_name": "eu-1"}
            self.assertEqual(r["push_labels"], want)
        cpu, alloc = peer.ingest("samples"), peer.ingest("bytes")
        self.assertGreaterEqual(len(cpu), 2)
        pid = self.local_pid()
        for recs, kind, idx in ((cpu, "cpu", 1), (alloc, "alloc", 1)):
            self.assert_contiguous(recs)
            local = self.profile(self.app, pid, kind + ".pb.gz")
            self.assertEqual(pprof_total([x["payload"] for x in recs], idx),
                             pprof_total([local], idx))

    def test_long_program_uploads_every_interval_contiguously(self):
        peer = self.peer()
        self.burn(peer, 2000)
        cpu, alloc = self.assert_delivered_once(peer)
        # 2 s of CPU at 500 ms intervals: at least 2 passes before exit.
        self.assertGreaterEqual(len(cpu), 3, [(r["from_ns"], r["until_ns"]) for r in cpu])
        self.assertGreaterEqual(len(alloc), 3)
        burn = total = 0
        for r in cpu:
            self.assertEqual((r["app_name"], r["spy_name"], r["sample_rate"], r["units"],
                              r["aggregation_type"], r["kind"], r["query"].get("format")),
                             (self.app, "pyroshim", "100", "samples", "sum", "pprof-multipart",
                              None))
            self.assertEqual(r["fields"], ["profile"])
            _, samples = pprof_raw(r["payload"])
            _, cum = flat_and_cum(samples, 0)
            n = sum(v[0] for v, _ in samples)
            burn, total = burn + cum.get("burn_cpu", 0), total + n
            # burn_cpu holds ~95% of the CPU (the rest is the loop's clock
            # reads and burn_alloc).  A full 500 ms interval has ~50 samples,
            # where a share under half is a binomial tail of ~1e-20; the exit
            # pass may hold one or two samples of main or exit, where a
            # share says nothing, so it is judged only in the whole-run sum.
            if n >= 20:
                self.assertGreater(cum.get("burn_cpu", 0), 0.5 * n)
        self.assertGreater(burn, 0.8 * total)
        for r in alloc:
            self.assertEqual(r["fields"], ["profile", "sample_type_config"])
            self.assertEqual(r["sample_type_config"]["inuse_space"]["aggregation"], "average")
            types, samples = pprof_raw(r["payload"])
            self.assertEqual(types, ["alloc_objects", "alloc_space", "inuse_objects", "inuse_space"])
            # In-use is a snapshot: every interval holds the ~1 MiB live set
            # (64 blocks of 16 KiB), not a delta that would go to zero.
            _, cum = flat_and_cum(samples, 3)
            self.assertGreater(cum.get("burn_alloc", 0), 256 << 10)

    def test_program_that_never_allocates_uploads_every_interval_too(self):
        # Nothing pokes the uploader thread awake from malloc here: with a
        # server it must run from the start.
        peer = self.peer()
        env = self.env(peer.url, PYROSCOPE_UPLOAD_INTERVAL="500ms")
        r = run([os.path.join(PROG, "spin"), "1500"], env, timeout=60)
        self.assertEqual((r.rc, r.err), (0, b""))
        cpu = peer.ingest("samples")
        self.assertGreaterEqual(len(cpu), 2, [(x["from_ns"], x["until_ns"]) for x in cpu])
        self.assert_contiguous(cpu)

    def test_500_then_success_delivers_everything_once(self):
        peer = self.peer("--status", "500", "--fail-first", "1")
        self.burn(peer, 2500)
        faults = peer.rejected()
        self.assertEqual([f[1] for f in faults], [500])
        cpu, _ = self.assert_delivered_once(peer)
        # The refused request was the first CPU interval: it came back.
        self.assertIn("from=%d" % min(r["from_ns"] for r in cpu), faults[0][2])

    def test_429_retry_after_is_honoured(self):
        peer = self.peer("--status", "429", "--retry-after", "2", "--fail-first", "1")
        self.burn(peer, 3500)
        (t_fault, status, path, _), = peer.rejected()
        self.assertEqual(status, 429)
        q = dict(kv.split("=", 1) for kv in path.split("?", 1)[1].split("&"))
        again = [r for r in peer.ingest() if r["query"]["from"] == q["from"]
                 and r["query"]["units"] == q["units"]]
        self.assertEqual(len(again), 1)
        # The retry is due 2 s after the answer, which follows the fault log.
        self.assertGreaterEqual(again[0]["received_at"] - t_fault, 2.0)
        self.assert_delivered_once(peer)

    def test_folded_format_carries_names_units_and_totals(self):
        peer = self.peer()
        self.burn(peer, 600, PYROSCOPE_INGEST_FORMAT="folded", PYROSCOPE_UPLOAD_INTERVAL="1m")
        recs = peer.ingest()
        got = {r["app_name"]: r for r in recs}
        self.assertEqual(len(got), len(recs), "one request per type")
        want = {"cpu": ("samples", "sum", "1000000000"),
                "alloc_objects": ("objects", "sum", None), "alloc_space": ("bytes", "sum", None),
                "inuse_objects": ("objects", "average", None),
                "inuse_space": ("bytes", "average", None)}
        self.assertEqual(sorted(got), sorted("%s.%s" % (self.app, t) for t in want))
        pid = self.local_pid()
        for t, (units, agg, rate) in want.items():
            r = got["%s.%s" % (self.app, t)]
            self.assertEqual((r["kind"], r["units"], r["aggregation_type"], r["sample_rate"],
                              r["spy_name"]), ("folded", units, agg, rate, "pyroshim"), t)
            self.assertEqual(r["query"]["name"], "%s.%s{}" % (self.app, t))
            # One interval covering the run: the same numbers as the
            # local folded file of the whole run.
            local = read_folded(self.profile(self.app, pid, "%s.folded" % t))
            self.assertEqual(read_folded(r["payload"]), local, t)
        self.assertTrue(any(s.endswith("burn_cpu") for s in read_folded(got[self.app + ".cpu"]["payload"])))


@unittest.skipUnless(have_go(), "go tool pprof is not installed")
class Delivery(UploadTest):
    def spin(self, env, ms=150):
        r = run([os.path.join(PROG, "spin"), str(ms)], env, timeout=60)
        self.assertEqual(r.rc, 0, r.err)
        return r

    def test_short_program_uploads_once_at_exit(self):
        peer = self.peer()
        t0 = time.time_ns()
        r = self.spin(self.env(peer.url), ms=200)
        t1 = time.time_ns()
        self.assertEqual(r.err, b"")
        cpu = peer.ingest("samples")
        self.assertEqual(len(cpu), 1, cpu)
        self.assertLessEqual(len(peer.ingest()), 2)   # at most one allocation profile
        # One interval: from start-up to exit.
        self.assertTrue(t0 <= cpu[0]["from_ns"] < cpu[0]["until_ns"] <= t1)
        _, samples = pprof_raw(cpu[0]["payload"])
        self.assertGreater(sum(v[1] for v, _ in samples), 100e6)

    def test_tags_basic_auth_tenant_and_headers_arrive_as_sent(self):
        peer = self.peer("--require-basic", "alice:s3cr3t pass", "--require-tenant", "team-7")
        extra = {"PYROSCOPE_TAGS": "env=dev,region=eu-1,version=1.0.0",
                 "PYROSCOPE_BASIC_AUTH_USER": "alice", "PYROSCOPE_BASIC_AUTH_PASSWORD": "s3cr3t pass",
                 "PYROSCOPE_TENANT_ID": "team-7",
                 "PYROSCOPE_HTTP_HEADERS": '{"X-Extra":"one two","X-Other":"3"}'}
        r = self.spin(self.env(peer.url, **extra))
        self.assertEqual(r.err, b"")
        (rec,) = peer.ingest("samples")
        self.assertEqual(rec["query"]["name"], "up{env=dev,region=eu-1,version=1.0.0}")
        self.assertEqual(rec["labels"], {"env": "dev", "region": "eu-1", "version": "1.0.0"})
        h = rec["headers"]
        self.assertEqual(h["Authorization"], "Basic " + base64.b64encode(b"alice:s3cr3t pass").decode())
        self.assertEqual((h["X-Scope-OrgID"], h["X-Extra"], h["X-Other"]), ("team-7", "one two", "3"))
        # Secrets stay out of the log even at the most verbose level.
        r = self.spin(self.env(peer.url, PYROSCOPE_LOG_LEVEL="debug", **extra))
        self.assertNotIn(b"s3cr3t", r.err)
        self.assertEqual(len(peer.ingest("samples")), 2)

    def test_user_info_in_url_and_bearer_token(self):
        peer = self.peer("--require-basic", "bob:pw")
        self.assertEqual(self.spin(self.env("http://bob:pw@127.0.0.1:%d" % peer.port)).err, b"")
        (rec,) = peer.ingest("samples")
        self.assertEqual(rec["headers"]["Authorization"], "Basic " + base64.b64encode(b"bob:pw").decode())
        peer = self.peer("--require-bearer", "tok-123")
        self.assertEqual(self.spin(self.env(peer.url, PYROSCOPE_AUTH_TOKEN="tok-123")).err, b"")
        (rec,) = peer.ingest("samples")
        self.assertEqual(rec["headers"]["Authorization"], "Bearer tok-123")
        # The peer does enforce it: a wrong token is refused (401, not retried).
        self.assertEqual(self.spin(self.env(peer.url, PYROSCOPE_AUTH_TOKEN="wrong")).err, b"")
        self.assertEqual(len(peer.ingest("samples")), 1)
        self.assertEqual([f[1] for f in peer.rejected()], [401])

    def test_bad_tag_is_dropped_with_one_line_and_the_rest_arrive(self):
        peer = self.peer()
        r = self.spin(self.env(peer.url, PYROSCOPE_TAGS="env=dev,bad-name=x,zone=b"))
        lines = r.err.decode().splitlines()
        self.assertEqual(len(lines), 1, r.err)
        self.assertTrue(lines[0].startswith("pyroshim: PYROSCOPE_TAGS"), lines)
        self.assertIn("bad-name", lines[0])
        (rec,) = peer.ingest("samples")
        self.assertEqual(rec["labels"], {"env": "dev", "zone": "b"})
        self.assertEqual(rec["query"]["name"], "up{env=dev,zone=b}")

    def test_forked_child_is_in_its_programs_uploads_with_its_own_work(self):
        # A fork child has its parent's name: one series, one request per
        # interval for both (group.h), each sample labelled with its pid.
        peer = self.peer()
        r = run([os.path.join(PROG, "forker"), "600"], self.env(peer.url), timeout=60)
        self.assertEqual(r.rc, 0, r.err)
        self.assertEqual(r.err, b"")
        child = int(r.out.split()[-1])
        cpu = peer.ingest("samples")
        self.assertGreaterEqual(len(cpu), 1)
        self.assertEqual(len({x["from_ns"] for x in cpu}), len(cpu), "an interval arrived twice")
        self.assertEqual(len({x["query"]["name"] for x in cpu}), 1)
        work = {}
        for rec in cpu:
            _, by_pid = pprof_by_pid(rec["payload"])
            for pid, samples in by_pid.items():
                _, cum = flat_and_cum(samples, 1)
                w = work.setdefault(pid, [0, 0])
                w[0] += cum.get("parent_work", 0)
                w[1] += cum.get("child_work", 0)
        self.assertEqual(set(work), {r.pid, child}, work)
        self.assertGreater(work[r.pid][0], 0)
        self.assertEqual(work[r.pid][1], 0)
        self.assertEqual(work[child][0], 0, "the child must not resend its parent's data")
        self.assertGreater(work[child][1], 0)


class Unreachable(UploadTest):
    """Only what the shim adds to the exit counts: the time from main's
    return (printed by upload_burn) to the reaped exit."""

    def exit_delay(self, env, ms=1200):
        r = run([os.path.join(PROG, "upload_burn"), str(ms)], env, timeout=60)
        reaped = time.monotonic_ns()
        self.assertEqual(r.rc, 0, r.err)
        self.assertEqual(r.err, b"")
        return (reaped - int(r.out.split()[-1])) / 1e9

    def test_server_down_changes_neither_exit_code_nor_exit_time(self):
        # The first pass fails at 500 ms and waits for its retry; the exit
        # gets one refused attempt per queued request, which is immediate.
        base = self.exit_delay(clean_env({"PYROSCOPE_OUTPUT_DIR": self.out}))
        down = self.exit_delay(self.env("http://127.0.0.1:%d" % free_port(),
                                        PYROSCOPE_UPLOAD_INTERVAL="500ms"))
        self.assertLess(down, base + 0.5, "exit took %.2fs, %.2fs without a server" % (down, base))
        r = run([os.path.join(PROG, "trace_exit"), "3", "exit", "50"],
                self.env("http://127.0.0.1:%d" % free_port()), timeout=30)
        self.assertEqual((r.rc, r.err), (3, b""))

    def test_server_that_never_answers_delays_exit_by_flush_timeout_at_most(self):
        for interval in ("500ms", "1m"):
            # 500ms: the uploader is stuck in a request when the program
            # ends.  1m: the only request is the one at exit.
            peer = self.peer("--hang")
            delay = self.exit_delay(self.env(peer.url, PYROSCOPE_FLUSH_TIMEOUT="1s",
                                             PYROSCOPE_UPLOAD_INTERVAL=interval))
            self.assertLess(delay, 1.0 + 1.0, interval)
            self.assertGreaterEqual(len(peer.rejected()), 1, "the peer saw no request")


def pb_bytes(field, data):
    """One length-delimited protobuf field."""
    n, out = len(data), bytearray()
    out.append(field << 3 | 2)
    while n >= 0x80:
        out.append(n & 0x7f | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out) + data


def push_request(labels, profile):
    """A PushRequest of one series (push.proto)."""
    series = b"".join(pb_bytes(1, pb_bytes(1, k.encode()) + pb_bytes(2, v.encode()))
                      for k, v in labels)
    series += pb_bytes(2, pb_bytes(1, profile) + pb_bytes(2, b"id"))
    return pb_bytes(1, series)


class PushPeerRules(PeerTest):
    """The peer refuses what Pyroscope's push API refuses, so a shim that
    sent it would fail the tests that use the peer."""

    def post(self, peer, body, ctype="application/proto"):
        import urllib.error
        import urllib.request
        rq = urllib.request.Request(peer.url + "/push.v1.PusherService/Push", data=body,
                                    headers={"Content-Type": ctype}, method="POST")
        try:
            with urllib.request.urlopen(rq, timeout=10) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    def test_push_rules(self):
        peer = self.peer()
        # A minimal valid pprof: string_table [""], one sample type.
        prof = pb_bytes(1, b"\x08\x01\x10\x02") + pb_bytes(6, b"") + pb_bytes(6, b"cpu") + \
            pb_bytes(6, b"nanoseconds")
        good = [("__name__", "process_cpu"), ("service_name", "app"), ("env", "dev")]
        self.assertEqual(self.post(peer, push_request(good, prof)), 200)
        for why, labels, ctype, want in (
                ("content type", good, "application/json", 415),
                ("no service_name", good[:1], "application/proto", 400),
                ("no __name__", good[1:], "application/proto", 400),
                ("duplicate", good + [("env", "prod")], "application/proto", 400),
                ("clash after '.' -> '_'", good + [("a.b", "1"), ("a_b", "2")],
                 "application/proto", 400),
                ("bad name", good + [("9x", "1")], "application/proto", 400),
                ("31 labels", good + [("k%d" % i, "v") for i in range(28)],
                 "application/proto", 400)):
            with self.subTest(why=why):
                self.assertEqual(self.post(peer, push_request(labels, prof), ctype), want)
        self.assertEqual(self.post(peer, push_request(good, b"\x1f\x8bnot gzip")), 422)
        self.assertEqual(self.post(peer, b"\x0a\xff"), 400)


if __name__ == "__main__":
    unittest.main()
