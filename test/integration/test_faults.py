"""Faults (issue 7, items 6 and 7): a Pyroscope server that rejects (413,
422), answers garbage, closes or resets the connection, answers slowly or
refuses, and a local output directory that is read-only, full, over
RLIMIT_FSIZE, a symlink, a planted file or another user's.  (Connection
refused and a server that never answers, as they bear on the exit time,
are in test_upload.py.)

What is proven in every case: the host (test/prog/fault_host, whose stdout,
stderr and exit status are fixed) behaves exactly as without the shim --
same stdout, same stderr, same exit status, so no crash and no fatal
signal -- and its exit is not held up beyond the flush timeout.  At the
default log level the shim adds nothing to stderr, except one line for an
output directory it refuses (a configuration mistake).  What the shim did instead is read from outside:
the peer's log of every attempt (test/peer/pyroscope_peer.py), the delivery
counters the shim writes into the comments of its local pprof files
("uploads: S sent, F failed, D dropped, R retries"), its warnings at
PYROSCOPE_LOG_LEVEL=warn, the peak RSS (wait4), and the file system.

Why the counts are exact: an export pass writes its comments, queues its
requests, all under the worker's lock, then sends those due one at a time
with the lock released (a request in flight is accounted for in each
assertion that it bears on); the last pass,
at exit, writes the local files with the counters as they stand before it
and then gives everything still queued one more attempt.  So the counters
of the last local profile account for every attempt the peer logged
except those of that final flush -- the last attempt of each request --
and the peer's log says which those were.  Nothing else decides the
outcome; on a busy machine only the number of passes varies, and every
assertion holds for any number of passes."""
import os
import re
import resource
import shutil
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.parse

from common import PROG, SHIM, ShimTest, clean_env, have_go, helper_log
from test_upload import PeerTest, free_port, pprof_total

HOST = os.path.join(PROG, "fault_host")
APP = "fh"
NOBODY = 65534
MiB = 1 << 20
QUEUE_BYTES = 16 * MiB     # PS_UPLOAD_QUEUE_BYTES, pyroshim(7) UPLOAD
ATTEMPTS = 6               # PS_UPLOAD_ATTEMPTS: "six attempts at most"
UPLOADS = re.compile(r"uploads: (\d+) sent, (\d+) failed, (\d+) dropped, (\d+) retries")


class HostRun:
    def __init__(self, rc, out, err, wall, maxrss, reaped_ns):
        self.rc, self.out, self.err, self.wall = rc, out, err, wall
        self.maxrss = maxrss            # bytes (ru_maxrss is in KiB)
        self.reaped_ns = reaped_ns      # CLOCK_MONOTONIC when wait4 returned


def run_host(argv, env, timeout=60, **popen):
    """common.run, plus the child's peak RSS and Popen options (user,
    preexec_fn).  Output goes through pipes, not files, so a file-size
    limit on the host applies only to the files it writes itself."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, **popen)
    got = {}

    def drain(name, f):
        got[name] = f.read()
    readers = [threading.Thread(target=drain, args=(n, f)) for n, f in
               (("out", p.stdout), ("err", p.stderr))]
    for t in readers:
        t.start()
    deadline = t0 + timeout
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            reaped = time.monotonic_ns()
            break
        if time.monotonic() > deadline:
            p.kill()
            os.wait4(p.pid, 0)
            p.returncode, status = -9, None   # reaped here, not by Popen
            break
        time.sleep(0.01)
    for t in readers:
        t.join(timeout=10)
    p.stdout.close()
    p.stderr.close()
    if status is None:
        raise AssertionError("timed out after %ss: %s" % (timeout, argv))
    p.returncode = os.waitstatus_to_exitcode(status)
    return HostRun(p.returncode, got.get("out", b""), got.get("err", b""),
                   time.monotonic() - t0, ru.ru_maxrss * 1024, reaped)


def upload_counts(path):
    """The delivery counters in the comments of a local pprof file."""
    env = dict(os.environ, PPROF_TMPDIR=tempfile.gettempdir(), HOME=os.environ.get("HOME", "/tmp"))
    p = subprocess.run(["go", "tool", "pprof", "-comments", path], capture_output=True,
                       text=True, env=env, timeout=60)
    m = UPLOADS.search(p.stdout)
    if p.returncode or not m:
        raise AssertionError("no upload counters in %s: %s%s" % (path, p.stdout, p.stderr))
    return dict(zip(("sent", "failed", "dropped", "retries"), map(int, m.groups())))


def attempts(peer):
    """{(name, from, until, units): [peer time of each attempt]} from the
    peer's fault log, and the set of statuses it answered."""
    out, statuses = {}, set()
    for t, status, path, _ in peer.rejected():
        q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(path).query))
        out.setdefault((q["name"], int(q["from"]), int(q["until"]), q["units"]), []).append(t)
        statuses.add(status)
    return out, statuses


def shim_lines(err):
    """stderr split into the shim's lines and the host's own."""
    shim, host = [], []
    for line in err.decode(errors="replace").splitlines(keepends=True):
        (shim if line.startswith("pyroshim") else host).append(line)
    return shim, "".join(host).encode()


