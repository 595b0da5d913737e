"""No profile is lost (issue 18): the uploader is a helper process holding
the sample tables in shared memory (uploader/worker.h), so a program that
never allocates gets periodic files, and one that ends by _exit, SIGTERM or
SIGKILL keeps what it sampled.  The helper is invisible: the program reaps
exactly its own children and holds no descriptor of the shim's.  Profiles
are read with `go tool pprof`."""
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import unittest

from common import PROG, SHIM, ShimTest, clean_env, pprof_raw, run

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

    @staticmethod
    def reap(p):
        """Wait for p; its exit status and CPU seconds (wait4's rusage,
        which a killed process has too)."""
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.stderr:
            p.err = p.stderr.read()
            p.stderr.close()
        return p.returncode, ru.ru_utime + ru.ru_stime

    @staticmethod
    def cpu_now(pid):
        """CPU seconds a running process has used (/proc/PID/stat)."""
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def start_spin(self, seconds):
        return subprocess.Popen([os.path.join(PROG, "spin"), str(int(seconds * 1000))],
                                env=self.env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)

    def test_program_that_never_allocates_has_a_file_after_one_interval(self):
        # spin burns CPU and allocates nothing: the periodic pass alone
        # must write, one interval after its helper started (after t0).
        # The file holds the CPU up to that pass: at least what the program
        # had used half a second before the pass could come at the
        # earliest, whatever the machine's load (a late pass holds more);
        # 10 % and a tick for sampling.  Waited for up to 10 s more.
        t0 = time.monotonic()
        p = self.start_spin(4 * INTERVAL)
        try:
            time.sleep(max(0.0, t0 + INTERVAL - 0.5 - time.monotonic()))
            before = self.cpu_now(p.pid)
            while not self.profiles() and time.monotonic() < t0 + INTERVAL + 10:
                time.sleep(0.05)
            self.assertEqual(p.poll(), None, "spin ended early")
            files = self.profiles()
            self.assertEqual(len(files), 1, self.files())
            self.assertGreater(cpu_seconds(files[0]), 0.9 * before - 0.01)
            self.assertGreater(cpu_seconds(files[0]), 0)
        finally:
            p.kill()
            self.reap(p)

    def test_sigterm_keeps_the_cpu_and_the_exit_status(self):
        # Stopped the way systemd and Kubernetes stop services, after 1.6
        # intervals: the profile holds the CPU the program used up to the
        # signal (its rusage), within 10 % (hundreds of samples) and a tick.
        p = self.start_spin(10 * INTERVAL)
        time.sleep(1.6 * INTERVAL)
        p.send_signal(signal.SIGTERM)
        rc, cpu = self.reap(p)
        self.assertEqual(rc, -signal.SIGTERM)
        self.assertEqual(p.err, b"")
        self.assertGreater(cpu, 0.2, "the program got no CPU")
        self.assertGreaterEqual(self.wait_total(0.9 * cpu - 0.01), 0.9 * cpu - 0.01)

    def test_sigkill_keeps_the_cpu_up_to_the_kill(self):
        # The OOM killer's way: SIGKILL after 6 s keeps the CPU used up to
        # the kill (rusage), within 10 %, written within a couple of
        # seconds of the death.
        p = self.start_spin(30)
        time.sleep(6.0)
        p.kill()
        rc, cpu = self.reap(p)
        self.assertEqual(rc, -signal.SIGKILL)
        self.assertGreater(cpu, 0.2, "the program got no CPU")
        self.assertGreaterEqual(self.wait_total(0.9 * cpu - 0.01, within=2.5), 0.9 * cpu - 0.01)

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
        # One file for the tree's one program name, every process in it.
        self.assertEqual(len(files), 1, self.files())
        self.assertGreaterEqual(len(self.pids_of("mp", "cpu.pb.gz")), 3, self.files())
        self.assertAlmostEqual(total, r.cpu, delta=0.2 * r.cpu)

    def test_the_program_sees_only_its_own_children_and_descriptors(self):
        argv = [os.path.join(PROG, "reaper"), "4", "100"]
        base = run(argv, clean_env(preload=False))
        shim = run(argv, self.env())
        self.assertEqual(base.out.split(b"\n")[:3],
                         [b"reaped 4 of 4", b"sigchld ok", b"unknown 0"])
        self.assertEqual((shim.rc, shim.out, shim.err), (base.rc, base.out, b""))

    def cat(self, argv=("cat",), env=None, **kw):
        """cat with its helper: a program alone starts it at its first
        record (worker.h, ps_worker_defer), and cat's first read, which
        waits 50 ms for its line, is one (block profiling, on by
        default)."""
        p = subprocess.Popen(list(argv), env=env or self.env(), stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)
        time.sleep(0.05)
        p.stdin.write(b"x\n")
        p.stdin.flush()
        return p

    def helper_of(self, pid, within=10.0, must=True):
        """The pid of the helper of process `pid`: a process named
        "pyroshim" (prctl) that maps one of the program's sample tables
        (a memfd of the same inode).  Found once the program's constructor
        has made it.  (Matching by command line and start time, in ticks
        of 10 ms, once took an ending helper of the test before, whose
        command line was as empty as the program's in the middle of its
        exec.)"""
        def tables(p):
            with open("/proc/%s/maps" % p) as f:
                return {m.split()[4] for m in f if m.rstrip().endswith("/memfd:pyroshim (deleted)")}

        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            mine = tables(pid)
            for d in os.listdir("/proc") if mine else ():
                if not d.isdigit() or int(d) == pid:
                    continue
                try:
                    with open("/proc/%s/comm" % d) as f:
                        comm = f.read().strip()
                    if comm == "pyroshim" and tables(d) & mine:
                        return int(d)
                except OSError:
                    continue
            time.sleep(0.02)
        if must:
            self.fail("no helper for %d" % pid)
        return None

    def test_the_helpers_watchdog_is_sigalrms_default_action(self):
        """The helper ends itself with SIGALRM's default action if its
        start-up or last pass hangs.  A SIGALRM the program ignores
        (SIG_IGN survives exec: nohup-style parents, and the helper's own
        exec) would leave a hung helper running for ever: the helper takes
        the default back, which /proc shows."""
        def ignored_and_caught(pid):
            with open("/proc/%d/status" % pid) as f:
                fields = dict(l.split(":\t", 1) for l in f.read().splitlines() if ":\t" in l)
            return int(fields["SigIgn"], 16), int(fields["SigCgt"], 16)

        alrm = 1 << (signal.SIGALRM - 1)
        p = self.cat(preexec_fn=lambda: signal.signal(signal.SIGALRM, signal.SIG_IGN))
        try:
            # Named "pyroshim" after it took the default back.
            helper = self.helper_of(p.pid)
            ign, _ = ignored_and_caught(p.pid)
            hign, hcgt = ignored_and_caught(helper)
        finally:
            _, err = p.communicate(b"x", timeout=30)
        self.assertEqual((p.returncode, err), (0, b""))
        self.assertTrue(ign & alrm, "the program ignores SIGALRM")
        self.assertEqual((hign & alrm, hcgt & alrm), (0, 0))

    def test_the_helper_leaves_a_real_time_policy_to_the_program(self):
        """A program run at a real-time policy (chrt -f): its helper, made
        by it, would share its priority (a policy survives exec), and on
        one processor one of the two starves the other.  The helper takes
        the normal policy."""
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        except PermissionError:
            self.skipTest("no real-time policy allowed here")
        p = self.cat(preexec_fn=lambda: os.sched_setscheduler(0, os.SCHED_FIFO,
                                                              os.sched_param(1)))
        try:
            # Named "pyroshim" after it took the normal policy.
            helper = self.helper_of(p.pid)
            policies = os.sched_getscheduler(p.pid), os.sched_getscheduler(helper)
        finally:
            _, err = p.communicate(b"x", timeout=30)
        self.assertEqual((p.returncode, err), (0, b""))
        self.assertEqual(policies, (os.SCHED_FIFO, os.SCHED_OTHER))

    def test_pidof_and_pgrep_find_the_program_not_its_helper(self):
        """A helper that was a copy of the program, command line included,
        was counted by `pidof cat`, `pgrep -f` and `pkill -f` as the
        program while it finished the program's profiles.  Its command line
        names it instead: "pyroshim: helper of PID" (an exec'd helper's
        argv[0], a forked one's rewritten argument area)."""
        if not (shutil.which("pidof") and shutil.which("pgrep")):
            self.skipTest("no pidof or pgrep here")
        argv = ["cat", "-", "/dev/null", "/dev/null", "/dev/null"]
        p = self.cat(argv)
        try:
            helper = self.helper_of(p.pid)
            # The kernel reads it up to its first NUL, which it includes.
            want = b"pyroshim: helper of %d\0" % p.pid
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:   # named after prctl's name
                with open("/proc/%d/cmdline" % helper, "rb") as f:
                    line = f.read()
                if line.startswith(b"pyroshim"):
                    break
                time.sleep(0.02)
            pidof = subprocess.run(["pidof", "cat"], capture_output=True).stdout.split()
            pgrep = subprocess.run(["pgrep", "-f", " ".join(argv)],
                                   capture_output=True).stdout.split()
        finally:
            _, err = p.communicate(b"x", timeout=30)
        self.assertEqual((p.returncode, err), (0, b""))
        self.assertEqual(line, want, "the helper's command line")
        self.assertIn(b"%d" % p.pid, pidof)
        self.assertNotIn(b"%d" % helper, pidof)
        self.assertEqual(pgrep, [b"%d" % p.pid])

    def helper_seen(self, env):
        """What a `cat`'s helper is: its executable, the paths it maps,
        its environment; and the program's stderr."""
        p = self.cat(env=env)
        try:
            helper = self.helper_of(p.pid)
            exe = os.path.realpath("/proc/%d/exe" % helper)
            with open("/proc/%d/maps" % helper) as f:
                maps = {l.split()[5] for l in f if len(l.split()) > 5}
            with open("/proc/%d/environ" % helper, "rb") as f:
                environ = f.read().split(b"\0")
        finally:
            _, err = p.communicate(b"x", timeout=30)
        self.assertEqual(p.returncode, 0, err)
        return exe, maps, environ, err

    def test_the_helper_is_a_fresh_image_of_the_library(self):
        """The helper is exec'd from the library's own file, not forked
        from the program: it maps none of the program's files (so the
        program's writes copy no page for it, and it holds none of the
        program's locks), and preloads nothing (another profiler's
        library would start in it)."""
        exe, maps, environ, _ = self.helper_seen(
            self.env(LD_BIND_NOW="1",
                     LD_PRELOAD=SHIM + ":" + os.path.join(self.out, "absent.so")))
        cat = os.path.realpath(shutil.which("cat"))
        self.assertEqual(exe, os.path.realpath(SHIM))
        self.assertNotIn(cat, {os.path.realpath(m) for m in maps if m.startswith("/")})
        self.assertEqual([e for e in environ if e.startswith(b"LD_")], [])

    def test_a_library_that_cannot_be_exec_d_forks_its_helper(self):
        """Where the library's file cannot be exec'd (no execute bit here;
        a noexec mount, a seccomp filter), the helper is a copy of the
        program, as before, and the info log says why."""
        lib = os.path.join(self.out, "noexec", "libpyroshim.so")
        os.makedirs(os.path.dirname(lib))
        shutil.copyfile(SHIM, lib)
        os.chmod(lib, 0o644)
        exe, _, _, err = self.helper_seen(
            self.env(PYROSCOPE_LOG_LEVEL="info", LD_PRELOAD=lib))
        self.assertEqual(exe, os.path.realpath(shutil.which("cat")))
        self.assertIn(b"uploader: helper process started, a copy of this program "
                      b"(%s: Permission denied)" % lib.encode(), err)
        # 1 s at 100 Hz: 100 samples, so 0.7 s is 3 standard deviations.
        r = run([os.path.join(PROG, "spin"), "1000"], self.env(LD_PRELOAD=lib))
        self.assertEqual((r.rc, r.err), (0, b""))
        self.assertGreater(self.wait_total(0.9), 0.7)

    def test_the_program_maps_no_library_only_the_helper_needs(self):
        # zlib (pprof, the symbol cache's CRC), libcurl and libdw are
        # loaded by the helper when it needs them, never into the program
        # (nor is zlib a dependency of the library any more).
        p = self.cat()
        helper = self.helper_of(p.pid)
        with open("/proc/%d/maps" % p.pid) as f:
            maps = f.read()
        _, err = p.communicate(b"x", timeout=30)
        self.assertEqual((p.returncode, err), (0, b""))
        self.assertIn("libpyroshim.so", maps)
        for lib in ("libz.so", "libcurl", "libdw"):
            self.assertEqual([m for m in maps.splitlines() if lib in m], [])
        self.assertGreater(helper, 0)

    def test_the_shims_shared_memory_is_left_out_of_core_dumps(self):
        # A program's core is the same with the shim: its tables (10 MiB
        # by default), control block and its tree's bell are not in it,
        # nor do they use up RLIMIT_CORE before the program's stack.  The
        # kernel says so of each mapping ("dd" in VmFlags): here in a
        # tree's leader (sh) and in a program of its tree (cat).
        p = subprocess.Popen(["sh", "-c", "cat; true"], env=self.env(), stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            self.helper_of(p.pid)
            # cat, once it maps the bell (in its constructor, before
            # main); the shell's other children come and go (the middle
            # process that starts its helper).
            deadline = time.monotonic() + 10
            cat = None
            while cat is None and time.monotonic() < deadline:
                time.sleep(0.02)
                with open("/proc/%d/task/%d/children" % (p.pid, p.pid)) as f:
                    for k in f.read().split():
                        try:
                            with open("/proc/%s/comm" % k) as c, open("/proc/%s/maps" % k) as m:
                                if c.read() == "cat\n" and "pyroshim" in m.read():
                                    cat = int(k)
                        except OSError:
                            pass
            self.assertIsNotNone(cat)
            for pid in (p.pid, cat):
                with open("/proc/%d/smaps" % pid) as f:
                    flags = re.findall(r"^[0-9a-f]+-[0-9a-f]+ .*/memfd:pyroshim.*\n(?:(?![0-9a-f]+-).*\n)*?"
                                       r"VmFlags:(.*)$", f.read(), re.M)
                self.assertGreater(len(flags), 0, pid)
                self.assertEqual([f for f in flags if " dd" not in f], [], pid)
        finally:
            _, err = p.communicate(b"x", timeout=30)
        self.assertEqual((p.returncode, err), (0, b""))

    def test_nothing_recorded_means_no_wait_at_exit_unless_a_span_is_sent(self):
        # The helper is stopped before the program ends: a program that
        # recorded nothing ends at once, without waiting for it (up to the
        # flush timeout), unless its span is to go to an OTLP endpoint (a
        # span without one only labels samples, and there are none).
        base = {"PYROSCOPE_TRACE_CORRELATION": "true", "PYROSCOPE_PROFILING_CPU_ENABLED": "false",
                "PYROSCOPE_PROFILING_BLOCK_ENABLED": "false",
                "PYROSCOPE_PROFILING_MUTEX_ENABLED": "false",
                "PYROSCOPE_ALLOC_SAMPLE_BYTES": "1GiB", "PYROSCOPE_FLUSH_TIMEOUT": "8s"}
        # Without a span to send, the program, alone, has no helper at all
        # (it would start at its first record, child or thread).
        env = self.env(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="", **base)
        p = subprocess.Popen(["cat"], env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.assertIsNone(self.helper_of(p.pid, within=0.5, must=False))
        t0 = time.monotonic()
        _, err = p.communicate(b"x", timeout=30)
        self.assertEqual((p.returncode, err), (0, b""))
        self.assertLess(time.monotonic() - t0, 4.0)
        for otlp, waits in (("http://127.0.0.1:9", True),):
            env = self.env(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=otlp, **base)
            p = subprocess.Popen(["cat"], env=env, stdin=subprocess.PIPE,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            helper = self.helper_of(p.pid)
            os.kill(helper, signal.SIGSTOP)
            try:
                t0 = time.monotonic()
                _, err = p.communicate(b"x", timeout=30)
                took = time.monotonic() - t0
            finally:
                os.kill(helper, signal.SIGCONT)
            # Gone before the next program, whose helper has its name.
            deadline = time.monotonic() + 20
            while os.path.exists("/proc/%d" % helper) and time.monotonic() < deadline:
                time.sleep(0.02)
            self.assertEqual((p.returncode, err), (0, b""))
            # 8 s when it waits; well under when it does not.
            self.assertEqual(took > 4.0, waits, "otlp %r: the program took %.1f s" % (otlp, took))


if __name__ == "__main__":
    unittest.main()
