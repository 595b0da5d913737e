"""Torture workloads under the shim (issue 7, item 2): thread storms, C++
exception storms, fork storms, vfork and posix_spawn, exec chains through
`sh -c`, programs with their own SIGPROF or ITIMER_PROF, programs that block
every signal, every way of ending a process, and threads waiting in system
calls.  (dlopen/dlclose storms are in test_cpu.py, fork while threads
allocate in test_alloc.py.)

Every program is run at the highest CPU rate, 1000 Hz, with an allocation
sampled every 4 KiB on average, and proves four things:
  1. its stdout, stderr and exit status are those of the run without the
     shim -- each program checks its own result and prints only what does
     not depend on timing or process ids (those go to a report file);
  2. it finishes: each run is bounded by a timeout, and the program runs in
     a session of its own, so that a hung child is found and killed too;
  3. the shim profiled it: the profile files exist, decode with go tool
     pprof and hold samples in the workload's own functions -- so a test
     cannot pass because profiling silently switched itself off;
  4. no process of the run is left behind when it ends.

Minimum sample counts.  The kernel checks CPU timers at each tick of the
CPU a thread runs on, 250 times a second here, and delivers at most one
signal per tick; the per-thread timers at 1000 Hz therefore give about 250
samples per CPU-second.  Where a test needs "a plausible number of
samples" it asks for 50 per CPU-second (rusage), a fifth of that, which a
working shim gets on a busy machine too (the timers count CPU time, not
wall time), and a shim that samples nothing or only its start-up misses.

Tests marked @unittest.expectedFailure document library bugs found here
(see the comment on each); run.py counts an unexpected success as a
failure, so the mark goes when the fix lands."""
import os
import signal
import subprocess
import tempfile
import time
import unittest

from common import PROG, ShimTest, clean_env, flat_and_cum, have_go, pprof_by_pid

FAST = {"PYROSCOPE_SAMPLE_RATE": "1000", "PYROSCOPE_ALLOC_SAMPLE_BYTES": "4096"}
SAMPLES_PER_CPU_SECOND = 50  # a fifth of the 250 the kernel's tick allows


class Result:
    def __init__(self, rc, out, err, wall, cpu, leftovers):
        self.rc, self.out, self.err = rc, out, err
        self.wall, self.cpu, self.leftovers = wall, cpu, leftovers