class FaultTest(ShimTest):
    """fault_host runs, each compared with the same run without the shim."""

    _baselines = {}

    def host_argv(self, ms, stacks=16, stamp=None, host=HOST):
        return [host, str(ms), "3", str(stacks)] + ([stamp] if stamp else [])

    def baseline(self, argv, **popen):
        """The run without the shim (cached: its output does not vary).
        The stamp file argument, if any, only changes what is timed."""
        key = (tuple(argv[:4]), repr(sorted(popen.items())))
        if key not in self._baselines:
            stamp = os.path.join(self.tmp, "baseline.stamp") if len(argv) > 4 else None
            r = run_host(argv[:4] + ([stamp] if stamp else []), clean_env(preload=False),
                         timeout=60, **popen)
            self.assertEqual(r.rc, 3, r.err)
            FaultTest._baselines[key] = r
        return self._baselines[key]

    def assert_unchanged(self, r, base, shim_allowed=False):
        """Same stdout, stderr and exit status as without the shim.  With
        shim_allowed (a raised log level), the shim's own lines are set
        aside first and returned."""
        self.assertEqual(r.rc, base.rc, "exit status changed (negative: killed by that signal); "
                         "stderr: %r" % r.err[-2000:])
        self.assertEqual(r.out, base.out, "stdout changed")
        shim, host_err = shim_lines(r.err)
        if shim_allowed:
            self.assertEqual(host_err, base.err, "the host's own stderr changed")
            return shim
        self.assertEqual(r.err, base.err, "stderr changed: the shim must be silent by default")
        return []


