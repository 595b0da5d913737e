"""The /debug/pprof listener (issue 15): PYROSCOPE_PPROF_ADDRESS makes any
program a scrape target, read here with go tool pprof and with a client
that asks exactly what Grafana Alloy's pyroscope.scrape asks
(docs/ALLOY.md).

Why the CPU comparison holds on a loaded machine: a busy thread gets less
than a whole CPU when five people share two cores, so the truth is the CPU
time the program really used during the profile's window -- read from
/proc/PID/stat every 20 ms by the test and interpolated at the window's
start and end (the profile's time_nanos and duration_nanos) -- which is
3 CPU-seconds per busy thread on an idle machine.  At 100 Hz a 3 s window
of two busy threads holds ~600 samples (statistical error ~4 %), and the
/proc clock ticks are 10 ms: 15 % is far from both.

Every test ends the program and compares its stdout and exit status with a
run without the shim: no request, good or bad, may change them."""
import gzip
import os
import re
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from common import PROG, ROOT, SHIM, clean_env, flat_and_cum, have_go, pprof_raw
from test_upload import PeerTest, free_port, pprof_total

sys.path.insert(0, os.path.join(ROOT, "test", "peer"))
from pyroscope_peer import pb_fields, pprof_times as profile_times  # noqa: E402

TARGET = os.path.join(PROG, "scrape_target")
TICK = os.sysconf("SC_CLK_TCK")
# What Alloy's pyroscope.scrape sends by default (docs/ALLOY.md): the
# profile types enabled by default and their paths; process_cpu carries
# seconds = scrape_interval (15 s) - 1.
ALLOY_DEFAULTS = [("process_cpu", "/debug/pprof/profile?seconds=14"),
                  ("memory", "/debug/pprof/allocs"),
                  ("goroutine", "/debug/pprof/goroutine"),
                  ("mutex", "/debug/pprof/mutex"),
                  ("block", "/debug/pprof/block")]
ALLOY_UA = "Alloy/v1.11.0 (linux; binary)"


def http_get(port, target, method="GET", headers=None, timeout=40, raw=None):
    """One request on a fresh connection (raw: send these bytes instead).
    Returns (status, {header: value}, body)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        if raw is None:
            h = {"Host": "127.0.0.1:%d" % port, "User-Agent": ALLOY_UA,
                 "Accept-Encoding": "gzip"}
            h.update(headers or {})
            raw = ("%s %s HTTP/1.1\r\n" % (method, target) +
                   "".join("%s: %s\r\n" % kv for kv in h.items()) + "\r\n").encode()
        s.sendall(raw)
        data = recv_all(s)
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1]) if lines[0] else 0
    hdrs = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return status, hdrs, body


def recv_all(s):
    """Everything until the peer closes."""
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return data
        data += chunk


def sample_types(body):
    """The sample types' names of a gzipped pprof, in order."""
    data = gzip.decompress(body)
    fields = pb_fields(data)
    strings = [v for f, w, v in fields if f == 6 and w == 2]
    out = []
    for f, w, v in fields:
        if f == 1 and w == 2:
            vt = dict((f2, v2) for f2, w2, v2 in pb_fields(v) if w2 == 0)
            out.append(strings[vt.get(1, 0)].decode())
    return out


def n_samples(body):
    return sum(1 for f, w, _ in pb_fields(gzip.decompress(body)) if f == 2 and w == 2)