def leftover_pids(pgid):
    """Processes still in the process group (zombies included)."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                stat = f.read()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces and ')'.
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[2]) == pgid:
            pids.append(int(d))
    return pids


def run_session(argv, env, timeout):
    """Run argv in a session of its own, with its own rusage; on a timeout
    kill the whole process group and fail.  After it exits, any process
    still in its group is reported in `leftovers` (then killed)."""
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(argv, env=env, stdout=out, stderr=err,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - t0 > timeout:
                os.killpg(p.pid, signal.SIGKILL)
                os.wait4(p.pid, 0)
                raise AssertionError("timed out after %ss (hang?): %s" % (timeout, argv))
            time.sleep(0.01)
        p.returncode = rc = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - t0
        left = leftover_pids(p.pid)
        if left:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        out.seek(0)
        err.seek(0)
        return Result(rc, out.read(), err.read(), wall, ru.ru_utime + ru.ru_stime, left)


@unittest.skipUnless(have_go(), "go tool pprof is not installed")
class TortureTest(ShimTest):
    def env(self, app, timer="thread", extra=None, preload=True):
        e = dict(FAST, PYROSCOPE_OUTPUT_DIR=self.out, PYROSCOPE_APPLICATION_NAME=app,
                 PYROSCOPE_CPU_TIMER=timer)
        e.update(extra or {})
        return clean_env(e, preload=preload)

    def same(self, argv, app, timer="thread", extra=None, timeout=60):
        """Run without the shim, then with it: the same stdout, stderr and
        exit status; both finish and leave no process behind.  Returns the
        run with the shim."""
        argv = [os.path.join(PROG, argv[0])] + [str(a) for a in argv[1:]]
        base = run_session(argv, self.env(app, timer, extra, preload=False), timeout)
        shim = run_session(argv, self.env(app, timer, extra), timeout)
        self.assertEqual(base.leftovers, [], "processes left behind without the shim")
        self.assertEqual(shim.leftovers, [], "processes left behind with the shim")
        self.assertEqual((shim.rc, shim.out, shim.err), (base.rc, base.out, base.err),
                         "%s (%s timer): differs from the run without the shim" % (argv, timer))
        return shim

    def decoded(self, app, kind):
        """{pid: samples} over app's files of `kind` (a tree writes one set
        per program name, each sample labelled with its pid)."""
        types, by = None, {}
        for path in self.files_of(app, kind):
            types, got = pprof_by_pid(path)
            for pid, samples in got.items():
                by.setdefault(pid, []).extend(samples)
        return types, by

    def pids(self, app, kind):
        return sorted(self.decoded(app, kind)[1])

    def decode(self, app, pid, kind):
        types, by = self.decoded(app, kind)
        self.assertIn(pid, by, "pid %d not in %s's %s files: %s" % (pid, app, kind, self.files()))
        return types, by[pid]

    def cpu(self, app, pid):
        """(samples, {function: cumulative cpu ns}, total cpu ns)."""
        types, samples = self.decode(app, pid, "cpu.pb.gz")
        self.assertEqual(types, ["samples", "cpu"])
        _, cum = flat_and_cum(samples, 1)
        return sum(v[0] for v, _ in samples), cum, sum(v[1] for v, _ in samples)

    def alloc(self, app, pid):
        """{function: cumulative alloc_space bytes}."""
        types, samples = self.decode(app, pid, "alloc.pb.gz")
        self.assertEqual(types, ["alloc_objects", "alloc_space", "inuse_objects", "inuse_space"])
        return flat_and_cum(samples, 1)[1]

    def only_pid(self, app, kind="cpu.pb.gz"):
        pids = self.pids(app, kind)
        self.assertEqual(len(pids), 1, self.files())
        return pids[0]

    def enough_samples(self, n, cpu_seconds, what):
        want = int(SAMPLES_PER_CPU_SECOND * cpu_seconds)
        self.assertGreaterEqual(n, want, "%s: %d CPU samples for %.2f CPU-s (want >= %d)"
                                % (what, n, cpu_seconds, want))


class Threads(TortureTest):
    def test_thread_storm_same_result_and_every_timer_torn_down(self):
        # 200 rounds of 24 threads: 4800 threads, more than the 4096 slots
        # of the shim's timer table, so a slot leaked by an ending thread
        # would leave the late thread's timer out of it, and the program's
        # own handler would count its signals ("own handler: 0 signals"
        # is part of the compared output).
        r = self.same(["torture_threads", 200, 24], "thr")
        self.assertTrue(r.out.startswith(b"ok 4800 "), r.out)
        self.assertIn(b"own handler: 0 signals\n", r.out)
        # The main thread starts and joins the threads: it is sampled, and
        # so are its allocations (pthread_create's thread-local storage).
        pid = self.only_pid("thr")
        n, cum, _ = self.cpu("thr", pid)
        self.assertGreater(cum.get("round_of", 0), 0, sorted(cum)[:30])
        self.assertGreater(self.alloc("thr", pid).get("pthread_create", 0), 0)

    def test_ended_threads_give_their_signal_stacks_back(self):
        # Each sampled thread gets a 128 KiB signal stack (shim/altstack.h),
        # freed when it ends.  "stacks grew by 0" is part of the compared
        # output: 300 threads that each left theirs would print 300.  Also
        # after the program has taken every pthread key before its first
        # thread: a key the shim made only then was refused, and every
        # thread's stack stayed mapped.
        for keys in (0, 1):
            r = self.same(["thread_stacks", 300, keys], "stk%d" % keys)
            self.assertEqual(r.out, b"stacks grew by 0\n")
            # The threads were sampled, so each had its stack.
            self.assertGreater(self.cpu("stk%d" % keys, self.only_pid("stk%d" % keys))[0], 0)

    def test_thread_storm_allocations_are_sampled(self):
        # BUG (shim/alloc.c ps_alloc_slow): a thread's first allocation
        # only seeds its random stream and is never sampled, and its bytes
        # do not count towards the first sampling distance.  Each of the
        # storm's 4800 threads allocates once (512 + i % 4096 bytes,
        # 11.09 MB in all): none of it is in the profile.  At 4 KiB the
        # estimate's sigma is about sqrt(M * T) = 2 % of it, so 10 % is
        # 5 sigma.
        self.same(["torture_threads", 200, 24], "thra")
        want = sum(512 + i % 4096 for i in range(4800))
        got = self.alloc("thra", self.only_pid("thra", "alloc.pb.gz")).get("work", 0)
        self.assertLess(abs(got - want), 0.10 * want, "work: %d bytes sampled of %d" % (got, want))

    def test_thread_storm_with_the_process_timer(self):
        # One ITIMER_PROF: its signal lands on whichever thread runs,
        # often one that is just starting or ending.
        r = self.same(["torture_threads", 100, 24, 500], "thrp", timer="process")
        self.assertTrue(r.out.startswith(b"ok 2400 "), r.out)
        n, cum, total = self.cpu("thrp", self.only_pid("thrp"))
        self.assertGreater(cum.get("work", 0), 0, sorted(cum)[:30])
        # Each sample weighs the process CPU since the last one, so the
        # total is the run's rusage; 15 % allows for the CPU the process
        # uses before the timer is armed and after the last sample.
        self.assertLess(abs(total / 1e9 - r.cpu) / r.cpu, 0.15,
                        "profile %.3f s vs rusage %.3f s" % (total / 1e9, r.cpu))

    def test_short_lived_threads_cpu_total_matches_rusage(self):
        # BUG (shim/sampler.c, per-thread timers): a thread's CPU time since
        # its last sample is never recorded when the thread ends.  A thread
        # that uses less than one period (10 ms at the default 100 Hz, 1 ms
        # at 1000 Hz, in practice one 4 ms tick) is never sampled at all:
        # 2400 threads of 2 ms each, 5.1 CPU-s, show as 0.08 s at 100 Hz
        # and 1.1 s at 1000 Hz; the process timer gets 5.0 s.  README
        # promises the total matches getrusage.
        r = self.same(["torture_threads", 50, 24, 2000], "short", extra={"PYROSCOPE_SAMPLE_RATE": "100"})
        _, _, total = self.cpu("short", self.only_pid("short"))
        self.assertLess(abs(total / 1e9 - r.cpu) / r.cpu, 0.15,
                        "profile %.3f s vs rusage %.3f s" % (total / 1e9, r.cpu))

    def test_exceptions_thrown_on_four_threads_at_once(self):
        for timer in ("thread", "process"):
            app = "exc" + timer[0]
            r = self.same(["torture_exceptions", 4, 20000], app, timer=timer)
            self.assertEqual(r.out, b"ok 80000 22399800000\n")
            n, cum, _ = self.cpu(app, self.only_pid(app))
            self.enough_samples(n, r.cpu, timer)
            # The stacks go through the throwing frames: libunwind in the
            # handler walked them while libgcc's unwinder was busy there.
            burn = sum(v for f, v in cum.items() if "burn(long)" in f)
            self.assertGreater(burn, 0, sorted(cum)[:40])
            # Exception objects come from malloc through libstdc++.
            space = self.alloc(app, self.only_pid(app, "alloc.pb.gz"))
            self.assertGreater(space.get("__cxa_allocate_exception", 0), 0, sorted(space)[:40])


class Processes(TortureTest):
    def report(self, name):
        return os.path.join(self.tmp, name)

    def read_report(self, path):
        with open(path) as f:
            return [tuple(int(x) for x in line.split()) for line in f]

    def fork_storm(self, nchild, nthreads, timer, app, parent_cpu=True):
        rep = self.report("fork.txt")
        r = self.same(["torture_fork", nchild, nthreads, rep], app, timer=timer)
        self.assertEqual(r.out, b"ok %d\n" % nchild)
        children = dict(self.read_report(rep))
        self.assertEqual(sorted(children), list(range(nchild)))
        # Children leaving by exit() run the shim's destructor: each
        # writes its own allocation profile (16 blocks of 4-12 KiB, about
        # 127 KB: at 4 KiB a child goes unsampled with probability e^-31),
        # holding its own work and none of its parent's background
        # threads.  The folded files say it cheaply for all of them; a few
        # are decoded with pprof as well.
        exited = [pid for i, pid in children.items() if i % 2 == 0]
        types, by = self.decoded(app, "alloc.pb.gz")
        for pid in exited:
            self.assertIn(pid, by, "child %d wrote no profile" % pid)
            _, cum = flat_and_cum(by[pid], 1)
            self.assertGreater(cum.get("child_work", 0), 0, (pid, sorted(cum)))
            self.assertEqual(cum.get("background", 0), 0, (pid, sorted(cum)))
        parent = [p for p in self.pids(app, "cpu.pb.gz") if p not in children.values()]
        self.assertLessEqual(len(parent), 1, self.files())
        if parent_cpu:
            self.assertEqual(len(parent), 1, self.files())
        return r, parent[0] if parent else None

    def test_fork_storm_while_threads_burn_and_allocate(self):
        # 300 forks, two children at a time, while two threads burn CPU and
        # allocate: forks land inside malloc, the sampling path and the
        # signal handler of the other threads.
        r, parent = self.fork_storm(300, 2, "thread", "fk")
        n, cum, _ = self.cpu("fk", parent)
        self.assertGreater(cum.get("background", 0), 0)
        self.assertEqual(cum.get("child_work", 0), 0, "children's samples in the parent")

    def test_fork_storm_single_threaded_with_the_process_timer(self):
        # A single-threaded parent has no uploader thread yet (it starts
        # lazily); ITIMER_PROF is not inherited by the children.  The
        # parent itself only forks and waits: a few expiries of the
        # process timer (2-5 of its samples in 8 runs by hand), so now and
        # then it has none (a fresh-clone `make check` met one): its CPU
        # profile is not asked for here, only that no child is taken for it.
        self.fork_storm(200, 0, "process", "fks", parent_cpu=False)

    def test_vfork_and_posix_spawn_storm(self):
        rep = self.report("spawn.txt")
        r = self.same(["torture_spawn", 60, rep], "sp")
        self.assertEqual(r.out, b"ok 60 60 12\n")
        pids = self.read_report(rep)
        parent = [pid for k, pid in pids if k == -1]
        long_children = [(k, pid) for k, pid in pids if k >= 0]
        # Children 0, 20 and 40, each started both ways, burn 200 ms of CPU:
        # about 50 samples each (one per 4 ms tick); ask for one.  (With
        # 40 ms, one child in ten got no signal at all under load: the
        # kernel's CPU-timer signals come late here; torture_spawn.c.)
        self.assertEqual(len(long_children), 6, long_children)
        for k, pid in long_children:
            n, cum, _ = self.cpu("sp", pid)
            self.assertGreater(cum.get("spawned_child_work", 0), 0, (k, pid, sorted(cum)))
            self.assertEqual(cum.get("background", 0), 0, "the parent's samples in a child")
        _, cum, _ = self.cpu("sp", parent[0])
        self.assertGreater(cum.get("background", 0), 0)
        self.assertEqual(cum.get("spawned_child_work", 0), 0, "a child's samples in the parent")

    def exec_chain(self, timer):
        rep = self.report("exec-%s.txt" % timer)
        r = self.same(["torture_exec", 5, 40], None, timer=timer,
                      extra={"TORTURE_REPORT": rep})
        self.assertEqual((r.rc, r.out), (7, b"".join(b"level %d\n" % i for i in range(5, -1, -1))))
        levels = self.read_report(rep)[-6:]  # the shim's run (appended after the other's)
        self.assertEqual([lv for lv, _ in levels], [5, 4, 3, 2, 1, 0])
        return levels

    def env(self, app, timer="thread", extra=None, preload=True):
        e = super().env(app or "x", timer, extra, preload)
        if app is None:
            del e["PYROSCOPE_APPLICATION_NAME"]  # each image under its own name
        return e

    def levels_in_profiles(self, pid):
        """Levels whose work is in the CPU samples of this pid (every image
        of it: they have the same name and pid label)."""
        _, by = self.decoded("torture_exec", "cpu.pb.gz")
        frames = {f for _, fs in by.get(pid, []) for f in fs}
        return {lv for lv in range(8) if "work_level%d" % lv in frames}

    def test_exec_chain_through_sh(self):
        # Every level execs /bin/sh, which execs the next level or forks it:
        # a timer left armed or a SIGPROF left pending across any of these
        # execs would kill the shell or the next level before its shim
        # starts.  Each process's last image writes its profile (40 ms of
        # CPU, ~10 samples at one per 4 ms tick).
        for timer in ("thread", "process"):
            levels = self.exec_chain(timer)
            last = {}
            for lv, pid in levels:
                last[pid] = lv  # a later image of the same pid comes later
            for pid, lv in last.items():
                self.cpu("torture_exec", pid)  # decodes
                self.assertIn(lv, self.levels_in_profiles(pid), (timer, pid, self.files()))
            for f in os.listdir(self.out):
                os.unlink(os.path.join(self.out, f))

    def test_exec_chain_keeps_every_images_profile(self):
        # BUG (uploader/export.c write_file): files are named app.pid.kind,
        # and an exec keeps the pid.  A program that execs itself (here
        # through `sh -c 'exec ...'`) writes its profile before the exec
        # (hook_exec.c) and the next image overwrites it: levels 5, 3 and
        # 1 of the chain are lost.  A later image with no CPU samples
        # would even leave the earlier image's cpu file next to its own
        # alloc file.
        levels = self.exec_chain("thread")
        found = set()
        for pid in {pid for _, pid in levels}:
            found |= self.levels_in_profiles(pid)
        self.assertEqual(sorted(found), list(range(6)))


class Signals(TortureTest):
    def test_own_handler_by_signal_installed_while_threads_burn(self):
        # test_cpu.py covers sigaction before any thread; here signal() is
        # used, after two threads started and their shim timers run.
        for timer in ("thread", "process"):
            r = self.same(["torture_ownprof", "signal", 300], "own" + timer[0], timer=timer)
            self.assertEqual(r.out, b"signals in range\n")

    def test_itimer_prof_without_handler_still_ends_the_program(self):
        # A program that arms ITIMER_PROF without a handler (a CPU-time
        # watchdog) is killed by SIGPROF without the shim, and with it:
        # SIGPROF is the program's alone.  (Found when the shim still used
        # SIGPROF: its handler swallowed the program's signal, "not killed",
        # status 3 instead of death by SIGPROF.)
        for timer in ("thread", "process"):
            r = self.same(["torture_ownprof", "itimer", 400], "wd" + timer[0], timer=timer)
            self.assertEqual((r.rc, r.out), (-signal.SIGPROF, b"armed\n"))

    def test_program_that_blocks_every_signal(self):
        # All threads burn 150 ms each with every signal blocked: no SIGPROF
        # is ever taken, and the allocations are still sampled.
        for timer in ("thread", "process"):
            app = "blk" + timer[0]
            r = self.same(["torture_sigblock", "plain", 2, 150], app, timer=timer)
            self.assertEqual(r.out, b"ok 2\n")
            space = self.alloc(app, self.only_pid(app, "alloc.pb.gz"))
            # 3 threads x 150 ms of 2 KiB blocks: thousands of blocks.
            self.assertGreater(space.get("burn_blocked", 0), 0, sorted(space)[:30])

    def test_blocked_sigprof_reset_to_default_and_unblocked_thread_timer(self):
        # Programs that reset every signal to SIG_DFL and then unblock them
        # (before an exec, say).  With per-thread timers the shim steps
        # aside by deleting its timers, which also discards their pending
        # signals: nothing kills the program.
        r = self.same(["torture_sigblock", "default", 2, 150], "dfl")
        self.assertEqual(r.out, b"ok 2\nunblocked\n")

    def test_blocked_sigprof_reset_to_default_and_unblocked_process_timer(self):
        # BUG (shim/sampler.c ps_sampler_step_aside, process mode): the
        # process timer is stopped but the SIGPROF it left pending while
        # the program blocked signals is not taken back; the program sets
        # SIGPROF to SIG_DFL and unblocks, and dies of "Profiling timer
        # expired" (status -27) instead of printing "unblocked".
        r = self.same(["torture_sigblock", "default", 2, 150], "dflp", timer="process")
        self.assertEqual(r.out, b"ok 2\nunblocked\n")

    def test_blocked_signals_never_show_the_shim_to_the_program(self):
        # A thread that blocks every signal while it uses CPU: sigpending()
        # lists nothing, and sigwait/sigwaitinfo/sigtimedwait (or a
        # signalfd) on a full set never return the shim's signal -- the
        # classic "block everything, one thread sigwaits" design receives
        # no signal nobody sent.  (Was a documented limitation while the
        # shim used SIGPROF, which stayed pending in such threads.)  Both
        # timer modes.
        for timer in ("thread", "process"):
            r = self.same(["torture_sigblock", "probe", 1, 100], "prb" + timer[0], timer=timer)
            self.assertIn(b"sigpending: none\n", r.out)


    def test_a_handler_that_longjmps_out_of_a_recorded_wait_harms_nothing(self):
        # 300000 reads under a SIGALRM every 37 us whose handler
        # siglongjmps out of them (read is async-signal-safe, so that is
        # the program's right), with waits profiled at 1 us (most reads
        # kept): one that left the shim in the middle of keeping a wait
        # left its guard and its unwinder's state set for good -- pipe
        # said EMFILE, sigprocmask did nothing, syscall answered for the
        # kernel, and no wait was kept any more (here every time).  The
        # block profile then holds after_sleep's 10 x 50 ms.
        extra = {"PYROSCOPE_BLOCK_RATE": "1us"}
        r = self.same(["torture_longjmp"], "ljmp", extra=extra)
        self.assertEqual(r.out, b"pipe 0\nsigprocmask blocks SIGUSR1 1\n"
                                b"syscall write to -1: -1 Bad file descriptor\n")
        types, samples = self.decode("ljmp", self.only_pid("ljmp", "block.pb.gz"), "block.pb.gz")
        _, cum = flat_and_cum(samples, types.index("delay"))
        # Each 50 ms sleep is kept whole (above the rate): 0.5 s to the
        # clock's precision.
        self.assertAlmostEqual(cum.get("after_sleep", 0) / 1e9, 0.5, delta=0.05, msg=cum)


class Exits(TortureTest):
    def test_every_way_of_ending_keeps_status_output_and_profile(self):
        # return, exit, _exit from main, _exit from the second thread while
        # the main thread allocates, _exit from a SIGALRM handler that
        # interrupts the main thread (maybe inside the shim's hooks).  The
        # second thread started the uploader thread, so even _exit gets its
        # last profile written (pyroshim(7), LIMITATIONS), within the flush
        # timeout: a wall time past it means the last pass hung.
        for mode in ("return", "exit", "_exit", "thread", "signal"):
            app = "x" + mode.replace("_", "u")
            r = self.same(["torture_exit", mode, 5, 150], app,
                          extra={"PYROSCOPE_FLUSH_TIMEOUT": "5s"})
            self.assertEqual((r.rc, r.out), (5, b"torture_exit %s 5\n" % mode.encode()))
            self.assertLess(r.wall, 5, "%s: the last pass ran into the flush timeout" % mode)
            pid = self.only_pid(app)
            n, cum, _ = self.cpu(app, pid)
            self.assertGreater(cum.get("burn_and_allocate", 0), 0, (mode, sorted(cum)[:30]))
            # Two threads, 150 ms each (the main thread's share in
            # "thread" and "signal" is as long); the last write covers
            # the whole run, not just its first part.
            self.enough_samples(n, r.cpu, mode)
            space = self.alloc(app, pid)
            self.assertGreater(space.get("burn_and_allocate", 0), 0, mode)

    def test_single_threaded_exit_keeps_its_profile(self):
        # A single-threaded program that ends in _exit, shorter than an
        # upload interval: its uploader process makes the last pass.
        # (Lost everything while the uploader was a lazily started
        # thread: pyroshim(7) documented it.)
        r = self.same(["torture_exit", "single", 3, 300], "single")
        self.assertEqual((r.rc, r.out), (3, b"torture_exit single 3\n"))
        n, cum, _ = self.cpu("single", self.only_pid("single"))
        self.enough_samples(n, r.cpu, "single")


class Blocking(TortureTest):
    def block(self, timer, mask):
        app = "blk%s%d" % (timer[0], mask)
        argv = [os.path.join(PROG, "torture_block"), "200", "250", str(mask)]
        base = run_session(argv, self.env(app, timer, preload=False), 60)
        shim = run_session(argv, self.env(app, timer), 60)
        for r in (base, shim):
            self.assertEqual((r.rc, r.err, r.leftovers), (0, b"", []), r.out)
        # Without the shim nothing is interrupted.
        self.assertEqual(base.out, b"read 22 written-after-the-burn 0\nsleep 0 0\n"
                                   b"eintr poll 0 nanosleep 0\n")
        return app, base, shim

    def test_thread_timers_never_interrupt_a_waiting_thread(self):
        # pyroshim(7): with per-thread timers a signal only interrupts a
        # thread that uses CPU.  The same with the burning thread blocking
        # SIGPROF: its signal waits for it, never for another thread.
        for mask in (0, 1):
            app, base, shim = self.block("thread", mask)
            self.assertEqual(shim.out, base.out, "mask %d" % mask)
        # Unmasked, the burn itself is profiled: 2 x 250 ms of CPU.
        app = "blkt0"
        n, cum, _ = self.cpu(app, self.only_pid(app))
        self.assertGreater(cum.get("burn", 0), 0)
        self.enough_samples(n, 0.5, "burn")

    def test_process_timer_lands_on_the_burning_thread_even_when_it_blocks_signals(self):
        # The kernel sends the process timer's signal to the running thread
        # unless that thread blocks it.  The program cannot block the
        # shim's signal (sigvirt.h), so with the burning thread masking
        # every signal (MASK=1) the samples still land on it, and the
        # waiting threads are not interrupted: the same output as without
        # the shim, and the burn profiled.  (When the shim used SIGPROF,
        # every signal went to the waiting threads instead: EINTR in
        # nanosleep and poll, and the burn charged to the reader.)
        app, base, shim = self.block("process", 1)
        self.assertEqual(shim.out, base.out)
        n, cum, _ = self.cpu(app, self.only_pid(app))
        self.assertGreater(cum.get("burn", 0), 0, sorted(cum))
        self.enough_samples(n, 0.5, "burn")
        # Unmasked: the handler has SA_RESTART, so read() on a pipe is
        # restarted and returns the whole message; nanosleep and poll are
        # never restarted and may fail with EINTR (pyroshim(7)).
        app, base, shim = self.block("process", 0)
        self.assertTrue(shim.out.startswith(b"read 22 written-after-the-burn 0\n"), shim.out)


if __name__ == "__main__":
    unittest.main()