@unittest.skipUnless(have_go(), "go tool pprof is not installed")
class ServerFaults(PeerTest, FaultTest):
    """Server faults, with local files written as well (their comments
    carry the counters)."""

    FLUSH = 2.0

    def setUp(self):
        super().setUp()
        self.runs = 0

    def go(self, url, ms, stacks=16, **extra):
        """One run of the host against url (None: no server); returns the
        run, the run without the shim, the output directory and the seconds
        from main's return to the reaped exit."""
        self.runs += 1
        out = os.path.join(self.tmp, "out%d" % self.runs)
        stamp = os.path.join(self.tmp, "stamp%d" % self.runs)
        env = {"PYROSCOPE_APPLICATION_NAME": APP, "PYROSCOPE_OUTPUT_DIR": out,
               "PYROSCOPE_UPLOAD_INTERVAL": "250ms", "PYROSCOPE_FLUSH_TIMEOUT": "%gs" % self.FLUSH,
               # Every allocation sampled: the live blocks put an in-use
               # snapshot, so an allocation request, into every pass.
               "PYROSCOPE_ALLOC_SAMPLE_BYTES": "1"}
        if url:
            env["PYROSCOPE_SERVER_ADDRESS"] = url
        env.update(extra)
        argv = self.host_argv(ms, stacks, stamp)
        r = run_host(argv, clean_env(env), timeout=90)
        base = self.baseline(argv)
        delay = float("inf")    # main never returned: assert_unchanged says why
        if os.path.exists(stamp):
            with open(stamp) as f:
                delay = (r.reaped_ns - int(f.read())) / 1e9
        return r, base, out, delay

    def local_cpu(self, out):
        (f,) = [f for f in os.listdir(out) if f.endswith(".cpu.pb.gz")]
        return os.path.join(out, f)

    def test_413_and_422_are_dropped_at_once_and_counted_as_failed(self):
        for status in (413, 422):
            with self.subTest(status=status):
                peer = self.peer("--status", str(status))
                r, base, out, delay = self.go(peer.url, 1000)
                self.assert_unchanged(r, base)
                self.assertLess(delay, self.FLUSH + 1.0, "exit held up %.2fs" % delay)
                tries, statuses = attempts(peer)
                self.assertEqual(statuses, {status})
                self.assertEqual(peer.ingest(), [])
                self.assertEqual({k: len(v) for k, v in tries.items() if len(v) != 1}, {},
                                 "a rejected request was tried again")
                # Every request is in the peer's log once; those of the
                # last pass (the latest `until`) came after the counters
                # were written, every other one is counted as failed --
                # but the two of the pass before, at most, if the uploader
                # had one in flight (sent without the worker lock) and the
                # other still queued when the last pass ran: the queued
                # one then goes out with the final flush.
                last = max(k[2] for k in tries)
                before = sum(1 for k in tries if k[2] < last)
                # 1 s of CPU at 250 ms intervals: the first pass (a CPU and
                # an allocation request) is long over before the exit.
                self.assertGreaterEqual(before, 2, sorted(tries))
                counts = upload_counts(self.local_cpu(out))
                self.assertIn(counts["failed"], (before - 2, before - 1, before), (counts, before))
                self.assertEqual(counts, dict(counts, sent=0, dropped=0, retries=0))

    def test_rejection_is_one_warning_per_request_with_the_servers_message(self):
        # pyroshim(7): "other 4xx answers are dropped at once and logged at
        # level warn with the server's message".
        peer = self.peer("--status", "413")
        r, base, _, _ = self.go(peer.url, 600, PYROSCOPE_LOG_LEVEL="warn")
        lines = self.assert_unchanged(r, base, shim_allowed=True)
        tries, _ = attempts(peer)
        want = re.compile(r"^pyroshim\[\d+\]: warn: (cpu|alloc) upload rejected: HTTP 413: "
                          r"pyroscope_peer injected status 413\n$")
        self.assertEqual([l for l in lines if not want.match(l)], [])
        self.assertEqual(len(lines), sum(len(v) for v in tries.values()))

    def test_garbage_close_and_reset_are_retried_then_counted(self):
        # Connection-level failures are retryable (pyroshim(7) UPLOAD):
        # backoff from 1 s (+-25 % jitter), at most six attempts, and one
        # last attempt each at exit within the flush timeout.
        for mode in (["--garbage"], ["--close"], ["--cut", "200"]):
            with self.subTest(mode=mode):
                peer = self.peer(*mode)
                # 2.5 s of CPU: the first pass (500 ms) is retried after at
                # most 1.25 s, a second before the program ends.  Two
                # requests per pass: the queue (32) fills only if the run
                # takes 8 s, and none reaches its sixth attempt before 15 s.
                r, base, out, delay = self.go(peer.url, 2500, PYROSCOPE_UPLOAD_INTERVAL="500ms")
                self.assert_unchanged(r, base)
                self.assertLess(delay, self.FLUSH + 1.0, "exit held up %.2fs" % delay)
                self.assertEqual(peer.ingest(), [], "the peer accepted nothing")
                self.assertEqual(peer.stderr(), "")
                tries, _ = attempts(peer)
                counts = upload_counts(self.local_cpu(out))
                # Nothing was sent, nothing had used up its attempts when
                # the counters were written, the queue never filled: every
                # attempt but each request's last (at exit) is a counted
                # retry.
                self.assertEqual((counts["sent"], counts["failed"], counts["dropped"]), (0, 0, 0))
                total = sum(len(v) for v in tries.values())
                # One attempt fewer if the uploader had one in flight
                # (sent without the worker lock) when the last pass wrote
                # the counters: that request gets no attempt at exit.
                self.assertIn(counts["retries"], (total - len(tries) - 1, total - len(tries)),
                              "%d requests, %d attempts" % (len(tries), total))
                self.assertGreaterEqual(counts["retries"], 1)
                for key, times in tries.items():
                    self.assertLessEqual(len(times), ATTEMPTS, key)
                    # The retries before the final one follow the backoff:
                    # the k-th waits at least 0.75 * 2^k s.
                    for k in range(len(times) - 2):
                        self.assertGreaterEqual(times[k + 1] - times[k], 0.75 * 2 ** k - 0.01,
                                                (key, times))

    def test_reset_in_the_middle_of_large_bodies_at_exit(self):
        # One upload, at exit, so every request is sent from the host's own
        # exiting thread: four folded allocation bodies of ~2 MB (2048 long
        # stacks) and a CPU one, each reset by the peer after 200 bytes.
        # libcurl is then blocked sending (loopback buffers hold less than
        # 2 MB) or checking for an early answer: the reset reaches it as
        # ECONNRESET or EPIPE, and a SIGPIPE would kill the host.  The
        # queue (16 MiB) holds all five, so each gets its one attempt.
        peer = self.peer("--cut", "200")
        r, base, out, delay = self.go(peer.url, 300, stacks=2048, PYROSCOPE_UPLOAD_INTERVAL="1m",
                                      PYROSCOPE_INGEST_FORMAT="folded")
        self.assert_unchanged(r, base)
        self.assertLess(delay, self.FLUSH + 1.0, "exit held up %.2fs" % delay)
        self.assertEqual(peer.stderr(), "")
        tries, _ = attempts(peer)
        self.assertEqual(sorted(len(v) for v in tries.values()), [1] * 5, tries)
        self.assertEqual(sorted(k[0] for k in tries), ["%s.%s{}" % (APP, t) for t in (
            "alloc_objects", "alloc_space", "cpu", "inuse_objects", "inuse_space")])
        big = [f for f in os.listdir(out) if f.endswith(".inuse_space.folded")]
        self.assertGreater(os.path.getsize(os.path.join(out, big[0])), 1.5 * MiB)
        self.assertEqual(upload_counts(self.local_cpu(out)),
                         {"sent": 0, "failed": 0, "dropped": 0, "retries": 0})

    def test_slow_server_gets_every_interval_once(self):
        # Each answer 0.5 s late, well below the 10 s request timeout.  A
        # pass every 1.5 s queues two requests (CPU, allocations): 1 s of
        # answers, so the server keeps up even when a loaded machine makes
        # the run twice as long.  The exit waits for the request in flight,
        # then sends what is left: at most two passes' requests, ~2.5 s of
        # the 8 s flush timeout.
        peer = self.peer("--slow", "0.5")
        r, base, out, delay = self.go(peer.url, 2000, PYROSCOPE_UPLOAD_INTERVAL="1500ms",
                                      PYROSCOPE_FLUSH_TIMEOUT="8s")
        self.assert_unchanged(r, base)
        self.assertLess(delay, 8 + 1.0)
        self.assertEqual(peer.rejected(), [])
        cpu, alloc = peer.ingest("samples"), peer.ingest("bytes")
        self.assertGreaterEqual(len(cpu), 2, "an interval pass and the last one")
        for recs in (cpu, alloc):
            self.assert_contiguous(recs)
        # Everything arrived: the uploads add up to the local profile of
        # the whole run, to the nanosecond.
        local = self.local_cpu(out)
        self.assertEqual(pprof_total([x["payload"] for x in cpu], 1), pprof_total([local], 1))
        # The counters of the last pass: nothing failed, dropped or retried;
        # at most every earlier request sent.
        last = max(x["until_ns"] for x in cpu + alloc)
        before = sum(1 for x in cpu + alloc if x["until_ns"] < last)
        counts = upload_counts(local)
        self.assertEqual(counts, dict(counts, failed=0, dropped=0, retries=0))
        self.assertLessEqual(counts["sent"], before)

    def last_flush(self, log):
        """(sent, failed, dropped) of the log's one line on the last flush,
        the only word on what the exit's requests became.  The helper may
        write it just after the program is gone (both stop waiting at the
        same deadline): read once the helper's own last line is there."""
        end = time.monotonic() + 10
        while True:
            with open(log) as f:
                text = f.read()
            if "uploader: helper used" in text or time.monotonic() > end:
                break
            time.sleep(0.05)
        m = re.findall(r"after the last flush: uploads: (\d+) sent, (\d+) failed, "
                       r"(\d+) dropped", text)
        self.assertEqual(len(m), 1, "one last flush: " + text[-3000:])
        return tuple(map(int, m[0]))

    def test_server_that_falls_behind_gets_what_the_flush_timeout_allows_and_the_rest_is_counted(self):
        # Answers 1 s late, two requests every 500 ms: the queue grows, and
        # the exit's flush timeout (3 s) cuts it.
        log = os.path.join(self.tmp, "behind.log")
        peer = self.peer("--slow", "1")
        r, base, out, delay = self.go(peer.url, 1500, PYROSCOPE_UPLOAD_INTERVAL="500ms",
                                      PYROSCOPE_FLUSH_TIMEOUT="3s", PYROSCOPE_LOG_LEVEL="debug",
                                      PYROSCOPE_LOG_FILE=log)
        self.assert_unchanged(r, base)
        self.assertLess(delay, 3 + 1.0)
        sent, failed, dropped = self.last_flush(log)
        got = peer.ingest("samples") + peer.ingest("bytes")
        self.assertEqual(len({(x["units"], x["from_ns"]) for x in got}), len(got),
                         "an interval arrived twice")
        self.assertGreater(failed, 0, "the flush timeout did not cut the queue: not this case")
        self.assertEqual(dropped, 0)
        # A request cut by the deadline may still reach the peer: counted
        # as failed, yet delivered.  Never the other way round.
        self.assertLessEqual(sent, len(got))
        self.assertLessEqual(len(got), sent + failed)

    # Found here: at exit, the last pass sent the queue and the process
    # ended under the request the sending thread still had in flight: never
    # counted, and lost if it had not arrived yet.  The last pass now waits
    # for it once the queue is sent, within the flush timeout.
    def test_request_in_flight_at_exit_is_waited_for_and_counted(self):
        # The first request hangs (past the run and the flush timeout);
        # the rest are answered at once.
        log = os.path.join(self.tmp, "flight.log")
        peer = self.peer("--hang", "--fail-first", "1")
        r, base, out, delay = self.go(peer.url, 1500, PYROSCOPE_UPLOAD_INTERVAL="500ms",
                                      PYROSCOPE_FLUSH_TIMEOUT="2s", PYROSCOPE_LOG_LEVEL="debug",
                                      PYROSCOPE_LOG_FILE=log)
        self.assert_unchanged(r, base)
        self.assertLess(delay, 2 + 1.0)
        counts = self.last_flush(log)
        got = peer.ingest("samples") + peer.ingest("bytes")
        # The queue did not wait behind the hung request: every other one
        # arrived, and the hung one is the one failure.
        self.assertEqual(counts, (len(got), 1, 0))
        with open(log) as f:
            self.assertIn("request in flight is not confirmed", f.read())
        self.assertGreaterEqual(len(got), 4)

    # Found here: the uploader held the worker lock for the whole of a
    # request (up to 10 s), so while a server did not answer, the local
    # files were not rewritten, and at exit the last pass -- local files
    # included -- was skipped once the flush timeout had passed waiting
    # for that lock (the local profile of this 1.5 s run held its first
    # 0.5 s).  Requests are now sent with the lock released.
    def test_server_that_never_answers_does_not_cost_the_local_files(self):
        peer = self.peer("--hang")
        r, base, out, delay = self.go(peer.url, 1500, PYROSCOPE_UPLOAD_INTERVAL="500ms",
                                      PYROSCOPE_FLUSH_TIMEOUT="1s")
        self.assert_unchanged(r, base)
        self.assertLess(delay, 1.0 + 1.0, "exit held up %.2fs" % delay)
        self.assertGreaterEqual(len(peer.rejected()), 1, "the peer saw no request")
        # pyroshim(7) FILES: rewritten every interval and at exit, each time
        # holding the whole run.  The CPU total matches rusage within 1 %
        # (test_cpu.py); 80 % of the 1.5 s burnt leaves room for the
        # samples of start-up and a busy machine.
        self.assertGreaterEqual(pprof_total([self.local_cpu(out)], 1), 0.8 * 1.5e9)

    def test_queue_memory_stays_bounded_against_a_refusing_server(self):
        # 4096 live blocks from 4096 distinct stacks with long function
        # names, folded uploads: every pass queues two in-use requests of
        # ~3.7 MB (the size of the local inuse_*.folded files) and three
        # small ones, so 2 s of 100 ms passes would queue ~70 MB if nothing
        # were dropped, and ~45 MB under the count bound (32) alone.  The
        # program runs 5 s: a pass of 4096 stacks takes 0.2-0.5 s on a busy
        # machine, and 2 s of them dropped too few (3 of 3.7 MB) to tell
        # the bound from none.
        opts = {"PYROSCOPE_UPLOAD_INTERVAL": "100ms", "PYROSCOPE_INGEST_FORMAT": "folded",
                "PYROSCOPE_FLUSH_TIMEOUT": "1s"}
        peer = self.peer()
        log = os.path.join(self.tmp, "refused.log")
        rss = {}
        for name, url, extra in (("none", None, {}), ("accepting", peer.url, {}),
                                 ("refusing", "http://127.0.0.1:%d" % free_port(),
                                  {"PYROSCOPE_LOG_LEVEL": "debug", "PYROSCOPE_LOG_FILE": log})):
            r, base, out, delay = self.go(url, 5000, stacks=4096, **dict(opts, **extra))
            self.assert_unchanged(r, base)
            self.assertLess(delay, 1.0 + 1.0, name)
            rss[name] = r.maxrss
            if name == "refusing":
                counts = upload_counts(self.local_cpu(out))
                big = os.path.getsize(os.path.join(out, [f for f in os.listdir(out)
                                                         if f.endswith(".inuse_space.folded")][0]))
        msg = "peak RSS MiB: %s" % {k: round(v / MiB, 1) for k, v in rss.items()}
        self.assertEqual((counts["sent"], counts["failed"]), (0, 0), msg)
        # What the refused run dropped to stay within its bound, by type
        # (the debug log names each; the last flush drops more after the
        # files' counters are written): the in-use requests are `big` bytes.
        # The helper writes them after the program ended: its last line
        # first (a loaded machine's fresh-clone run read the log before).
        text = helper_log(self, log)
        final = text.rindex("local files of ", 0, text.index("after the last flush"))
        dropped = re.findall(r"upload queue full: dropping the oldest (\w+) profile", text)
        self.assertEqual(len(re.findall("upload queue full", text[:final])), counts["dropped"], msg)
        unbounded = sum(big for t in dropped if t.startswith("inuse_"))
        # The bound, over the run without a server: what any server costs
        # (libcurl, a pass's requests while they are built and sent: the
        # accepting run), plus the queue (16 MiB of bodies; a 3.7 MB body
        # sits in a 4 MiB buffer, as ps_buf doubles, so 4 of them fill
        # 16 MiB), plus 4 MiB for the new body built before the oldest is
        # dropped, plus 4 MiB for malloc arenas.  Measured here: none 14,
        # accepting 35, refusing 45-51 MiB; 80-90 MiB with the count bound
        # alone.
        slack = 4 * MiB + 4 * MiB
        allowed = (rss["accepting"] - rss["none"]) + QUEUE_BYTES + slack
        self.assertLessEqual(rss["refusing"] - rss["none"], allowed, msg)
        # The test can tell: had the dropped requests stayed queued, the
        # refused run would have been over what is allowed.
        self.assertGreater(rss["refusing"] - rss["none"] + unbounded, allowed,
                           "too few drops to tell a bound from none: " + msg)


