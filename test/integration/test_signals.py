"""The shim's own CPU signal, virtualized (shim/sigvirt.h, issue 13):
programs that own SIGPROF (their own ITIMER_PROF profiler, gperftools),
threads that block every signal (xz -T2), and every way a program can use
the signal number the shim uses -- each compared with the same program run
without the shim.  Profiles are read with `go tool pprof`; gperftools'
with `go tool pprof` too."""
import glob
import os
import shutil
import signal
import subprocess
import unittest

from common import PROG, ShimTest, clean_env, flat_and_cum, pprof_raw, run

SIG = 61  # the default PYROSCOPE_CPU_SIGNAL (SIGRTMAX-3)
LIBPROFILER = "/usr/lib/x86_64-linux-gnu/libprofiler.so.0"


def total_seconds(path):
    """CPU seconds in a pprof file: the cpu/nanoseconds value summed."""
    types, samples = pprof_raw(path)
    i = types.index("cpu") if "cpu" in types else 1
    return sum(v[i] for v, _ in samples) / 1e9


def caught(env):
    """The signals a program run with env catches, as the kernel sees them
    (SigCgt in /proc/self/status), which the shim cannot hide from it."""
    r = run(["grep", "^SigCgt:", "/proc/self/status"], env)
    mask = int(r.out.split()[1], 16)
    return {n for n in range(1, 65) if mask >> (n - 1) & 1}


class Virtualization(ShimTest):
    def same(self, mode, lines=None):
        argv = [os.path.join(PROG, "sigvirt_probe"), str(SIG), mode]
        base = run(argv, clean_env(preload=False))
        env = clean_env({"PYROSCOPE_OUTPUT_DIR": self.out, "PYROSCOPE_SAMPLE_RATE": "1000"})
        # The program's signal is the shim's own here, or nothing is
        # virtualized and the comparison below says nothing.
        self.assertIn(SIG, caught(env))
        shim = run(argv, env)
        self.assertEqual(shim.err, b"", mode)
        got = shim.out.splitlines()[:lines] if lines else shim.out
        want = base.out.splitlines()[:lines] if lines else base.out
        self.assertEqual((shim.rc, got), (base.rc, want), mode)
        return base

    def test_handler_installed_queried_reset_ignored(self):
        out = self.same("query").out
        # The control itself must show each step, or the test means nothing.
        for line in (b"initial dfl", b"now mine flags plain", b"signal(DFL) returned mine",
                     b"ignored, still alive", b"caught 2, after sysv delivery dfl",
                     b"held: caught 2", b"released: caught 3"):
            self.assertIn(line, out)

    def test_sa_resethand(self):
        self.assertEqual(self.same("resethand").out, b"caught 1, then dfl\n")

    def test_sa_nodefer(self):
        self.assertEqual(self.same("nodefer").out,
                         b"nodefer: caught 2, deepest 2\ndefer: caught 2, deepest 1\n")

    def test_sigqueue_to_itself_gets_code_and_value(self):
        self.assertEqual(self.same("sigqueue").out, b"caught 1 code SI_QUEUE value 1234\n")

    def test_masks_show_the_programs_wish_and_hold_its_signal(self):
        self.assertEqual(self.same("mask").out,
                         b"old has it 0, current has it 1\npthread_sigmask shows it 1\n"
                         b"critical section 1\n"
                         b"while blocked: caught 0\nafter unblock: caught 1\n")

    def test_sigwaitinfo_receives_what_the_program_sent(self):
        self.assertEqual(self.same("sigwait").out, b"sigwaitinfo ours value 42\n")

    def test_synchronous_receipt_never_hands_out_a_sample(self):
        # 300 ms of CPU at 1000 Hz with every signal blocked: ~75 samples
        # (one per 4 ms tick) were taken, none reaches sigtimedwait or a
        # signalfd on a full set.
        self.assertEqual(self.same("burnwait").out, b"sigtimedwait nothing\nsignalfd nothing\n")
        # They were taken: at least a fifth of them, in the profile.
        (f,) = glob.glob(os.path.join(self.out, "sigvirt_probe.*.cpu.pb.gz"))
        _, samples = pprof_raw(f)
        self.assertGreaterEqual(sum(v[0] for v, _ in samples), 15)

    def test_default_action_kills_by_the_same_signal(self):
        base = self.same("default")
        self.assertEqual(base.rc, -SIG)

    def test_fork(self):
        self.assertEqual(self.same("fork").out,
                         b"child caught 1\nparent caught 0, child status 0\n")

    def test_exec_keeps_blocked_and_ignored(self):
        # Into an image with the shim: the program's view.
        self.assertEqual(self.same("exec", lines=1).out.splitlines()[0],
                         b"asked: blocked 1 ignored 1")
        # Into an image without it: the kernel's own state is the wish.
        self.assertEqual(self.same("exec-bare").out,
                         b"asked: blocked 1 ignored 1\nkernel: blocked 1 ignored 1\n")

    def test_bad_signal_number_is_one_line_and_the_default(self):
        env = clean_env({"PYROSCOPE_OUTPUT_DIR": self.out, "PYROSCOPE_CPU_SIGNAL": "33"})
        r = run([os.path.join(PROG, "spin"), "200"], env)
        self.assertEqual(r.rc, 0)
        self.assertEqual(r.err.count(b"\n"), 1, r.err)
        self.assertIn(b"pyroshim: PYROSCOPE_CPU_SIGNAL=33:", r.err)
        self.assertTrue(glob.glob(os.path.join(self.out, "spin.*.cpu.pb.gz")))

    def test_configured_signal_is_used(self):
        # SIGRTMIN+5 = 39: the program's own use of 61 is then untouched
        # by the shim, and 39 is virtualized instead.
        env = clean_env({"PYROSCOPE_OUTPUT_DIR": self.out, "PYROSCOPE_CPU_SIGNAL": "SIGRTMIN+5",
                         "PYROSCOPE_SAMPLE_RATE": "1000"})
        got = caught(env)
        self.assertEqual((39 in got, 61 in got), (True, False))
        for sig in (39, 61):
            argv = [os.path.join(PROG, "sigvirt_probe"), str(sig), "mask"]
            self.assertEqual(run(argv, env).out, run(argv, clean_env(preload=False)).out)
        r = run([os.path.join(PROG, "spin"), "300"], env)
        self.assertEqual((r.rc, r.err), (0, b""))
        self.assertTrue(glob.glob(os.path.join(self.out, "spin.*.cpu.pb.gz")))


