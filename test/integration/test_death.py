"""No profile is lost (issue 18): the uploader is a helper process holding
the sample tables in shared memory (uploader/worker.h), so a program that
never allocates gets periodic files, and one that ends by _exit, SIGTERM or
SIGKILL keeps what it sampled.  The helper is invisible: the program reaps
exactly its own children and holds no descriptor of the shim's.  Profiles
are read with `go tool pprof`."""
import glob
import os
import signal
import subprocess
import sys
import time
import unittest

from common import PROG, ShimTest, clean_env, pprof_raw, run

INTERVAL = 2.0  # seconds, PYROSCOPE_UPLOAD_INTERVAL in these tests


def cpu_seconds(path):
    types, samples = pprof_raw(path)
    return sum(v[types.index("cpu")] for v, _ in samples) / 1e9


class Death(ShimTest):
    def env(self, **extra):
        e = {"PYROSCOPE_OUTPUT_DIR": self.out, "PYROSCOPE_UPLOAD_INTERVAL": "%gs" % INTERVAL}
        e.update(extra)
        return clean_env(e)

    def profiles(self, app="spin"):
        return glob.glob(os.path.join(self.out, "%s.*.cpu.pb.gz" % app))

    def wait_total(self, want, app="spin", within=3.0):
        """The profile's CPU total once it reaches `want` seconds (the
        helper's last pass comes after the program's end), or what it
        holds after `within` seconds."""
        deadline = time.monotonic() + within
        got = 0.0
        while True:
            files = self.profiles(app)
            if files:
                got = cpu_seconds(files[0])
                if got >= want:
                    return got
            if time.monotonic() > deadline:
                return got
            time.sleep(0.2)

    def start_spin(self, seconds):
        return subprocess.Popen([os.path.join(PROG, "spin"), str(int(seconds * 1000))],
                                env=self.env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)

    def test_program_that_never_allocates_has_a_file_after_one_interval(self):
        # spin burns CPU and allocates nothing: the periodic pass alone
        # must write, one interval after start (plus a second of slack).
        p = self.start_spin(4 * INTERVAL)
        try:
            time.sleep(INTERVAL + 1.0)
            self.assertEqual(p.poll(), None, "spin ended early")
            files = self.profiles()
            self.assertEqual(len(files), 1, self.files())
            # ~2 s of CPU at 100 Hz: ~200 samples by then; half is far out.
            self.assertGreater(cpu_seconds(files[0]), 0.5 * INTERVAL)
        finally:
            p.kill()
            p.wait()

    def test_sigterm_keeps_the_cpu_and_the_exit_status(self):
        # Stopped the way systemd and Kubernetes stop services, after 1.6
        # intervals: at least 1.4 intervals of CPU (~280 samples of 320).
        p = self.start_spin(10 * INTERVAL)
        time.sleep(1.6 * INTERVAL)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, -signal.SIGTERM)
        self.assertEqual(err, b"")
        self.assertGreaterEqual(self.wait_total(1.4 * INTERVAL), 1.4 * INTERVAL)

    def test_sigkill_keeps_the_cpu_up_to_the_kill(self):
        # The OOM killer's way: SIGKILL after 6 s keeps at least 4.5 s,
        # written within a couple of seconds of the death.
        p = self.start_spin(30)
        time.sleep(6.0)
        p.kill()
        p.communicate(timeout=30)
        self.assertEqual(p.returncode, -signal.SIGKILL)
        self.assertGreaterEqual(self.wait_total(4.5, within=2.5), 4.5)

    def test_crash_keeps_the_cpu_and_dies_the_same(self):
        # A crash (SIGSEGV, SIGABRT): the shim installs no handler for it,
        # so the program dies exactly as without the shim, and the helper
        # still writes the ~1 s it burned (~100 samples; 0.85 s allows for
        # the tick granularity).
        for sig in (signal.SIGSEGV, signal.SIGABRT):
            code = ("import os, time\nend = time.process_time() + 1.0\n"
                    "while time.process_time() < end: pass\nos.kill(os.getpid(), %d)\n" % sig)
            app = "crash%d" % sig
            r = run([sys.executable, "-c", code],
                    self.env(PYROSCOPE_APPLICATION_NAME=app))
            self.assertEqual((r.rc, r.err), (-sig, b""))
            self.assertGreaterEqual(self.wait_total(0.85, app=app), 0.85, app)

    def test_exit_by_underscore_exit_keeps_its_cpu(self):
        # One thread, 1 s of CPU, then _exit: ~100 samples; 0.85 s allows
        # for the timer's tick granularity and is far from nothing.
        r = run([os.path.join(PROG, "torture_exit"), "single", "0", "1000"], self.env())
        self.assertEqual(r.rc, 0, r.err)
        files = self.profiles("torture_exit")
        self.assertEqual(len(files), 1, self.files())
        self.assertGreaterEqual(cpu_seconds(files[0]), 0.85)

    def test_multiprocessing_fork_workers_are_all_profiled(self):
        # Two fork-started workers burning ~1.5 s each end in os._exit;
        # every process's profile together is within 20 % of the tree's
        # CPU (~300+ samples: 20 % is many standard deviations).
        code = (
            "import multiprocessing as mp, time\n"
            "def burn(_):\n"
            "    end = time.process_time() + 1.5\n"
            "    x = 0\n"
            "    while time.process_time() < end:\n"
            "        x += 1\n"
            "    return x > 0\n"
            "if __name__ == '__main__':\n"
            "    mp.set_start_method('fork')\n"
            "    ps = [mp.Process(target=burn, args=(i,)) for i in range(2)]\n"
            "    [p.start() for p in ps]\n"
            "    [p.join() for p in ps]\n"
            "    print('ok', [p.exitcode for p in ps])\n")
        r = run([sys.executable, "-c", code], self.env(PYROSCOPE_APPLICATION_NAME="mp"),
                timeout=120)
        self.assertEqual((r.rc, r.out), (0, b"ok [0, 0]\n"), r.err)
        total = 0.0
        deadline = time.monotonic() + 3
        while True:
            files = glob.glob(os.path.join(self.out, "mp.*.cpu.pb.gz"))
            total = sum(cpu_seconds(f) for f in files)
            if abs(total - r.cpu) <= 0.2 * r.cpu or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        self.assertGreaterEqual(len(files), 3, self.files())
        self.assertAlmostEqual(total, r.cpu, delta=0.2 * r.cpu)

    def test_the_program_sees_only_its_own_children_and_descriptors(self):
        argv = [os.path.join(PROG, "reaper"), "4", "100"]
        base = run(argv, clean_env(preload=False))
        shim = run(argv, self.env())
        self.assertEqual(base.out.split(b"\n")[:3],
                         [b"reaped 4 of 4", b"sigchld ok", b"unknown 0"])
        self.assertEqual((shim.rc, shim.out, shim.err), (base.rc, base.out, b""))


if __name__ == "__main__":
    unittest.main()