class CpuClock(threading.Thread):
    """The program's CPU time (/proc/PID/stat utime+stime), read every
    20 ms with the wall clock, until stopped."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.points, self.done = pid, [], threading.Event()

    def run(self):
        while not self.done.is_set():
            try:
                with open("/proc/%d/stat" % self.pid) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                cpu = (int(fields[11]) + int(fields[12])) * 1e9 / TICK
            except (OSError, IndexError, ValueError):
                return
            self.points.append((time.time_ns(), cpu))
            time.sleep(0.02)

    def at(self, t_ns):
        """CPU ns at wall time t_ns, interpolated."""
        pts = self.points
        for (t0, c0), (t1, c1) in zip(pts, pts[1:]):
            if t0 <= t_ns <= t1:
                return c0 + (c1 - c0) * (t_ns - t0) / max(t1 - t0, 1)
        raise AssertionError("no CPU reading around %d" % t_ns)


class ListenTest(PeerTest):
    threads = 2
    live_mib = 64

    def setUp(self):
        super().setUp()
        self.port = free_port()
        self.stop_file = os.path.join(self.tmp, "stop")
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            for f in (getattr(p, "out", None), getattr(p, "err", None)):
                if f:
                    f.close()
        super().tearDown()

    def start(self, **extra):
        env = {"PYROSCOPE_PPROF_ADDRESS": "127.0.0.1:%d" % self.port,
               "PYROSCOPE_OUTPUT_DIR": self.out, "PYROSCOPE_APPLICATION_NAME": "st"}
        env.update(extra)
        out = open(os.path.join(self.tmp, "out%d" % len(self.procs)), "w+b")
        err = open(os.path.join(self.tmp, "err%d" % len(self.procs)), "w+b")
        p = subprocess.Popen([TARGET, str(self.threads), str(self.live_mib), self.stop_file, "60"],
                             env=clean_env(env), stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        p.out, p.err = out, err
        self.procs.append(p)
        return p

    def wait_listening(self, p, port=None):
        """Until the program is ready (its live set made, its threads
        running) and the port answers."""
        deadline = time.monotonic() + 15
        while not os.path.exists(self.stop_file + ".ready"):
            self.assertIsNone(p.poll(), "the program ended early")
            self.assertLess(time.monotonic(), deadline, "the program never got ready")
            time.sleep(0.02)
        while time.monotonic() < deadline:
            self.assertIsNone(p.poll(), "the program ended early")
            try:
                socket.create_connection(("127.0.0.1", port or self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("nothing listens on %d" % (port or self.port))

    def finish(self, p):
        """End the program; assert it printed and returned what it does
        without the shim.  Returns its stderr."""
        with open(self.stop_file, "w"):
            pass
        rc = p.wait(timeout=30)
        p.out.seek(0)
        p.err.seek(0)
        self.assertEqual(rc, 3, "exit status changed")
        self.assertEqual(p.out.read(), b"scrape_target: %d threads, %d MiB live\n"
                         % (self.threads, self.live_mib))
        os.unlink(self.stop_file)
        if os.path.exists(self.stop_file + ".ready"):
            os.unlink(self.stop_file + ".ready")
        return p.err.read()


@unittest.skipUnless(have_go(), "go tool pprof is not installed")
class Scrapes(ListenTest):
    def test_go_tool_pprof_seconds_3_measures_exactly_the_window(self):
        p = self.start()
        self.wait_listening(p)
        clock = CpuClock(p.pid)
        clock.start()
        env = dict(os.environ, PPROF_TMPDIR=self.tmp, HOME=os.environ.get("HOME", "/tmp"))
        r = subprocess.run(["go", "tool", "pprof", "-seconds", "3",
                            "http://127.0.0.1:%d/debug/pprof/profile" % self.port],
                           capture_output=True, text=True, env=env, timeout=60, stdin=subprocess.DEVNULL)
        time.sleep(0.1)
        clock.done.set()
        clock.join()
        self.assertEqual(self.finish(p), b"")
        m = re.search(r"Saved profile in (\S+)", r.stdout + r.stderr)
        self.assertTrue(m, r.stdout + r.stderr)
        with open(m.group(1), "rb") as f:
            t, d = profile_times(f.read())
        self.assertAlmostEqual(d / 1e9, 3.0, delta=0.2)
        truth = clock.at(t + d) - clock.at(t)
        total = pprof_total([m.group(1)], 1)
        msg = "profile %.2f CPU-s, the program used %.2f in the window (%d busy threads)" % (
            total / 1e9, truth / 1e9, self.threads)
        self.assertGreater(truth, 0.3e9 * self.threads, msg)
        self.assertLess(abs(total - truth), 0.15 * truth, msg)
        _, samples = pprof_raw(m.group(1))
        flat, _ = flat_and_cum(samples, 1)
        self.assertGreater(flat.get("burn_a", 0), 0.9 * total, flat)

    def test_heap_reports_the_live_set_and_allocs_the_same_profile(self):
        # 64 MiB in 1024 blocks of 64 KiB, sampled every 64 KiB on average:
        # each block is sampled with probability 1 - 1/e, and the unbiased
        # estimate's relative error is sqrt(e^-1 / (1024 (1 - e^-1))) =
        # 2.4 %; 10 % is four of those.
        p = self.start(PYROSCOPE_ALLOC_SAMPLE_BYTES="64KiB")
        self.wait_listening(p)
        st, h, heap = http_get(self.port, "/debug/pprof/heap")
        st2, h2, allocs = http_get(self.port, "/debug/pprof/allocs")
        self.assertEqual(self.finish(p), b"")
        for status, hdrs, name in ((st, h, "heap"), (st2, h2, "allocs")):
            self.assertEqual(status, 200)
            self.assertEqual(hdrs["content-type"], "application/octet-stream")
            self.assertEqual(hdrs["content-disposition"], 'attachment; filename="%s"' % name)
            self.assertEqual(hdrs["x-content-type-options"], "nosniff")
        for body in (heap, allocs):
            self.assertEqual(sample_types(body),
                             ["alloc_objects", "alloc_space", "inuse_objects", "inuse_space"])
        path = os.path.join(self.tmp, "heap.pb.gz")
        with open(path, "wb") as f:
            f.write(heap)
        _, samples = pprof_raw(path)
        _, cum = flat_and_cum(samples, 3)
        live = 64 << 20
        self.assertLess(abs(cum.get("hold_live", 0) - live), 0.10 * live, cum)
        # alloc_space is cumulative since start: here as much as is live.
        _, cum = flat_and_cum(samples, 1)
        self.assertLess(abs(cum.get("hold_live", 0) - live), 0.10 * live)

    def test_what_alloy_asks_for_process_cpu_and_memory_gets_valid_answers(self):
        # Alloy scrapes the default profile types of a target at the same
        # time, every 15 s; its delta computation for memory needs two
        # successive cumulative allocs profiles.
        p = self.start()
        self.wait_listening(p)
        # The block profile (since start) answers at once and counts the
        # sleeps that ended: let the target end a few of its 10 ms sleeps
        # first (at once after listening it may have ended none).
        time.sleep(0.2)
        got = {}

        def scrape(name, target):
            got[name] = http_get(self.port, target, timeout=24)
        ts = [threading.Thread(target=scrape, args=a) for a in ALLOY_DEFAULTS]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        second = http_get(self.port, "/debug/pprof/allocs")
        self.assertEqual(self.finish(p), b"")
        for name, (status, hdrs, body) in got.items():
            # Alloy's validateProfileData: 2xx, a Content-Type starting with
            # application/octet-stream, not text, gzip or protobuf.
            self.assertEqual(status, 200, (name, body[:200]))
            self.assertTrue(hdrs["content-type"].startswith("application/octet-stream"), name)
            self.assertEqual(body[:2], b"\x1f\x8b", name)
        cpu = got["process_cpu"][2]
        self.assertEqual(sample_types(cpu), ["samples", "cpu"])
        _, d = profile_times(cpu)
        self.assertAlmostEqual(d / 1e9, 14, delta=0.5)
        self.assertGreater(n_samples(cpu), 0)
        self.assertEqual(n_samples(got["goroutine"][2]), 0)
        # Block and mutex are real (test_offcpu.py checks their values): the
        # target's main thread sleeps 10 ms at a time, and no lock is
        # contended.
        for name in ("mutex", "block"):
            self.assertEqual(sample_types(got[name][2]), ["contentions", "delay"], name)
        self.assertGreater(n_samples(got["block"][2]), 0)
        # Cumulative: the second allocs scrape holds at least the first.
        a = os.path.join(self.tmp, "a1.pb.gz")
        b = os.path.join(self.tmp, "a2.pb.gz")
        with open(a, "wb") as f:
            f.write(got["memory"][2])
        with open(b, "wb") as f:
            f.write(second[2])
        self.assertGreaterEqual(pprof_total([b], 1), pprof_total([a], 1))
        self.assertGreater(pprof_total([a], 1), 0)

    def test_overlapping_windows_leave_files_and_uploads_exact(self):
        # Two CPU windows that overlap, and heap scrapes, while the program
        # uploads every 500 ms and writes its local files: each window
        # holds its own seconds, and the uploads still add up to the local
        # profile of the whole run to the nanosecond (test_upload.py says
        # why that is exact), so no scrape took or added anything.
        peer = self.peer()
        p = self.start(PYROSCOPE_SERVER_ADDRESS=peer.url, PYROSCOPE_UPLOAD_INTERVAL="500ms")
        self.wait_listening(p)
        clock = CpuClock(p.pid)
        clock.start()
        got = {}

        def scrape(name, target, delay):
            time.sleep(delay)
            got[name] = http_get(self.port, target)
        ts = [threading.Thread(target=scrape, args=a) for a in (
            ("a", "/debug/pprof/profile?seconds=3", 0), ("b", "/debug/pprof/profile?seconds=2", 0.5),
            ("h", "/debug/pprof/heap", 1.0))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        # The clock must have read past each window's end: on a busy
        # machine its thread can lag the scrapes by more than a reading.
        ends = [sum(profile_times(got[n][2])) for n in ("a", "b") if got[n][0] == 200]
        deadline = time.monotonic() + 10
        while (clock.is_alive() and time.monotonic() < deadline and
               (not clock.points or clock.points[-1][0] <= max(ends, default=0))):
            time.sleep(0.02)
        clock.done.set()
        clock.join()
        self.assertEqual(self.finish(p), b"")
        for name, secs in (("a", 3), ("b", 2)):
            status, _, body = got[name]
            self.assertEqual(status, 200)
            t, d = profile_times(body)
            self.assertAlmostEqual(d / 1e9, secs, delta=0.2)
            path = os.path.join(self.tmp, name + ".pb.gz")
            with open(path, "wb") as f:
                f.write(body)
            truth = clock.at(t + d) - clock.at(t)
            total = pprof_total([path], 1)
            self.assertLess(abs(total - truth), 0.15 * truth + 0.05e9,
                            "window %s: %.2f vs %.2f CPU-s" % (name, total / 1e9, truth / 1e9))
        self.assertEqual(got["h"][0], 200)
        cpu = peer.ingest("samples")
        (local,) = [os.path.join(self.out, f) for f in os.listdir(self.out)
                    if f.endswith(".cpu.pb.gz")]
        self.assertGreaterEqual(len(cpu), 2)
        self.assertEqual(pprof_total([r["payload"] for r in cpu], 1), pprof_total([local], 1))



class BadRequests(ListenTest):
    threads = 1
    live_mib = 1

    def test_each_bad_request_gets_its_status_and_the_program_is_unharmed(self):
        p = self.start()
        self.wait_listening(p)
        cases = [
            ("/metrics", "GET", 404, b"404 page not found\n"),
            ("/debug/pprof/nosuch", "GET", 404, b"Unknown profile\n"),
            # godeltaprof's paths: not an empty profile where there is
            # data (mutex and block have it), as Alloy's defaults never
            # ask for them.
            ("/debug/pprof/delta_heap", "GET", 404, b"Unknown profile\n"),
            ("/debug/pprof/delta_mutex", "GET", 404, b"Unknown profile\n"),
            ("/debug/pprof/delta_block", "GET", 404, b"Unknown profile\n"),
            ("/debug/pprof/profile?seconds=abc", "GET", 400, None),
            ("/debug/pprof/profile?seconds=0", "GET", 400, None),
            ("/debug/pprof/profile?seconds=-5", "GET", 400, None),
            ("/debug/pprof/profile?seconds=1.5", "GET", 400, None),
            ("/debug/pprof/profile?seconds=", "GET", 400, None),
            ("/debug/pprof/profile?seconds=301", "GET", 400, None),
            ("/debug/pprof/profile?seconds=99999999999999", "GET", 400, None),
            ("/debug/pprof/profile?seconds=1&seconds=2", "GET", 400, None),
            ("/debug/pprof/heap?debug=1", "GET", 400, None),
            ("/debug/pprof/heap", "POST", 405, None),
            ("/debug/pprof/profile", "PUT", 405, None),
            ("/debug/pprof/profile", "DELETE", 405, None),
        ]
        for target, method, want, body in cases:
            with self.subTest(target=target, method=method):
                status, hdrs, got = http_get(self.port, target, method=method)
                self.assertEqual(status, want, got)
                self.assertEqual(hdrs.get("content-type"), "text/plain; charset=utf-8")
                self.assertEqual(got.count(b"\n"), 1, got)   # one line
                if body:
                    self.assertEqual(got, body)
                if want == 405:
                    self.assertEqual(hdrs.get("allow"), "GET, HEAD")
        raws = [(b"GET /debug/pprof/heap HTTP/2.0\r\nHost: x\r\n\r\n", 505),
                (b"GET /debug/pprof/heap HTTP/1.1\r\n\r\n", 400),            # no Host
                (b"GET http://x/debug/pprof/heap HTTP/1.1\r\nHost: x\r\n\r\n", 400),
                (b"GET /debug/pprof/heap HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", 400),
                (b"GET /debug/pprof/heap HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 10000 + b"\r\n\r\n", 431),
                (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n", 400)]
        for raw, want in raws:
            with self.subTest(raw=raw[:40]):
                self.assertEqual(http_get(self.port, None, raw=raw)[0], want)
        # Go's redirect, byte for byte (a NUL used to follow it).
        status, hdrs, body = http_get(self.port, "/debug/pprof")
        self.assertEqual((status, hdrs.get("location"), body),
                         (301, "/debug/pprof/", b'<a href="/debug/pprof/">Moved Permanently</a>.\n\n'))
        # HEAD: the headers of the answer, no body.
        status, hdrs, body = http_get(self.port, "/debug/pprof/heap", method="HEAD")
        self.assertEqual((status, body), (200, b""))
        self.assertEqual(hdrs["content-type"], "application/octet-stream")
        # Still serving after all that.
        self.assertEqual(http_get(self.port, "/debug/pprof/heap")[0], 200)
        self.assertEqual(self.finish(p), b"")

    def test_slow_clients_and_a_flood_are_bounded(self):
        p = self.start()
        self.wait_listening(p)
        # Eight connections that never finish their request hold every
        # slot; the ninth and later are told 503 at once.
        # A connection answered at once (503) found a slot still held by
        # the readiness probe's request: it holds nothing, so it is closed
        # and another is made, until eight really wait.
        slow, tries = [], 0
        while len(slow) < 8 and tries < 40:
            tries += 1
            s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
            s.sendall(b"GET /debug/pprof/heap HTTP/1.1\r\nHost: x\r\n")
            if select.select([s], [], [], 0.2)[0]:
                s.close()
                continue
            slow.append(s)
        self.assertEqual(len(slow), 8, "eight slow connections never held the slots")
        time.sleep(0.3)
        t0 = time.monotonic()
        flood = [http_get(self.port, "/debug/pprof/heap", timeout=10)[0] for _ in range(20)]
        if set(flood) != {503}:   # say who answered, and which sockets exist
            seen = subprocess.run("ss -tnp | grep :%d" % self.port, shell=True,
                                  capture_output=True, text=True).stdout
            self.fail("flood answered %s; /cmdline %r; sockets:\n%s" % (
                flood, http_get(self.port, "/debug/pprof/cmdline")[2], seen))
        self.assertLess(time.monotonic() - t0, 5, "refusals must not wait")
        # Nor for clients that connect and send nothing: each held the
        # acceptor 100 ms (its request awaited before the close), and
        # whoever came after them: 40 of them, 4 s.
        idle = [socket.create_connection(("127.0.0.1", self.port), timeout=10) for _ in range(40)]
        t0 = time.monotonic()
        status = http_get(self.port, "/debug/pprof/heap", timeout=10)[0]
        waited = time.monotonic() - t0
        for s in idle:
            s.close()
        self.assertEqual(status, 503)
        self.assertLess(waited, 1.5, "a refusal waited behind clients that send nothing")
        # The slow ones are answered 408 once their 5 s are up.
        for s in slow:
            data = recv_all(s)
            s.close()
            self.assertTrue(data.startswith(b"HTTP/1.1 408 "), data[:80])
        # And the listener serves again (as soon as the slots are free:
        # a 503 says Retry-After: 1).
        self.assertEqual(self.get_retrying("/debug/pprof/heap"), 200)
        # A client that goes away in the middle of a CPU window is let go.
        s = socket.create_connection(("127.0.0.1", self.port))
        s.sendall(b"GET /debug/pprof/profile?seconds=60 HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.3)
        s.close()
        self.assertEqual(self.get_retrying("/debug/pprof/heap"), 200)
        self.assertEqual(self.finish(p), b"")

    def get_retrying(self, target):
        for _ in range(10):
            status = http_get(self.port, target)[0]
            if status != 503:
                return status
            time.sleep(0.2)
        return status

    def test_port_in_use_is_one_warning_and_nothing_else(self):
        taken = socket.socket()
        taken.bind(("127.0.0.1", self.port))
        taken.listen(1)
        try:
            p = self.start()
            err = self.finish_after(p, 3.0)
            self.assertEqual(err, b"", "silent by default")
            p = self.start(PYROSCOPE_LOG_LEVEL="warn")
            err = self.finish_after(p, 3.0)
            self.assertRegex(err.decode(), r"^pyroshim\[\d+\]: warn: PYROSCOPE_PPROF_ADDRESS="
                             r"127\.0\.0\.1:%d: Address already in use; no /debug/pprof "
                             r"listener\n$" % self.port)
        finally:
            taken.close()

    def finish_after(self, p, seconds):
        time.sleep(seconds)   # past the bind's 2 s of retries
        with open(self.stop_file, "w"):
            pass
        return self.finish(p)

    def test_malformed_address_is_one_configuration_line(self):
        self.port = free_port()
        for addr in (":6060", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:70000", "example.com:80"):
            with self.subTest(addr=addr):
                p = self.start(PYROSCOPE_PPROF_ADDRESS=addr)
                err = self.finish_after(p, 0.2)
                self.assertEqual(err.decode(), "pyroshim: PYROSCOPE_PPROF_ADDRESS=%s: expected "
                                 "host:port such as 127.0.0.1:6060 (an IP address, localhost "
                                 "or [IPv6]); no listener\n" % addr)

    def test_pyrorun_pprof_address_serves_the_command(self):
        p = subprocess.Popen([os.path.join(ROOT, "scripts", "pyrorun"), "-q",
                              "--pprof-address=127.0.0.1:%d" % self.port, "--", TARGET, "1", "1",
                              self.stop_file, "60"], env=clean_env(preload=False), cwd=self.tmp,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        self.procs.append(p)
        self.wait_listening(p)
        status, hdrs, body = http_get(self.port, "/debug/pprof/cmdline")
        with open(self.stop_file, "w"):
            pass
        out, err = p.communicate(timeout=30)
        self.assertEqual((status, hdrs["content-type"]), (200, "text/plain; charset=utf-8"))
        self.assertEqual(body, b"\x00".join(x.encode() for x in (TARGET, "1", "1", self.stop_file,
                                                                 "60")))
        self.assertEqual((p.returncode, out, err), (3, b"scrape_target: 1 threads, 1 MiB live\n",
                                                     b""))

    def test_without_a_helper_a_thread_of_the_shim_serves(self):
        # A child subreaper gets no helper process (worker.h): the
        # uploader and the listener are threads of the shim's own there.
        # The wrapper itself runs without the shim: PR_SET_CHILD_SUBREAPER
        # (36) is kept across exec, and the shim is preloaded from there.
        wrapper = ("import ctypes, os, sys; ctypes.CDLL(None).prctl(36, 1, 0, 0, 0); "
                   "os.environ['LD_PRELOAD'] = %r; os.execv(sys.argv[1], sys.argv[1:])" % SHIM)
        env = clean_env({"PYROSCOPE_PPROF_ADDRESS": "127.0.0.1:%d" % self.port,
                         "PYROSCOPE_OUTPUT_DIR": self.out}, preload=False)
        p = subprocess.Popen([sys.executable, "-c", wrapper, TARGET, "1", "1", self.stop_file, "60"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL)
        self.procs.append(p)
        self.wait_listening(p)
        cpu = http_get(self.port, "/debug/pprof/profile?seconds=1")
        heap = http_get(self.port, "/debug/pprof/heap")
        with open(self.stop_file, "w"):
            pass
        out, err = p.communicate(timeout=30)
        self.assertEqual((p.returncode, out, err), (3, b"scrape_target: 1 threads, 1 MiB live\n",
                                                     b""))
        self.assertEqual((cpu[0], heap[0]), (200, 200))
        self.assertEqual(sample_types(cpu[2]), ["samples", "cpu"])
        self.assertGreater(n_samples(cpu[2]), 0)
        self.assertEqual(sample_types(heap[2]),
                         ["alloc_objects", "alloc_space", "inuse_objects", "inuse_space"])

    def test_cmdline_is_the_whole_command_line(self):
        """/proc/PID/cmdline comes a page at a time: a command line past
        4096 bytes was cut there."""
        env = clean_env({"PYROSCOPE_PPROF_ADDRESS": "127.0.0.1:%d" % self.port,
                         "PYROSCOPE_OUTPUT_DIR": self.out})
        argv = [TARGET, "1", "1", self.stop_file, "60", "x" * 5000, "end"]
        p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL)
        self.procs.append(p)
        self.wait_listening(p)
        status, _, body = http_get(self.port, "/debug/pprof/cmdline")
        with open(self.stop_file, "w"):
            pass
        p.communicate(timeout=30)
        self.assertEqual((status, body), (200, b"\x00".join(a.encode() for a in argv)))

    def test_the_port_is_let_go_when_the_program_that_listens_ends(self):
        """bash listens, starts `sleep 6` in the background and ends after
        1.5 s: the sleep keeps the tree's helper.  The helper lets go of
        the port within 0.2 s of bash's end, so no scrape reads the
        profiles of a process that is gone, and the program's next
        instance can listen.  Before, the helper served the dead bash's
        profiles (200) until the sleep ended."""
        log = os.path.join(self.tmp, "log")
        env = clean_env({"PYROSCOPE_PPROF_ADDRESS": "127.0.0.1:%d" % self.port,
                         "PYROSCOPE_OUTPUT_DIR": self.out, "PYROSCOPE_LOG_LEVEL": "info",
                         "PYROSCOPE_LOG_FILE": log})
        p = subprocess.Popen(["bash", "-c", "sleep 6 & sleep 1.5; exit 0"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL)
        self.procs.append(p)
        deadline = time.monotonic() + 10
        status = None
        while status is None and time.monotonic() < deadline:
            try:
                status = http_get(self.port, "/debug/pprof/cmdline", timeout=5)[0]
            except OSError:
                time.sleep(0.05)
        self.assertEqual(status, 200)
        self.assertEqual(p.wait(timeout=30), 0)
        ended = time.monotonic()
        refused = None
        while refused is None and time.monotonic() < ended + 3:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                time.sleep(0.02)
            except ConnectionRefusedError:
                refused = time.monotonic() - ended
        self.assertIsNotNone(refused, "the port is still served after the program ended")
        # The tree went on meanwhile: its helper said why it let go.
        with open(log) as f:
            text = f.read()
        self.assertIn("no longer serving /debug/pprof/ on 127.0.0.1:%d: the program that "
                      "listened is gone" % self.port, text)
        self.assertEqual(p.stderr.read(), b"")
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port))   # the next instance's
        s.close()

    def test_a_window_open_when_the_program_ends_gets_what_it_has(self):
        """A 20 s CPU window asked of a program that ends 2 s later: the
        helper answers it before it ends, with the 2 s it has and a
        duration that says so.  Before, the helper ended without a word
        (0 bytes)."""
        p = self.start()
        self.wait_listening(p)
        got = {}

        def scrape():
            got["r"] = http_get(self.port, "/debug/pprof/profile?seconds=20", timeout=30)

        t = threading.Thread(target=scrape)
        t.start()
        time.sleep(2)
        self.finish(p)
        t.join(30)
        status, _, body = got["r"]
        self.assertEqual(status, 200, body[:200])
        _, d = profile_times(body)
        self.assertGreater(d, 1.5e9)
        self.assertLess(d, 10e9)

    def test_in_thread_mode_the_listener_never_takes_the_programs_own_connections(self):
        """A child subreaper profiles in a thread, so the listening socket
        is in the program's descriptor table.  own_listener closes every
        descriptor it did not open (closefrom(3)) and listens on a port of
        its own, which gets the lowest free number: before, that was the
        number the listener accepted on, and 3 of 7 of the program's own
        connections were answered by the listener.  Now the socket sits near
        1024 and the listener sees it is gone: every connection is the
        program's.  (No log file: it would be the number the program's
        socket gets.)"""
        wrapper = ("import ctypes, os, sys; ctypes.CDLL(None).prctl(36, 1, 0, 0, 0); "
                   "os.environ['LD_PRELOAD'] = %r; os.execv(sys.argv[1], sys.argv[1:])" % SHIM)
        app = free_port()
        env = clean_env({"PYROSCOPE_PPROF_ADDRESS": "127.0.0.1:%d" % self.port,
                         "PYROSCOPE_OUTPUT_DIR": self.out}, preload=False)
        p = subprocess.Popen([sys.executable, "-c", wrapper, os.path.join(PROG, "own_listener"),
                              str(app), "7"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        self.procs.append(p)
        self.assertEqual(p.stdout.readline(), b"listening on fd 3\n")
        got = []
        for _ in range(7):
            with socket.create_connection(("127.0.0.1", app), timeout=10) as c:
                c.settimeout(10)
                got.append(recv_all(c))
            time.sleep(0.05)
        out, err = p.communicate(timeout=30)
        self.assertEqual(got, [b"app:hello\n"] * 7)
        self.assertEqual((p.returncode, out, err), (0, b"", b""))

    def test_a_script_that_execs_the_program_hands_it_the_port(self):
        """pyroshim(7) says: to scrape a program started by a wrapper
        script, let the script exec it.  The shell listens first; its
        helper lets go of the port once it finds the shell's image gone,
        and the program's own helper, retrying, takes it: within its 2 s
        of retries /debug/pprof/cmdline is the program's, for good.  (The
        old helper kept the port for its own 2 s: the new image's retries
        then lost, in 1 run of 3.)"""
        env = clean_env({"PYROSCOPE_PPROF_ADDRESS": "127.0.0.1:%d" % self.port,
                         "PYROSCOPE_OUTPUT_DIR": self.out})
        argv = [TARGET, "1", "1", self.stop_file, "60"]
        p = subprocess.Popen(["bash", "-c", 'exec "$@"', "bash"] + argv, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL)
        self.procs.append(p)
        self.wait_listening(p)
        want = b"\x00".join(a.encode() for a in argv)
        deadline = time.monotonic() + 10
        body = None
        while time.monotonic() < deadline and body != want:
            try:
                status, _, body = http_get(self.port, "/debug/pprof/cmdline", timeout=5)
            except OSError:
                body = None
            time.sleep(0.1)
        with open(self.stop_file, "w"):
            pass
        out, err = p.communicate(timeout=30)
        self.assertEqual(body, want)
        self.assertEqual((p.returncode, out, err), (3, b"scrape_target: 1 threads, 1 MiB live\n",
                                                     b""))

    def test_a_program_of_the_tree_never_takes_its_first_programs_port(self):
        """Only the program started with the variable listens.  A program
        its tree executes that inherits the same address did not listen
        when it found the port taken, and took it when it was free: in the
        gap of an exec of the tree's first program (its old helper lets go,
        its new image's helper retries every 100 ms), a background child
        exec'd then took the port, and the new image went without (2 runs
        of 5 of a reviewer's script).  Here the gap is made long: bash
        execs `env` (which listens, as the same process), and `env` the
        target without the variable; bash's background child execs the
        target 1.5 s later, the port long free.  The old build's child
        listened; now nothing does, and the info log says why.  A child
        given an address of its own still listens (the tree's first
        program's address, not any, is its)."""
        log = os.path.join(self.tmp, "log")
        own = free_port()
        env = clean_env({"PYROSCOPE_PPROF_ADDRESS": "127.0.0.1:%d" % self.port,
                         "PYROSCOPE_OUTPUT_DIR": self.out, "PYROSCOPE_LOG_LEVEL": "info",
                         "PYROSCOPE_LOG_FILE": log})
        script = ('(sleep 1.5; exec "$@") & '
                  '(sleep 1.5; PYROSCOPE_PPROF_ADDRESS=127.0.0.1:%d exec "$@" ) & '
                  'exec env -u PYROSCOPE_PPROF_ADDRESS "$@"' % own)
        argv = [TARGET, "1", "1", self.stop_file, "60"]
        p = subprocess.Popen(["bash", "-c", script, "bash"] + argv, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL)
        self.procs.append(p)
        # Both targets ready (each writes the file), and the one with an
        # address of its own listening there.
        deadline = time.monotonic() + 15
        while not os.path.exists(self.stop_file + ".ready"):
            self.assertLess(time.monotonic(), deadline, "the targets never got ready")
            time.sleep(0.02)
        self.wait_listening(p, own)
        # All three targets started (the leader's, and both children),
        # then half a second: a helper's retries would have taken the
        # port by then.
        while True:
            with open(log) as f:
                if len(re.findall(r"info: profiling scrape_target", f.read())) >= 3:
                    break
            self.assertLess(time.monotonic(), deadline, "the children never started")
            time.sleep(0.05)
        time.sleep(0.5)
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        status, _, body = http_get(own, "/debug/pprof/cmdline")
        with open(self.stop_file, "w"):
            pass
        out, err = p.communicate(timeout=30)
        self.assertEqual((p.returncode, err), (3, b""))
        self.assertEqual((status, body), (200, b"\x00".join(a.encode() for a in argv)))
        with open(log) as f:
            text = f.read()
        # Said by each program that inherited it (the sleeps too), the
        # target among them.
        said = set(re.findall(
            r"pyroshim\[(\d+)\]: info: PYROSCOPE_PPROF_ADDRESS=127\.0\.0\.1:%d: the program "
            r"that started this process's tree listens on it; this program does not" % self.port,
            text))
        targets = set(re.findall(r"pyroshim\[(\d+)\]: info: profiling scrape_target", text))
        self.assertEqual(len(targets), 3, text)
        self.assertEqual(len(targets & said), 1, text)
        self.assertNotIn("Address already in use", text)

    def test_a_fork_child_does_not_take_the_port_and_programs_run_join_the_tree(self):
        # The fork child of sh -c (a subshell running the target) keeps
        # the shim: only the process started with the variable listens, so
        # the profile served comes from it, never from the child.  The two
        # exec'd targets inherit sh's address: they do not listen, say so in
        # the info log (nothing on stderr), and join sh's tree: their
        # profiles are in its files, named by sh's pid, not in their own.
        log = os.path.join(self.tmp, "tree.log")
        env = clean_env({"PYROSCOPE_PPROF_ADDRESS": "127.0.0.1:%d" % self.port,
                         "PYROSCOPE_OUTPUT_DIR": self.out, "PYROSCOPE_LOG_LEVEL": "info",
                         "PYROSCOPE_LOG_FILE": log,
                         # Each target's 1 MiB is sampled (p = 1 - e^-16).
                         "PYROSCOPE_ALLOC_SAMPLE_BYTES": "64KiB"})
        script = "(%s 1 1 %s 60; true) & %s 1 1 %s 60; wait" % (
            TARGET, self.stop_file, TARGET, self.stop_file)
        p = subprocess.Popen(["sh", "-c", script], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        self.procs.append(p)
        self.wait_listening(p)
        status, _, body = http_get(self.port, "/debug/pprof/cmdline")
        time.sleep(0.5)
        with open(self.stop_file, "w"):
            pass
        out, err = p.communicate(timeout=30)
        self.assertEqual(status, 200)
        self.assertEqual(body, b"sh\x00-c\x00" + script.encode())
        self.assertEqual((out, err), (b"scrape_target: 1 threads, 1 MiB live\n" * 2, b""))
        with open(log) as f:
            text = f.read()
        self.assertEqual(len(re.findall(r"PYROSCOPE_PPROF_ADDRESS=127\.0\.0\.1:%d: the program "
                                        r"that started this process's tree listens on it; this "
                                        r"program does not" % self.port, text)), 2, text)
        self.assertNotIn("Address already in use", text)
        self.assertEqual(text.count("helper process started"), 1, text)
        own = {f.split(".")[1] for f in os.listdir(self.out) if f.startswith("scrape_target.")}
        self.assertEqual(own, {str(p.pid)}, os.listdir(self.out))

if __name__ == "__main__":
    unittest.main()