class OwnersOfSigprof(ShimTest):
    def test_own_itimer_prof_ticks_unchanged_and_the_shim_profiles_it(self):
        # own_sigprof: 10 Hz ITIMER_PROF on a busy thread for 2 CPU-s is
        # ~20 SIGPROFs (one per 100 ms of CPU); a stolen or extra signal
        # would show as a count far from the run without the shim.
        argv = [os.path.join(PROG, "own_sigprof"), "2000"]
        base = run(argv, clean_env(preload=False))
        for timer in ("thread", "process"):
            out = os.path.join(self.out, timer)
            env = clean_env({"PYROSCOPE_OUTPUT_DIR": out, "PYROSCOPE_SAMPLE_RATE": "1000",
                             "PYROSCOPE_CPU_TIMER": timer})
            r = run(argv, env)
            self.assertEqual((r.rc, r.err), (0, b""))
            mine, theirs = int(r.out), int(base.out)
            per_s = lambda n, cpu: n / cpu
            self.assertAlmostEqual(per_s(mine, r.cpu), per_s(theirs, base.cpu),
                                   delta=2.5, msg="%s: %d vs %d SIGPROFs" % (timer, mine, theirs))
            # The shim's own profile: ~2 CPU-s at 1000 Hz, thousands of
            # samples, so 15 % is many standard deviations.
            prof = glob.glob(os.path.join(out, "own_sigprof.*.cpu.pb.gz"))
            self.assertEqual(len(prof), 1)
            self.assertAlmostEqual(total_seconds(prof[0]), r.cpu, delta=0.15 * r.cpu)

    @unittest.skipUnless(os.path.exists(LIBPROFILER), "gperftools' libprofiler not installed")
    def test_gperftools_and_the_shim_both_cover_the_run(self):
        prof = os.path.join(self.tmp, "gperf.prof")
        env = clean_env({"PYROSCOPE_OUTPUT_DIR": self.out, "CPUPROFILE": prof,
                         "CPUPROFILE_FREQUENCY": "100"})
        env["LD_PRELOAD"] = LIBPROFILER + " " + env["LD_PRELOAD"]
        r = run([os.path.join(PROG, "spin"), "2000"], env)
        self.assertEqual(r.rc, 0, r.err)
        # gperftools: 100 Hz of SIGPROF over ~2 CPU-s, ~200 samples.
        p = subprocess.run(["go", "tool", "pprof", "-raw", "-symbolize=none", prof],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        n = 0
        in_samples = False
        for line in p.stdout.splitlines():
            if line.startswith("Samples:"):
                in_samples = True
            elif line.startswith("Locations"):
                break
            elif in_samples and ":" in line:
                n += int(line.split(":")[0].split()[0])
        self.assertAlmostEqual(n / r.cpu, 100, delta=15, msg="gperftools got %d samples" % n)
        mine = glob.glob(os.path.join(self.out, "spin.*.cpu.pb.gz"))
        self.assertEqual(len(mine), 1)
        self.assertAlmostEqual(total_seconds(mine[0]), r.cpu, delta=0.15 * r.cpu)


@unittest.skipUnless(shutil.which("xz"), "xz not installed")
class BlockedWorkers(ShimTest):
    def test_xz_worker_threads_blocking_every_signal_are_profiled(self):
        # liblzma's worker threads block every signal.  ~6 CPU-s of
        # compression at 100 Hz is ~600 samples: 15 % is far outside the
        # noise, and an unsampled worker would lose about half the total.
        data = os.path.join(self.tmp, "data")
        with open(data, "wb") as f:
            f.write(subprocess.run(["base64"], input=os.urandom(12 << 20),
                                   capture_output=True).stdout)
        env = clean_env({"PYROSCOPE_OUTPUT_DIR": self.out})
        r = run(["xz", "-T2", "-k", "-c", data], env, timeout=300)
        self.assertEqual(r.rc, 0, r.err)
        prof = glob.glob(os.path.join(self.out, "xz.*.cpu.pb.gz"))
        self.assertEqual(len(prof), 1)
        types, samples = pprof_raw(prof[0])
        total = sum(v[1] for v, _ in samples) / 1e9
        self.assertAlmostEqual(total, r.cpu, delta=0.15 * r.cpu)
        in_lzma = sum(v[1] for v, frames in samples
                      if any("liblzma" in f or "lzma_" in f for f in frames)) / 1e9
        self.assertGreater(in_lzma, 0.8 * total, "the workers' own stacks")


class SignalStack(ShimTest):
    def test_handler_stack_use_leaves_a_wide_margin(self):
        # Deep C stacks at 1000 Hz (CPython recursing), so that some samples
        # take libunwind's path: the deepest use of the shim's 128 KiB
        # signal stacks, as the shim measures it at exit, must stay under
        # half of it.
        env = clean_env({"PYROSCOPE_OUTPUT_DIR": self.out, "PYROSCOPE_SAMPLE_RATE": "1000",
                         "PYROSCOPE_LOG_LEVEL": "debug"})
        code = ("import sys\nsys.setrecursionlimit(5000)\n"
                "def f(n):\n    return f(n - 1) + 1 if n else sum(range(20000))\n"
                "for _ in range(300): f(800)\n")
        r = run(["python3", "-c", code], env, timeout=120)
        self.assertEqual(r.rc, 0, r.err)
        line = [l for l in r.err.decode().splitlines() if "signal stacks:" in l]
        self.assertTrue(line, r.err[-2000:])
        used, size = [int(w) for w in line[-1].split() if w.isdigit()][-2:]
        self.assertGreater(used, 1000, "nothing measured")
        self.assertLess(used, size // 2, line[-1])


if __name__ == "__main__":
    unittest.main()