@unittest.skipUnless(have_go(), "go tool pprof is not installed")
class ServerFaultsPush(ServerFaults):
    """The same faults, through the push API (PYROSCOPE_UPLOAD_API=push):
    the same queue, retries and backoff.  The peer names each push attempt
    in its log the way it names /ingest ones (its docstring), so every
    assertion above reads the same."""

    def go(self, url, ms, stacks=16, **extra):
        extra.setdefault("PYROSCOPE_UPLOAD_API", "push")
        return super().go(url, ms, stacks, **extra)

    @unittest.skip("folded bodies exist only for /ingest")
    def test_reset_in_the_middle_of_large_bodies_at_exit(self):
        pass

    @unittest.skip("folded bodies exist only for /ingest")
    def test_queue_memory_stays_bounded_against_a_refusing_server(self):
        pass


class OutputDirFaults(FaultTest):
    """Local files only (no server): the one write is the last pass at
    exit, in the exiting thread."""

    def setUp(self):
        super().setUp()
        os.chmod(self.tmp, 0o755)   # for the runs as nobody

    # Every allocation sampled, so every run writes all seven files.
    KINDS = {"cpu.pb.gz", "cpu.folded", "alloc.pb.gz", "alloc_objects.folded",
             "alloc_space.folded", "inuse_objects.folded", "inuse_space.folded"}

    def env(self, path, **extra):
        e = {"PYROSCOPE_APPLICATION_NAME": APP, "PYROSCOPE_OUTPUT_DIR": path,
             "PYROSCOPE_ALLOC_SAMPLE_BYTES": "1"}
        e.update(extra)
        return e

    def nobody_files(self):
        """The shim and the host where nobody can read them."""
        d = os.path.join(self.tmp, "bin")
        if not os.path.isdir(d):
            os.mkdir(d, 0o755)
            for src in (SHIM, HOST):
                shutil.copy(src, d)
                os.chmod(os.path.join(d, os.path.basename(src)), 0o755)
        return os.path.join(d, os.path.basename(SHIM)), os.path.join(d, os.path.basename(HOST))

    def both_levels(self, path, nobody=False, refused=False, **popen):
        """Run at the default level and at warn; returns the shim's lines
        of the second run.  At the default level the shim is silent, but
        for a refused directory (a configuration mistake), whose one line
        it checks."""
        shim, host = SHIM, HOST
        if nobody:
            shim, host = self.nobody_files()
            popen.update(user=NOBODY, group=NOBODY, extra_groups=[])
        argv = self.host_argv(300, host=host)
        base = self.baseline(argv, **popen)
        for level in (None, "warn"):
            env = clean_env(self.env(path, **({"PYROSCOPE_LOG_LEVEL": level} if level else {})))
            env["LD_PRELOAD"] = shim
            r = run_host(argv, env, timeout=60, cwd=self.tmp, **popen)
            lines = self.assert_unchanged(r, base, shim_allowed=level is not None or refused)
            if level is None and refused:
                self.assertEqual(len(lines), 1, lines)
        return lines

    def assert_refused(self, lines, path, why):
        """A directory pyroshim(7) says is refused: one configuration line,
        at every level."""
        self.assertEqual(len(lines), 1, lines)
        self.assertRegex(lines[0], r"^pyroshim: PYROSCOPE_OUTPUT_DIR=%s: %s; "
                         r"local profiles are not written\n$" % (re.escape(path), re.escape(why)))

    def assert_write_failures(self, lines, path, why):
        """One warning per file that could not be written: all of them."""
        kinds = []
        for line in lines:
            m = re.match(r"^pyroshim\[\d+\]: warn: writing %s/%s\.\d+\.([a-z_.]+): %s\n$"
                         % (re.escape(path), APP, re.escape(why)), line)
            self.assertTrue(m, "unexpected line: %r" % line)
            kinds.append(m.group(1))
        self.assertEqual(sorted(kinds), sorted(self.KINDS))

    def test_symlink_is_refused_and_nothing_is_written_through_it(self):
        target = os.path.join(self.tmp, "target")
        os.mkdir(target, 0o700)
        for name, dest in (("link", target), ("dangling", os.path.join(self.tmp, "planned"))):
            with self.subTest(link=name):
                link = os.path.join(self.tmp, name)
                os.symlink(dest, link)
                self.assert_refused(self.both_levels(link, refused=True), link, "Not a directory")
                self.assertEqual(os.readlink(link), dest, "the link was replaced")
                self.assertEqual(os.listdir(target), [], "written through the link")
                self.assertFalse(os.path.exists(os.path.join(self.tmp, "planned")),
                                 "created through a dangling link")

    def test_planted_file_is_refused_and_untouched(self):
        path = os.path.join(self.tmp, "profiles")
        with open(path, "wb") as f:
            f.write(b"planted, not a directory\n")
        os.chmod(path, 0o644)
        before = os.lstat(path)
        self.assert_refused(self.both_levels(path, refused=True), path, "Not a directory")
        after = os.lstat(path)
        self.assertEqual((after.st_ino, after.st_mode, after.st_size, after.st_mtime_ns),
                         (before.st_ino, before.st_mode, before.st_size, before.st_mtime_ns))
        with open(path, "rb") as f:
            self.assertEqual(f.read(), b"planted, not a directory\n")
        self.assertEqual(sorted(os.listdir(self.tmp)), ["profiles"])

    @unittest.skipUnless(os.geteuid() == 0, "needs root to make a directory of another user")
    def test_directory_of_another_user_is_refused(self):
        # Mode 0777: nothing but the owner makes the shim refuse it.
        cases = (("nobody's, run as root", NOBODY, False), ("root's, run as nobody", 0, True))
        for i, (case, owner, as_nobody) in enumerate(cases):
            with self.subTest(case=case):
                path = os.path.join(self.tmp, "shared%d" % i)
                os.mkdir(path)
                os.chown(path, owner, owner)
                os.chmod(path, 0o777)
                self.assert_refused(self.both_levels(path, nobody=as_nobody, refused=True), path,
                                    "Operation not permitted")
                self.assertEqual(os.listdir(path), [])

    @unittest.skipUnless(os.geteuid() == 0, "needs root to run as nobody")
    def test_read_only_directory_warns_and_leaves_nothing_behind(self):
        # As nobody: root would ignore the modes.
        ro = os.path.join(self.tmp, "ro")
        os.mkdir(ro)
        os.chown(ro, NOBODY, NOBODY)
        os.chmod(ro, 0o555)
        with self.subTest(case="the directory"):
            self.assert_write_failures(self.both_levels(ro, nobody=True), ro, "Permission denied")
            self.assertEqual(os.listdir(ro), [])
        with self.subTest(case="its parent, the directory to be made"):
            path = os.path.join(ro, "profiles")
            self.assert_refused(self.both_levels(path, nobody=True, refused=True), path, "Permission denied")
            self.assertEqual(os.listdir(ro), [])

    def mount_ns(self, script_setup, path):
        """Run the host in a private mount namespace after script_setup (sh;
        $mnt is the mount point), without and with the shim; returns each
        run with the listing of $mnt taken before its namespace went away.
        Skips if mounting is not permitted here."""
        mnt = os.path.join(self.tmp, "mnt")
        os.makedirs(mnt, exist_ok=True)
        probe = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                                'mount -t tmpfs -o size=4k none "$1"', "sh", mnt],
                               capture_output=True, timeout=30)
        if probe.returncode:
            self.skipTest("no private mount namespace here: %s" % probe.stderr.decode()[:200])
        listing = os.path.join(self.tmp, "listing")
        script = ('mnt=$1 so=$2 listing=$3; shift 3\n' + script_setup +
                  '\nenv ${so:+"LD_PRELOAD=$so"} "$@"; rc=$?\n'
                  'find "$mnt" -mindepth 1 \\( -type d -printf "%P/\\n" \\) -o -printf "%P %s\\n" '
                  '| sort > "$listing"\nexit $rc\n')
        runs = []
        for so in ("", SHIM):
            for level in ((None,) if not so else (None, "warn")):
                env = clean_env(self.env(path, **({"PYROSCOPE_LOG_LEVEL": level} if level else {})),
                                preload=False)
                r = run_host(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh",
                              mnt, so, listing] + self.host_argv(300), env, timeout=60)
                with open(listing) as f:
                    runs.append((r, f.read().split("\n")[:-1]))
        (base, base_ls), (quiet, quiet_ls), (warn, warn_ls) = runs
        self.assertEqual(base.rc, 3, base.err)
        return base, base_ls, quiet, quiet_ls, warn, warn_ls

    def test_full_filesystem_warns_and_leaves_nothing_behind(self):
        # A 64 KiB tmpfs filled up: directories still fit, file data not.
        setup = ('mount -t tmpfs -o size=64k,mode=0755 pyroshim-full "$mnt" || exit 99\n'
                 'head -c 1048576 /dev/zero > "$mnt/filler" 2>/dev/null')
        path = os.path.join(self.tmp, "mnt", "profiles")
        base, base_ls, quiet, quiet_ls, warn, warn_ls = self.mount_ns(setup, path)
        self.assert_unchanged(quiet, base)
        self.assert_write_failures(self.assert_unchanged(warn, base, shim_allowed=True), path,
                                   "No space left on device")
        # The directory was made, and no partial or temporary file is left.
        self.assertEqual(base_ls, ["filler 65536"])
        self.assertEqual(quiet_ls, ["filler 65536", "profiles/"])
        self.assertEqual(warn_ls, quiet_ls)

    def test_read_only_mount_warns_and_leaves_nothing_behind(self):
        setup = ('mount -t tmpfs -o size=64k,mode=0755 pyroshim-ro "$mnt" || exit 99\n'
                 'mkdir -m 0700 "$mnt/profiles" && mount -o remount,ro "$mnt" || exit 99')
        path = os.path.join(self.tmp, "mnt", "profiles")
        base, _, quiet, quiet_ls, warn, _ = self.mount_ns(setup, path)
        self.assert_unchanged(quiet, base)
        self.assert_write_failures(self.assert_unchanged(warn, base, shim_allowed=True), path,
                                   "Read-only file system")
        self.assertEqual(quiet_ls, ["profiles/"])

    # Found here: past RLIMIT_FSIZE, write(2) raises SIGXFSZ in the
    # writing thread.  The last pass runs in the host's exiting thread, so
    # the default action killed the host (status -25) and left a partial
    # .tmp file.  uploader/files.c now blocks and takes back the signal
    # its own write raised.
    def test_file_size_limit_neither_kills_the_host_nor_leaves_partial_files(self):
        def limit():
            # 1 byte: less than any profile (a short run's cpu.folded can
            # be under 100 bytes); the host itself writes no file (its
            # output goes to pipes).
            resource.setrlimit(resource.RLIMIT_FSIZE, (1, 1))
        path = os.path.join(self.tmp, "profiles")
        lines = self.both_levels(path, preexec_fn=limit)
        self.assert_write_failures(lines, path, "File too large")
        self.assertEqual([f for f in os.listdir(path) if f.endswith(".tmp")], [])


class LogFileFaults(FaultTest):
    """PYROSCOPE_LOG_FILE is opened in the constructor, before main."""

    # Found here: a PYROSCOPE_LOG_FILE that names a FIFO nobody reads
    # blocked the host forever in the shim's constructor (opened O_WRONLY
    # without O_NONBLOCK).  It is now refused with one configuration line.
    def test_log_file_that_is_a_fifo_does_not_hang_the_host(self):
        fifo = os.path.join(self.tmp, "log.fifo")
        os.mkfifo(fifo, 0o600)
        argv = self.host_argv(100)
        base = self.baseline(argv)
        env = clean_env({"PYROSCOPE_LOG_FILE": fifo, "PYROSCOPE_OUTPUT_DIR": self.out})
        # 100 ms of CPU: 3 s is ample, and what it costs while the bug lasts.
        r = run_host(argv, env, timeout=3)
        lines = self.assert_unchanged(r, base, shim_allowed=True)
        self.assertEqual(len(lines), 1, lines)
        self.assertRegex(lines[0], r"^pyroshim: PYROSCOPE_LOG_FILE=%s: .*; using stderr\n$"
                         % re.escape(fifo))

    @unittest.skipUnless(os.path.exists("/usr/bin/python3"), "no /usr/bin/python3")
    def test_a_program_that_closes_its_descriptors_gets_no_log_line_in_its_files(self):
        # The log file was the program's lowest free number (3): a program
        # that closes every descriptor it did not open (closefrom, as
        # daemons do) and opens a file of its own got it at 3, and the
        # shim's lines at the program's exit (debug: its signal stacks)
        # went into it.  The log's descriptor is now parked near 1024 and
        # written only while it is still the log.
        mine = os.path.join(self.tmp, "mine")
        log = os.path.join(self.tmp, "log")
        code = ("import os; os.closerange(3, 65536); "
                "fd = os.open(%r, os.O_WRONLY | os.O_CREAT, 0o600); "
                "os.write(fd, b'mine\\n'); print(fd)" % mine)
        r = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, timeout=60,
                           env=clean_env({"PYROSCOPE_OUTPUT_DIR": self.out,
                                          "PYROSCOPE_LOG_LEVEL": "debug",
                                          "PYROSCOPE_LOG_FILE": log}))
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, b"3\n", b""))
        with open(mine, "rb") as f:
            self.assertEqual(f.read(), b"mine\n")
        with open(log) as f:
            self.assertIn("profiling python3", f.read())


    def test_the_info_line_names_only_the_kinds_that_are_on(self):
        """Found here: the info line at start said "at 100 Hz, allocations
        every N bytes, waits (every one of 1000 us or more)" whatever was
        on: with block and mutex off, "waits" with an empty list; with
        CPU off, a rate.  It now names the kinds profiled, each with its
        rate; a process that profiles nothing says so."""
        true = shutil.which("true")
        cases = [
            ({}, r"CPU at 100 Hz, allocations every 524288 bytes, block and mutex waits "
                 r"of 1000 us or more"),
            ({"PYROSCOPE_PROFILING_BLOCK_ENABLED": "false",
              "PYROSCOPE_PROFILING_MUTEX_ENABLED": "false"},
             r"CPU at 100 Hz, allocations every 524288 bytes"),
            ({"PYROSCOPE_PROFILING_CPU_ENABLED": "false", "PYROSCOPE_PROFILING_ALLOC_ENABLED": "false",
              "PYROSCOPE_PROFILING_MUTEX_ENABLED": "false", "PYROSCOPE_BLOCK_RATE": "5ms"},
             r"block waits of 5000 us or more"),
        ]
        for i, (extra, kinds) in enumerate(cases):
            log = os.path.join(self.tmp, "log%d" % i)
            env = clean_env(dict({"PYROSCOPE_OUTPUT_DIR": self.out, "PYROSCOPE_LOG_LEVEL": "info",
                                  "PYROSCOPE_LOG_FILE": log}, **extra))
            r = subprocess.run([true], capture_output=True, timeout=60, env=env)
            self.assertEqual((r.returncode, r.stdout, r.stderr), (0, b"", b""))
            with open(log) as f:
                text = f.read()
            self.assertRegex(text, r"info: profiling true \(pid \d+\): %s; output %s\n"
                             % (kinds, re.escape(self.out)), extra)
        # Nothing to profile is said too.  (PYROSCOPE_ENABLED=false reads
        # nothing, the log included: nothing prints, as documented.)
        log = os.path.join(self.tmp, "log_off")
        env = clean_env(dict({"PYROSCOPE_OUTPUT_DIR": self.out, "PYROSCOPE_LOG_LEVEL": "info",
                              "PYROSCOPE_LOG_FILE": log},
                             **{"PYROSCOPE_PROFILING_%s_ENABLED" % k: "false"
                                for k in ("CPU", "ALLOC", "BLOCK", "MUTEX")}))
        r = subprocess.run([true], capture_output=True, timeout=60, env=env)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, b"", b""))
        with open(log) as f:
            self.assertRegex(f.read(), r"^pyroshim\[\d+\]: info: not profiling true "
                             r"\(pid \d+\): every kind of profile is off\n$")


class LimitFaults(ShimTest):
    """Resource limits the program runs under."""

    @unittest.skipUnless(os.path.exists("/usr/bin/python3"), "no /usr/bin/python3")
    def test_a_program_under_ulimit_v_fits_as_without_the_shim(self):
        # The shim's tables take from the program's address space: 11 MiB
        # of them made a Python that allocates 35 MB under a 60 MB limit
        # fail with MemoryError (and one under 24 MB fail at its start).
        # Under a finite RLIMIT_AS the stack table takes at most a 64th of
        # it.  The program is still profiled (its allocations).
        def limit():
            resource.setrlimit(resource.RLIMIT_AS, (60000 << 10, 60000 << 10))

        argv = ["/usr/bin/python3", "-c", "x = bytearray(35 * 2**20); print('ok')"]
        base = subprocess.run(argv, env=clean_env(preload=False), preexec_fn=limit,
                              capture_output=True, timeout=60)
        if base.stdout != b"ok\n":
            self.skipTest("this Python does not fit 35 MB under 60 MB: %r" % base.stderr[-200:])
        r = subprocess.run(argv, env=clean_env({"PYROSCOPE_OUTPUT_DIR": self.out}),
                           preexec_fn=limit, capture_output=True, timeout=60)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, b"ok\n", b""))
        self.assertTrue([f for f in self.files() if f.endswith(".alloc.pb.gz")], self.files())

if __name__ == "__main__":
    unittest.main()
