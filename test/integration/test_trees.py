"""Process trees (issue 22, part 1): one helper per tree.  The tree's first
preloaded process leads it: its helper listens on an abstract socket named
in PYROSHIM_HELPER.  Every process that execs into a preloaded image joins
that helper instead of making its own; one that cannot join says why in the
info log and makes a helper of its own, which its own children then join.

Truth is independent of the shim: wait4's rusage of the tree (children
included), and the helpers are counted in the info log, whose lines say
which helper each process used."""
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import unittest

from common import (PROG, SHIM, ShimTest, clean_env, have_go, helper_log, pprof, pprof_by_pid,
                    pprof_pids, pprof_raw, pprof_tags, read_folded, run)
from test_upload import Peer

SPIN = os.path.join(PROG, "spin")


class Trees(ShimTest):
    def env(self, extra=None):
        self.log = os.path.join(self.tmp, "log")
        e = clean_env({"PYROSCOPE_OUTPUT_DIR": self.out, "PYROSCOPE_LOG_LEVEL": "info",
                       "PYROSCOPE_LOG_FILE": self.log, "PYROSCOPE_APPLICATION_NAME": "tree",
                       "PYROSCOPE_PROFILING_ALLOC_ENABLED": "false",
                       "PYROSCOPE_PROFILING_BLOCK_ENABLED": "false",
                       "PYROSCOPE_PROFILING_MUTEX_ENABLED": "false"})
        e.update(extra or {})
        return e

    def waits_env(self, extra=None):
        """Block profiling only, and the debug log: a program records
        nothing until it waits."""
        return self.env(dict({"PYROSCOPE_LOG_LEVEL": "debug",
                              "PYROSCOPE_PROFILING_CPU_ENABLED": "false",
                              "PYROSCOPE_PROFILING_BLOCK_ENABLED": "true"}, **(extra or {})))

    def python_waits(self, code):
        """python3 -c code, with waits_env; it must succeed silently."""
        r = run(["python3", "-c", code], self.waits_env())
        self.assertEqual((r.rc, r.err), (0, b""))
        return r

    def log_text(self):
        with open(self.log) as f:
            return f.read()

    def cpu_seconds(self):
        """The CPU the folded files hold, and the processes the pprof files
        label (a tree writes one set of files per program name)."""
        got = 0
        for f in self.files():
            if f.endswith(".cpu.folded"):
                got += sum(read_folded(os.path.join(self.out, f)).values())
        return got / 1e9, self.pids_of("tree", "cpu.pb.gz")

    def helpers_started(self):
        return len(re.findall(r"uploader: helper process started", self.log_text()))

    def joined(self):
        """pid of each process that joined -> the helper it joined."""
        return {int(p): int(h) for p, h in
                re.findall(r"pyroshim\[(\d+)\]: info: uploader: joined the tree's helper "
                           r"\(pid (\d+)\)", self.log_text())}

    def exec_d(self):
        """pid of each image whose constructor profiled it (not a fork
        child)."""
        return {int(p) for p in re.findall(r"info: profiling \S+ \(pid (\d+)\)", self.log_text())}

    def assert_a_session_of_the_one_helper(self, child):
        """Fork child `child` was a session of the tree's one helper (its
        debug log says so), nothing was refused, and the child is labelled
        in the tree's CPU profile."""
        helper_log(self, self.log)
        text = self.log_text()
        self.assertNotIn("not taken", text)
        self.assertEqual(self.helpers_started(), 1, text[-3000:])
        self.assertRegex(text, r"fork child %d of \d+ joined the tree" % child)
        self.assertIn(child, self.pids_of("tree", "cpu.pb.gz"), text[-3000:])

    def test_a_shell_loop_makes_one_helper_and_every_process_is_counted(self):
        """40 processes of 25 ms at 100 Hz: each is a session of the one
        helper.  Tolerance: as ShortProcesses' (test_cpu), whose bound is
        15 %, five standard deviations of the expiries' rounding."""
        n = 40
        r = run(["bash", "-c", 'for i in {1..%d}; do "%s" 25; done' % (n, SPIN)],
                self.env({"PYROSCOPE_SAMPLE_RATE": "100"}))
        self.assertEqual((r.rc, r.out, r.err), (0, b"", b""))
        joined = self.joined()
        self.assertEqual(len(joined), n, self.log_text()[-3000:])
        self.assertEqual(len(set(joined.values())), 1)
        # bash alone made one: its fork children only exec.
        self.assertEqual(self.helpers_started(), 1, self.log_text()[-3000:])
        got, pids = self.cpu_seconds()
        self.assertLess(abs(got / r.cpu - 1), 0.15, "profiles %.3f s of %.3f s" % (got, r.cpu))
        # A 25 ms process at 10 ms periods always gets expiries: a label
        # in the one set of files of the name, the shell's pid's.
        self.assertLessEqual(set(joined), pids)
        self.assertEqual(self.files(), ["tree.%d.cpu.folded" % r.pid, "tree.%d.cpu.pb.gz" % r.pid])

    def test_a_program_killed_before_its_notice_is_taken_keeps_its_samples(self):
        """A member writes its notice at its first record and hands its
        tables over, and the helper takes the notice after a grace of 20
        ms (a program that execs meanwhile costs it nothing).  One that
        died meanwhile, by a crash or a kill, was refused: its maps were
        gone, and everything it recorded was lost (here every one of
        them, 15 ms each then abort).  Now each is named from the maps
        the helper read when it handed its tables over; one that died
        before the helper's accepting thread could read them (a loaded
        machine: 1 of 40 in a CI run) is still lost ("not taken"), so 4
        of 40 may be.

        Every program the helper took is in the profile, labelled with
        its pid.  A program that never recorded is none of the shim's
        doing: the kernel signals a CPU timer's expiry at a tick on which
        the thread runs, and on a busy machine that can come several
        milliseconds of the thread's CPU later, after this program's
        abort (measured on this 2-core machine with three busy loops: 24
        of 400 programs had no signal of an expiry at 8 ms within 15 ms
        of CPU; at 1 ms, 3 of 1000 with two).  Hence 1000 Hz, whose first
        expiry comes within the first millisecond, and 4 of 40 such
        programs allowed; the old build lost all 40.

        For the same reason a killed program loses what it ran since the
        kernel last signalled an expiry: about 2 ms of each 15 on an idle
        machine (half a tick), so the profiles hold 0.82-0.87 of the
        tree's CPU, and 0.48-0.87 with two busy loops.  They hold at least
        a fifth of it (one that kept only its first record's sample would
        hold a fifteenth), and never more than 1.15 of it (about 600
        expiries of 1 ms, each counted once: nothing counted twice)."""
        n = 40
        env = self.env({"PYROSCOPE_LOG_LEVEL": "debug", "PYROSCOPE_SAMPLE_RATE": "1000"})
        del env["PYROSCOPE_APPLICATION_NAME"]
        r = run(["sh", "-c", 'ulimit -c 0; for i in $(seq %d); do "%s" 15 abort; done; true'
                 % (n, SPIN)], env)
        self.assertEqual((r.rc, r.out), (0, b""))
        helper_log(self, self.log)
        text = self.log_text()
        spins = {int(p) for p in re.findall(r"info: profiling spin \(pid (\d+)\)", text)}
        self.assertEqual(len(spins), n, text[-3000:])
        lost = {int(p) for p in re.findall(r"uploader: pid (\d+) not taken", text)} & spins
        taken = {int(p) for p in re.findall(r"uploader: pid (\d+) joined the tree", text)} & spins
        self.assertLessEqual(len(lost), 4, lost)
        self.assertGreaterEqual(len(taken), n - len(lost) - 4, text[-3000:])
        pids, got = set(), 0
        for path in self.files_of("spin", "cpu.pb.gz"):
            types, by = pprof_by_pid(path)
            for pid, samples in by.items():
                pids.add(pid)
                got += sum(v[types.index("cpu")] for v, _ in samples) / 1e9
        self.assertEqual(pids, taken, (self.files(), text[-3000:]))
        self.assertTrue(0.2 < got / r.cpu < 1.15, "profiles %.3f s of %.3f s" % (got, r.cpu))

    def test_a_configuration_mistake_is_one_line_for_the_whole_tree(self):
        """Every process of a tree inherits one environment: its mistake
        is one line for the tree (PYROSHIM_SAID), not one per process.  A
        process whose own mistakes differ prints them, and an `env -i`
        child, which cannot know what was said, prints its own."""
        def line(v):
            return ("pyroshim: PYROSCOPE_SAMPLE_RATE=%s: expected a whole number of Hz from 1 "
                    "to 1000; using 100" % v)

        r = run(["bash", "-c", '/bin/true; /bin/true; sh -c "/bin/true | cat"; '
                 'PYROSCOPE_SAMPLE_RATE=x sh -c "/bin/true; /bin/true"; '
                 'env -i LD_PRELOAD="$LD_PRELOAD" PYROSCOPE_SAMPLE_RATE=1001 /bin/true; '
                 '/bin/true 2>"$TMP_ERR"'],
                self.env({"PYROSCOPE_SAMPLE_RATE": "0",
                          "TMP_ERR": os.path.join(self.tmp, "err")}))
        self.assertEqual((r.rc, r.out), (0, b""))
        self.assertEqual(r.err.decode().splitlines(), [line(0), line("x"), line(1001)])
        # Said in every file it goes to: a child's own stderr too.
        with open(os.path.join(self.tmp, "err")) as f:
            self.assertEqual(f.read().splitlines(), [line(0)])
        # A mistake in a variable the first process sets right for its
        # children (its tree's name) is its alone; the others are still
        # the tree's, said once.
        r = run(["bash", "-c", "/bin/true; /bin/true"],
                self.env({"PYROSCOPE_SAMPLE_RATE": "0", "PYROSHIM_HELPER": "bogus"}))
        self.assertEqual((r.rc, r.out), (0, b""))
        self.assertEqual(r.err.decode().splitlines(),
                         [line(0), "pyroshim: PYROSHIM_HELPER=bogus: not a helper's name; "
                          "starting a helper of its own"])

    def test_short_commands_never_meet_the_helper(self):
        """A program of the tree puts off joining it until its first record
        (worker.h, ps_worker_defer): a command that records nothing never
        makes a control block or tables, never writes a notice and never
        sends the helper a message; the info log says which helper it
        would join.  CPU and allocation profiling are off and block
        profiling on, so that the shim runs and /bin/true records nothing.
        The spin of 300 ms at the end (not the shell's last command, which
        the shell would exec: it would be the tree's leader) has CPU
        profiling on: it joins at its first sample, and its session ends
        with it."""
        n = 20
        env = self.waits_env()
        del env["PYROSCOPE_APPLICATION_NAME"]
        r = run(["bash", "-c", 'for i in {1..%d}; do /bin/true; done; '
                 'PYROSCOPE_PROFILING_CPU_ENABLED=true "%s" 300; true' % (n, SPIN)], env)
        self.assertEqual((r.rc, r.out, r.err), (0, b"", b""))
        helper_log(self, self.log)
        text = self.log_text()
        names = {int(p): name for name, p in re.findall(r"info: profiling (\S+) \(pid (\d+)\)", text)}
        trues = {p for p, name in names.items() if name == "true"}
        spins = {p for p, name in names.items() if name == "spin"}
        self.assertEqual((len(trues), len(spins)), (n, 1), text[-3000:])
        helper = {int(h) for h in
                  re.findall(r"joins the tree's helper \(pid (\d+)\) when it first records", text)}
        self.assertEqual(len(helper), 1, text[-3000:])
        waiting = {int(p) for p in re.findall(
            r"pyroshim\[(\d+)\]: info: uploader: this program joins the tree's helper", text)}
        self.assertLessEqual(trues | spins, waiting, text[-3000:])
        joined = self.joined()
        self.assertEqual(set(joined) & trues, set(), text[-3000:])
        self.assertEqual({joined.get(p) for p in spins}, helper, text[-3000:])
        ended = {int(p) for p in re.findall(r"uploader: pid (\d+)'s session ended", text)}
        self.assertEqual(ended & trues, set(), text[-3000:])
        self.assertLessEqual(spins, ended, text[-3000:])
        self.assertEqual(self.helpers_started(), 1, text[-3000:])

    def test_a_program_joins_at_its_first_record_of_any_kind(self):
        """A program of the tree that samples no CPU joins at its first
        allocation sample (alloc_sites, 8 MiB: about 16 samples of 512 KiB)
        or its first wait kept (sleep 0.3 s, block profiling's 1 ms bound):
        its profile of that kind is in the tree's files, labelled with its
        pid.  Neither is the shell's last command, which the shell would
        exec (the tree's leader joins in its constructor)."""
        env = self.env({"PYROSCOPE_PROFILING_CPU_ENABLED": "false",
                        "PYROSCOPE_PROFILING_ALLOC_ENABLED": "true",
                        "PYROSCOPE_PROFILING_BLOCK_ENABLED": "true"})
        script = ('"%s" 8 0 "%s" & a=$!; wait $a; sleep 0.3 & s=$!; wait $s; echo $a $s' %
                  (os.path.join(PROG, "alloc_sites"), os.path.join(self.tmp, "truth.json")))
        r = run(["bash", "-c", script], env)
        self.assertEqual((r.rc, r.err), (0, b""))
        a, s = map(int, r.out.split())
        joined = self.joined()
        text = self.log_text()
        self.assertLessEqual({a, s}, set(joined), text[-3000:])
        self.assertIn(a, self.pids_of("tree", "alloc.pb.gz"), text[-3000:])
        self.assertIn(s, self.pids_of("tree", "block.pb.gz"), text[-3000:])
        self.assertEqual(self.helpers_started(), 1, text[-3000:])

    def test_a_fork_child_of_a_program_not_joined_yet_joins_on_its_own(self):
        """The fork child of a program that put off joining (python, a
        program of the tree that records nothing: CPU and allocation
        profiling off) puts it off too, and joins with settings of its
        own at its first record: here its first wait, a sleep of 0.2 s that
        ends after its parent did.  Its idle sibling never meets the
        helper.  The shell's last command (sleep 1, the leader's image)
        keeps the tree's helper."""
        code = ("import os, time\n"
                "idle = os.fork()\n"
                "if idle == 0: os._exit(0)\n"
                "busy = os.fork()\n"
                "if busy == 0:\n"
                "    time.sleep(0.2)\n"
                "    os._exit(0)\n"
                "print(os.getpid(), idle, busy, flush=True)\n")
        env = self.waits_env({"CODE": code})
        r = run(["bash", "-c", 'python3 -c "$CODE"; sleep 1'], env)
        self.assertEqual((r.rc, r.err), (0, b""))
        _, idle, busy = map(int, r.out.split())
        helper_log(self, self.log)
        text = self.log_text()
        # Of its parent, or of a subreaper if the parent ended before the
        # child's fork handler ran (a busy machine): the pid it names.
        self.assertRegex(text, r"fork child %d of \d+ joined the tree" % busy)
        self.assertNotRegex(text, r"fork child %d of" % idle)
        self.assertNotIn("not taken", text)
        self.assertEqual(self.helpers_started(), 1, text[-3000:])
        self.assertIn(busy, self.pids_of("tree", "block.pb.gz"), text[-3000:])
        self.assertNotIn(idle, self.pids_of("tree", "block.pb.gz"))

    def test_a_joined_programs_idle_fork_children_never_meet_the_helper(self):
        """The fork children of the tree's leader, which joined at its
        start, put off joining too (ps_worker_child): five that end at once
        with nothing recorded never write a notice nor make tables (no
        memfd of the shim's open in them), and the helper never hears of
        them.  A sixth sleeps 0.3 s (block profiling: its first record is
        that wait), ending after its parent did: it held an entry of the
        bell's `waits` meanwhile, so the helper outlived its parent for
        it, and it joined with settings of its own."""
        code = ("import os, time\n"
                "def shims():\n"
                "    fds = os.listdir('/proc/self/fd')\n"
                "    return sum(os.readlink('/proc/self/fd/' + f).startswith('/memfd:pyroshim')\n"
                "               for f in fds if os.path.exists('/proc/self/fd/' + f))\n"
                "idle = []\n"
                "for i in range(5):\n"
                "    p = os.fork()\n"
                "    if p == 0: os._exit(shims())\n"
                "    idle.append(p)\n"
                "if any(os.waitpid(p, 0)[1] for p in idle): print('memfds in a child')\n"
                "busy = os.fork()\n"
                "if busy == 0:\n"
                "    time.sleep(0.3)\n"
                "    os._exit(0)\n"
                "print(os.getpid(), busy, *idle, flush=True)\n")
        r = self.python_waits(code)
        _, busy, *idle = map(int, r.out.split())
        text = helper_log(self, self.log)
        self.assertRegex(text, r"fork child %d of \d+ joined the tree" % busy)
        for p in idle:
            self.assertNotRegex(text, r"(fork child|pid) %d\b" % p)
        self.assertNotIn("not taken", text)
        self.assertEqual(self.helpers_started(), 1, text[-3000:])
        self.assertIn(busy, self.pids_of("tree", "block.pb.gz"), text[-3000:])

    def test_children_of_every_kind_join_the_one_helper(self):
        """However the leader makes its child -- fork (subprocess), vfork
        (dash's way), posix_spawn, system, popen -- the child finds the
        tree in the environment it is given (Python's os.environ, dash's
        variables: copies made at their start) and joins its one helper:
        each spin, 30 ms of CPU at 100 Hz (always sampled), is a session of
        it, and no second helper starts.  A shell between them (system,
        popen) joins too when it happens to be sampled: the spins are told
        by their application name, the executable's."""
        env = self.env({"PYROSCOPE_LOG_LEVEL": "debug"})
        del env["PYROSCOPE_APPLICATION_NAME"]
        cases = {
            "fork": ("import subprocess, sys\n"
                     "subprocess.run([sys.argv[1], '30'], check=True)\n"),
            "posix_spawn": ("import os, sys\n"
                            "p = os.posix_spawn(sys.argv[1], [sys.argv[1], '30'], os.environ)\n"
                            "os.waitpid(p, 0)\n"),
            "system": "import os, sys\nos.system(sys.argv[1] + ' 30')\n",
            "popen": "import os, sys\nos.popen(sys.argv[1] + ' 30').read()\n",
        }
        cases = [(how, ["python3", "-c", code, SPIN], 1) for how, code in cases.items()]
        cases.append(("vfork", ["dash", "-c", '"%s" 30; "%s" 30' % (SPIN, SPIN)], 2))
        for how, argv, spins in cases:
            with self.subTest(how=how):
                open(self.log, "w").close()
                r = run(argv, env)
                self.assertEqual((r.rc, r.err), (0, b""))
                text = helper_log(self, self.log)
                self.assertEqual(self.helpers_started(), 1, text[-3000:])
                joined = self.joined()
                spun = set(map(int, re.findall(r"info: profiling spin \(pid (\d+)\)",
                                               self.log_text())))
                self.assertEqual(len(spun), spins, text[-3000:])
                self.assertLessEqual(spun, set(joined), text[-3000:])
                self.assertEqual(len(set(joined.values())), 1, text[-3000:])

    def test_another_build_of_the_same_version_keeps_to_itself(self):
        """The tree's processes check each other's build, not only the
        version: two builds of one version may lay their structures out
        differently.  A child preloading the same library without its
        build ID (objcopy) is refused, makes a helper of its own, and its
        profile is written."""
        other = os.path.join(self.tmp, "libpyroshim-other.so")
        subprocess.run(["objcopy", "--remove-section", ".note.gnu.build-id", SHIM, other],
                       check=True)
        env = self.env({"PYROSCOPE_LOG_LEVEL": "debug"})
        del env["PYROSCOPE_APPLICATION_NAME"]
        r = run(["sh", "-c", "LD_PRELOAD=%s %s 30" % (other, SPIN)], env)
        self.assertEqual((r.rc, r.err), (0, b""))
        deadline = time.monotonic() + 20
        while self.log_text().count("uploader: helper used") < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        text = self.log_text()
        self.assertIn("another build of pyroshim", text)
        self.assertEqual(self.helpers_started(), 2, text[-3000:])
        self.assertEqual(self.joined(), {}, text[-3000:])
        self.assertTrue(any(f.startswith("spin.") and f.endswith(".cpu.pb.gz")
                            for f in os.listdir(self.out)), os.listdir(self.out))

    @unittest.skipUnless(have_go(), "needs go tool pprof")
    def test_a_members_profile_names_its_own_executable_first(self):
        """pprof takes a profile's first Mapping for the program ("File:").
        A member of a tree is folded in the helper, a copy of the tree's
        first program: its executable is found from its own entry point,
        not the helper's.  dd spends its time in the C library's read and
        write, so that the order of its samples would put libc first."""
        env = self.env({"PYROSCOPE_LOG_LEVEL": "debug"})
        del env["PYROSCOPE_APPLICATION_NAME"]
        r = run(["sh", "-c", "dd if=/dev/zero of=/dev/null bs=64k count=20000 2>/dev/null; "
                 "dd if=/dev/zero of=/dev/null bs=64k count=20000 2>/dev/null"], env)
        self.assertEqual((r.rc, r.err), (0, b""))
        self.assertEqual(self.helpers_started(), 1, helper_log(self, self.log)[-3000:])
        cpu = [f for f in os.listdir(self.out) if f.startswith("dd.") and f.endswith(".cpu.pb.gz")]
        self.assertEqual(len(cpu), 1, os.listdir(self.out))
        self.assertTrue(pprof("-top", os.path.join(self.out, cpu[0])).startswith("File: dd\n"))

    def quiet_env(self, extra=None):
        """Nothing recorded by a program that does not ask for it (a
        leader's first record starts its helper): the CPU at one sample a
        second, whose first expiry is drawn in (0, 1 s] (a program of 1-30
        ms crosses it once in 1000 to once in 33), allocations off, the
        debug log."""
        return self.env(dict({"PYROSCOPE_LOG_LEVEL": "debug", "PYROSCOPE_SAMPLE_RATE": "1"},
                             **(extra or {})))

    def test_a_command_alone_that_records_nothing_makes_no_helper(self):
        """A program that leads its tree puts off its helper until its
        first record, child or thread (worker.h, ps_worker_defer): one
        that has none of them costs no helper and no socket.  It exports the
        tree's name at once, without the helper's part: its own exec (a
        shell's `exec`) passes it on as it is, the helper never having
        been made."""
        r = run(["sh", "-c", "exec printenv PYROSHIM_HELPER"], self.quiet_env())
        self.assertEqual((r.rc, r.err), (0, b""))
        text = self.log_text()
        leader = int(re.search(r"pyroshim\[(\d+)\]: info: uploader: this program leads", text)
                     .group(1))
        self.assertEqual(r.out.decode(), "pyroshim-%d-" % leader + r.out.decode()[-17:])
        self.assertRegex(r.out, rb"^pyroshim-\d+-[0-9a-f]{16}\n$")
        self.assertIn("this program leads its tree; its helper starts at its first "
                      "record, child or thread", text)
        self.assertEqual(self.helpers_started(), 0, text)
        self.assertEqual(self.files(), [])

    def test_a_lone_program_starts_its_helper_at_its_first_sample(self):
        """spin alone, 300 ms of CPU at 100 Hz: its helper starts in the
        signal handler of its first sample (exec'd: whatever the sample
        interrupted holds no lock it needs), and holds its tables from
        then on, so its profile is whole: +-15 % as the shell loop's."""
        r = run([SPIN, "300"], self.env({"PYROSCOPE_SAMPLE_RATE": "100"}))
        self.assertEqual((r.rc, r.out, r.err), (0, b"", b""))
        text = self.log_text()
        self.assertRegex(text, r"uploader: helper process started \(pid \d+\), at its first "
                               r"record")
        self.assertEqual(self.helpers_started(), 1, text)
        got, _ = self.cpu_seconds()
        self.assertLess(abs(got / r.cpu - 1), 0.15, "profiles %.3f s of %.3f s" % (got, r.cpu))

    def test_a_lone_program_that_only_waits_keeps_what_it_recorded(self):
        """cat, block profiling only, reading a pipe: its first read waits
        0.3 s, a block sample (in the read's hook, which may hold any lock
        of the program's) that starts its exec'd helper; it is then killed
        (SIGKILL) in its next read, before it prints anything more.  The
        helper writes the wait it holds.  (A helper copied from the
        program could not start there: the program waited with nothing
        written, and the kill lost it.)"""
        p = subprocess.Popen(["cat"], env=self.waits_env(), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(0.3)
        p.stdin.write(b"x\n")
        p.stdin.flush()
        self.assertEqual(p.stdout.readline(), b"x\n")
        time.sleep(0.5)
        p.kill()
        _, err = p.communicate(timeout=30)
        self.assertEqual((p.returncode, err), (-signal.SIGKILL, b""))
        text = helper_log(self, self.log)
        blocks = [f for f in self.files() if f.endswith(".block.pb.gz")]
        self.assertEqual(len(blocks), 1, self.files())
        types, samples = pprof_raw(os.path.join(self.out, blocks[0]))
        delay = sum(v[types.index("delay")] for v, _ in samples)
        self.assertGreater(delay / 1e9, 0.2, text[-3000:])

    def test_a_lone_program_killed_keeps_what_it_recorded(self):
        """spin, killed (SIGKILL) 0.3 s into its burn: its helper started
        at its first sample, before the kill, and writes what it holds.
        About 30 expiries of 10 ms: at least 20 of them."""
        env = self.env({"PYROSCOPE_SAMPLE_RATE": "100", "PYROSCOPE_LOG_LEVEL": "debug"})
        del env["LD_PRELOAD"]
        r = run(["sh", "-c", 'env LD_PRELOAD="%s" "%s" 5000 & p=$!; sleep 0.3; kill -9 $p; '
                 'wait $p 2>/dev/null; echo $?' % (SHIM, SPIN)], env)
        self.assertEqual((r.rc, r.out, r.err), (0, b"137\n", b""))
        helper_log(self, self.log)
        got, _ = self.cpu_seconds()
        self.assertGreater(got, 0.2, self.log_text()[-3000:])

    def test_children_of_every_kind_join_a_leader_that_recorded_nothing(self):
        """A leader that recorded nothing starts its helper before its
        first child, however it is made -- fork, vfork (dash's way),
        posix_spawn, system, popen -- and the exec that makes the child
        passes the tree's whole name on, though the parent's own copy of
        its environment (Python's os.environ, dash's variables) holds the
        name without the helper: each spin (CPU on) joins the one helper.
        Without the hooks the children led trees of their own.  (A
        leader sampled before its child, one run in 30 or so, started its
        helper then: such a run is made again, up to three times.)"""
        env = self.quiet_env()
        cpu = "PYROSCOPE_SAMPLE_RATE=100"
        cases = {
            "fork": ("import os, subprocess, sys\n"
                     "subprocess.run(['env', '%s', sys.argv[1], '30'], check=True)\n" % cpu),
            "posix_spawn": ("import os, sys\n"
                            "e = dict(os.environ, PYROSCOPE_SAMPLE_RATE='100')\n"
                            "p = os.posix_spawn(sys.argv[1], [sys.argv[1], '30'], e)\n"
                            "os.waitpid(p, 0)\n"),
            "system": ("import os, sys\n"
                       "os.system('%s %s 30' % (sys.argv[2], sys.argv[1]))\n"),
            "popen": ("import os, sys\n"
                      "os.popen('%s %s 30' % (sys.argv[2], sys.argv[1])).read()\n"),
        }
        cases = [(how, ["python3", "-c", code, SPIN, cpu], 1) for how, code in cases.items()]
        cases.append(("vfork", ["dash", "-c", '%s "%s" 30; %s "%s" 30' % (cpu, SPIN, cpu, SPIN)],
                      2))
        for how, argv, spins in cases:
            with self.subTest(how=how):
                for _ in range(3):
                    open(self.log, "w").close()
                    r = run(argv, env)
                    self.assertEqual((r.rc, r.err), (0, b""))
                    text = helper_log(self, self.log)
                    if "at its first child or thread" in text:
                        break
                self.assert_one_tree(text, spins)

    def assert_one_tree(self, text, spins):
        """One program led the tree, its one helper started at its first
        child, and `spins` programs (spin: 30 ms of CPU, always sampled)
        joined it."""
        self.assertEqual(len(re.findall(r"this program leads its tree", text)), 1, text[-3000:])
        self.assertEqual(self.helpers_started(), 1, text[-3000:])
        helper = int(re.search(r"helper process started \(pid (\d+)\), at its first child or "
                               r"thread", text).group(1))
        joined = self.joined()
        self.assertEqual(len(joined), spins, text[-3000:])
        self.assertEqual(set(joined.values()), {helper})

    def test_a_fork_child_that_joins_unmaps_its_parents_tables(self):
        """A fork child that puts off joining leaves its parent's tables
        and control block mapped in its fork handler (unmapping them there
        cost a shell's child that execs at once 30 us), and unmaps them
        when it makes its own, at its first record: after it, none of the
        parent's shared mappings is in the child."""
        code = ("import os, time\n"
                "def shared():\n"
                "    return {l.split()[4] for l in open('/proc/self/maps')\n"
                "            if 'memfd:pyroshim' in l}\n"
                "r, w = os.pipe()\n"
                "p = os.fork()\n"
                "if p == 0:\n"
                "    time.sleep(0.3)\n"
                "    os.write(w, ' '.join(shared()).encode())\n"
                "    os._exit(0)\n"
                "mine = shared()\n"
                "os.waitpid(p, 0)\n"
                "theirs = set(os.read(r, 1000).decode().split())\n"
                "print(len(mine), p, len(theirs & mine), len(theirs), flush=True)\n")
        r = self.python_waits(code)
        mine, child, kept, has = map(int, r.out.split())
        text = helper_log(self, self.log)
        self.assertRegex(text, r"fork child %d of \d+ joined the tree" % child)
        # The parent's: its stack table, its control block, and the tree's
        # bell, the one the child keeps.
        self.assertGreaterEqual(mine, 3)
        self.assertEqual(kept, 1)
        self.assertGreaterEqual(has, 3)   # its own instead

    def test_a_background_command_of_a_shell_that_ends_at_once_stays_in_the_tree(self):
        """`sh -c 'prog &'`: the shell, the tree's leader, ends right after
        its fork, often before the child's fork handler ran.  The shell
        reserved an entry of the bell's `waits` before the fork (WAIT_FORK),
        which the child makes its own, leaves at its exec for the new image
        (WAIT_EXEC), which takes it back when it maps the bell: the helper
        outlives the shell for it until its first sample joins.  A spin of
        300 ms, labelled in the tree's files, and one helper.  (Without the
        reservation, most runs lost the spin to a helper of its own.)"""
        r = run(["bash", "-c", '"%s" 300 & echo $!' % SPIN],
                self.env({"PYROSCOPE_LOG_LEVEL": "debug", "PYROSCOPE_SAMPLE_RATE": "100"}))
        self.assertEqual((r.rc, r.err), (0, b""))
        spin = int(r.out)
        text = helper_log(self, self.log)
        self.assertIn(spin, self.joined(), text[-3000:])
        self.assertEqual(self.helpers_started(), 1, text[-3000:])
        _, samples = self.samples_of("tree", "cpu.pb.gz", spin)
        # 30 expiries of 10 ms: +-5 is many standard deviations.
        self.assertAlmostEqual(sum(v[1] for v, _ in samples) / 1e9, 0.3, delta=0.05,
                               msg=text[-3000:])

    def test_forty_idle_fork_children_at_once_stay_in_the_tree(self):
        """40 fork children alive at once, each idle until its first wait
        (0.2 s and 50 ms more for each: a helper busy with the first one's
        symbols for half a second must not find the bell's 32 notices
        full): each holds an entry of the bell's `waits` meanwhile (256),
        and each joins the one helper at its first record.  (When the
        waiting children held the 32 notice slots, the eight beyond them
        made helpers of their own.)"""
        code = ("import os, time\n"
                "kids = []\n"
                "for i in range(40):\n"
                "    p = os.fork()\n"
                "    if p == 0:\n"
                "        time.sleep(0.2 + 0.05 * i)\n"
                "        os._exit(0)\n"
                "    kids.append(p)\n"
                "for p in kids: os.waitpid(p, 0)\n"
                "print(os.getpid(), *kids, flush=True)\n")
        r = self.python_waits(code)
        parent, *kids = map(int, r.out.split())
        text = helper_log(self, self.log)
        for p in kids:
            self.assertRegex(text, r"fork child %d of %d joined the tree" % (p, parent))
        self.assertNotIn("not taken", text)
        self.assertEqual(self.helpers_started(), 1, text[-3000:])

    def test_a_child_that_outlives_its_parent_by_seconds_keeps_its_helper(self):
        """The helper's watchdog (SIGALRM, flush timeout + 5 s, for a lock
        it copied from the leader) is armed for the leader's last pass; a
        helper that goes on for the leader's children must not keep it.  The
        leader ends at once; its child joins at its first wait (0.2 s) and
        ends 6.5 s later, past the alarm of a 0.1 s flush timeout: its
        waits are in the tree's files.  (The helper died at the alarm, and
        the child's profile with it.)"""
        code = ("import os, time\n"
                "p = os.fork()\n"
                "if p == 0:\n"
                "    time.sleep(0.2)\n"
                "    time.sleep(6.5)\n"
                "    os._exit(0)\n"
                "print(p, flush=True)\n")
        r = run(["python3", "-c", code], self.waits_env({"PYROSCOPE_FLUSH_TIMEOUT": "100ms"}))
        self.assertEqual((r.rc, r.err), (0, b""))
        child = int(r.out)
        text = helper_log(self, self.log)
        self.assertRegex(text, r"fork child %d of \d+ joined the tree" % child)
        _, samples = self.samples_of("tree", "block.pb.gz", child)
        self.assertGreaterEqual(sum(v[1] for v, _ in samples), 6 * 10 ** 9, text[-3000:])

    def test_a_fork_child_killed_before_its_first_record_keeps_no_helper(self):
        """A fork child that puts off joining and is killed before it
        records anything never frees its entry of the bell itself: the
        helper finds its pid gone and ends with the tree (within seconds,
        not when some later process reuses the slot)."""
        code = ("import os, signal, time\n"
                "p = os.fork()\n"
                "if p == 0:\n"
                "    while True: signal.pause()\n"
                "time.sleep(0.05)\n"
                "os.kill(p, signal.SIGKILL)\n"
                "os.waitpid(p, 0)\n"
                "print(p, flush=True)\n")
        r = self.python_waits(code)
        text = helper_log(self, self.log, timeout=10)
        self.assertNotRegex(text, r"(fork child|pid) %d\b" % int(r.out))
        self.assertEqual(self.helpers_started(), 1, text[-3000:])

    def test_a_fork_child_that_forks_then_execs_keeps_its_children_in_the_tree(self):
        """A fork child P that records nothing, forks G and then execs: G's
        notice names P and is taken with P's settings, so P's notice is not
        withdrawn at its exec (its new image joins only at its first
        record): P waits for the helper to take it.  G, which waits 0.2 s
        (its first record), is a session of the one helper.  Found by a
        reviewer: P's notice was withdrawn and G refused ("its parent is
        gone"), making a helper of its own."""
        code = ("import os, time\n"
                "p = os.fork()\n"
                "if p == 0:\n"
                "    g = os.fork()\n"
                "    if g == 0:\n"
                "        time.sleep(0.2)\n"
                "        os._exit(0)\n"
                "    print(os.getpid(), g, flush=True)\n"
                "    os.execv('/bin/true', ['true'])\n"
                "os.waitpid(p, 0)\n"
                "time.sleep(0.5)\n")
        r = self.python_waits(code)
        _, child = map(int, r.out.split())
        helper_log(self, self.log)
        text = self.log_text()
        # G names the parent its fork handler saw: P, or init (or another
        # subreaper) when P (its exec'd true) had ended before G ran at
        # all, on a busy machine.
        self.assertRegex(text, r"fork child %d of \d+ joined the tree" % child)
        self.assertNotIn("not taken", text)
        self.assertEqual(self.helpers_started(), 1, text[-3000:])
        self.assertIn(child, self.pids_of("tree", "block.pb.gz"), text[-3000:])

    def test_a_build_installed_in_place_is_named_from_its_own_symbols(self):
        """The helper keeps the symbol tables of the files its programs
        ran, for the next programs, keyed by what stat(2) says of the
        file.  A build written over another of the same size keeps the
        inode, and an installer that sets the mtime (tar, `cp -p`, a
        reproducible build) keeps that too: only the change time tells
        them apart.  Here the first build's functions are aaa_*, the
        second's bbb_*, and each program's samples must name its own."""
        src = os.path.join(self.tmp, "burn.c")
        with open(src, "w") as f:
            f.write("#include <time.h>\n"
                    "volatile unsigned long sink;\n"
                    "static double cpu_ms(void) { struct timespec t;\n"
                    "  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);\n"
                    "  return t.tv_sec * 1e3 + t.tv_nsec / 1e6; }\n"
                    "__attribute__((noinline)) void NAME(double ms) { double s = cpu_ms();\n"
                    "  while (cpu_ms() - s < ms) for (int i = 0; i < 1000; i++) sink += i; }\n"
                    "int main(void) { NAME(150); return 0; }\n")
        builds = []
        for name in ("aaa_burn", "bbb_burn"):
            builds.append(os.path.join(self.tmp, name))
            subprocess.run(["cc", "-O1", "-g", "-DNAME=" + name, src, "-o", builds[-1]],
                           check=True, timeout=120)
        self.assertEqual(os.path.getsize(builds[0]), os.path.getsize(builds[1]))
        prog = os.path.join(self.tmp, "prog")
        r = run(["sh", "-c", 'cp "$1" "$3"; touch -d @1700000000 "$3"; "$3"; '
                 'cat "$2" > "$3"; touch -d @1700000000 "$3"; "$3"',
                 "sh", builds[0], builds[1], prog], self.env({"PYROSCOPE_LOG_LEVEL": "debug"}))
        self.assertEqual((r.rc, r.out, r.err), (0, b"", b""))
        helper_log(self, self.log)
        named = {}
        for path in self.files_of("tree", "cpu.pb.gz"):
            for pid, samples in pprof_by_pid(path)[1].items():
                for _, frames in samples:
                    named.setdefault(pid, set()).update(
                        f for f in frames if f in ("aaa_burn", "bbb_burn"))
        self.assertEqual(sorted(tuple(sorted(v)) for v in named.values() if v),
                         [("aaa_burn",), ("bbb_burn",)], named)

    def test_a_shells_children_look_nothing_up_before_their_exec(self):
        """Between its fork and its exec, a shell's child makes no call of
        the shim's into the C library that the shell has not made: the
        first call of a function through the PLT looks it up, and in a
        fork child that pages in the loader's lookup (35 of the child's 120
        us, BENCHMARKS 14o); so does a first dlsym (the exec family, exit
        and _exit are looked up in the forking parent).  The loader's own
        log of its bindings says who looked what up: a fork child writes
        in its parent's file, each line with its own pid, and its exec'd
        image in a file of its own.  A child sampled before its exec joins
        the tree there, which takes calls of their own: left out (at 100
        Hz, about one child in twenty)."""
        r, bound, children = self.shell_loop_bindings({})
        # But for those that joined.
        children -= set(self.joined())
        self.assertGreaterEqual(len(children), 5, self.log_text())
        self.assertEqual([(pid, sym) for pid, sym in bound if pid in children], [])

    def shell_loop_bindings(self, env):
        """bash running /bin/true 10 times under the shim with env, the
        loader logging its bindings: the run, the (pid, symbol) of each
        binding the shim's library asked for, and the pids of the children
        that exec'd (the helper, which does not, looks up its own, once)."""
        debug = os.path.join(self.tmp, "ld")
        r = run(["bash", "-c", "for i in {1..10}; do /bin/true; done; exit 3"],
                self.env(dict(env, LD_DEBUG="bindings", LD_DEBUG_OUTPUT=debug)))
        self.assertEqual((r.rc, r.out, r.err), (3, b"", b""))
        with open("%s.%d" % (debug, r.pid)) as f:
            bound = [(int(pid), sym) for pid, obj, sym in
                     re.findall(r"^\s*(\d+):\s+binding file (\S+) .* normal symbol `(\w+)'",
                                f.read(), re.M)
                     if obj.endswith("libpyroshim.so")]
        children = {int(f.rsplit(".", 1)[1]) for f in os.listdir(self.tmp)
                    if f.startswith("ld.")} - {r.pid}
        self.assertEqual(len(children), 10, os.listdir(self.tmp))
        return r, bound, children

    def test_a_disabled_shims_shell_children_look_nothing_up_before_their_exec(self):
        """The same with PYROSCOPE_ENABLED=false: the hooks are there, and
        each child's execve looked the C library's up with dlsym (11 page
        faults a child, BENCHMARKS 14y), since the shell never calls it
        itself.  A process the shim does not profile looks them up in its
        fork prepare handler, once."""
        r, bound, children = self.shell_loop_bindings({"PYROSCOPE_ENABLED": "false"})
        self.assertEqual([(pid, sym) for pid, sym in bound if pid in children], [])
        # The parent did look them up, so the log can show a lookup.
        self.assertIn((r.pid, "execve"), bound)

    @unittest.skipUnless(subprocess.run(["unshare", "-Urp", "true"], stderr=subprocess.DEVNULL)
                         .returncode == 0, "no pid namespace for this user")
    def test_children_in_a_pid_namespace_of_their_own_keep_no_helper(self):
        """unshare -p without -f: its command stays in the tree's pid
        namespace, and its children are born in the new one, where their
        pids are not the ones the helper sees.  They are out of the tree
        (they make helpers of their own if they record), so nothing of
        theirs holds the tree's helper, which ends with the tree.  Here
        the subshell, pid 2 there, is killed when pid 1 (sleep 0.2) ends
        the namespace, before its first record: with its own pid written
        in the bell, the helper waited for pid 2 of its own namespace,
        kthreadd, for ever."""
        r = run(["bash", "-c", 'unshare -Urp bash -c "sleep 0.2 & (sleep 1; true); true"; true'],
                self.env({"PYROSCOPE_LOG_LEVEL": "debug"}), timeout=60)
        self.assertEqual((r.rc, r.out), (0, b""))
        # bash says so of the subshell, with or without the shim.
        self.assertRegex(r.err, rb"^(bash: line 1: +\d+ Killed +\( sleep 1; true \)\n)?$")
        helper_log(self, self.log, timeout=20)

    def test_a_program_opens_the_numbers_it_opens_without_the_shim(self):
        """An exec'd program of a tree makes no table before its first
        record, and hands their descriptors to the helper then, keeping
        none: its own open(2) gets the number it gets without the shim,
        and it sees the descriptors open that it sees without the shim.  (No log file here: the shim's log
        file is a descriptor of its own.)"""
        code = ("import os\n"
                "print(os.open('/dev/null', os.O_RDONLY), sorted(os.listdir('/proc/self/fd')))\n")
        env = self.env({"CODE": code})
        del env["PYROSCOPE_LOG_FILE"], env["PYROSCOPE_LOG_LEVEL"]
        base = run(["bash", "-c", 'python3 -c "$CODE"'], clean_env({"CODE": code}, preload=False))
        r = run(["bash", "-c", 'printenv PYROSHIM_HELPER >&2; python3 -c "$CODE"'], env)
        self.assertEqual((base.rc, r.rc), (0, 0))
        self.assertRegex(r.err, rb"^pyroshim-\d+-[0-9a-f]{16}-\d+-\d+\n$")
        self.assertEqual(r.out, base.out)

    def test_a_fork_child_of_a_program_just_exec_d_is_taken_with_it(self):
        """forker forks after 4 ms of CPU, and its child ends 8 ms of CPU
        later with samples recorded (1000 Hz), often before its parent's
        own notice is due (20 ms after its exec).  The child joins at its
        first sample with settings of its own, which need no session of its
        parent's: it is a session of the tree's one helper, labelled in the
        one set of files, and nothing is refused.  (When a fork child's
        notice took its parent's settings, one run in three refused it
        until the parent's notice was taken with it.)"""
        r = run(["bash", "-c", '"%s" 8; true' % os.path.join(PROG, "forker")],
                self.env({"PYROSCOPE_SAMPLE_RATE": "1000", "PYROSCOPE_LOG_LEVEL": "debug"}))
        self.assertEqual(r.rc, 0)
        self.assert_a_session_of_the_one_helper(int(r.out))

    def test_a_child_outlives_a_parent_that_ends_at_once(self):
        """The tree's leader forks a child that computes 300 ms, and ends
        5 ms later, maybe before the child's first sample: the child's entry
        of the bell's `waits` keeps the helper for it, the child joins
        at its first sample, and the tree's one helper serves it to its end
        (run() returns once the child closed its stdout) and labels it in
        the leader's files.  Once, the child was refused (its parent gone)
        and made a helper of its own."""
        code = ("import os, time\n"
                "pid = os.fork()\n"
                "if pid == 0:\n"
                "    t = time.process_time()\n"
                "    while time.process_time() - t < 0.3:\n"
                "        pass\n"
                "    os._exit(0)\n"
                "print(pid, flush=True)\n"
                "time.sleep(0.005)\n"
                "os._exit(0)\n")
        r = run(["python3", "-c", code], self.env({"PYROSCOPE_LOG_LEVEL": "debug",
                                                   "PYROSCOPE_SAMPLE_RATE": "100"}))
        self.assertEqual((r.rc, r.err), (0, b""))
        self.assert_a_session_of_the_one_helper(int(r.out))

    def test_the_pool_idiom_keeps_every_worker(self):
        """multiprocessing.Pool, as Python's documentation shows it: leaving
        the block SIGTERMs the workers.  With allocation profiling off, a
        worker's first record is its first CPU sample, which joins it: it
        is drained like any death after that, and one killed before it
        had nothing to lose.  Truth: wait4's
        rusage of python, whose workers it reaps.  2 workers burn 4 x
        0.4 s at 100 Hz: 160 expiries; 15 % is many standard deviations
        (test_cpu's argument) and far less than one lost worker (25 %).
        The files are read twice: when python returns, unless the info log
        says its last pass came after its flush timeout (a cold cache on a
        loaded machine), and when the helper has ended."""
        code = ("import multiprocessing, time\n"
                "def burn(n):\n"
                "    t = time.process_time()\n"
                "    while time.process_time() - t < 0.4:\n"
                "        pass\n"
                "    return n\n"
                "if __name__ == '__main__':\n"
                "    multiprocessing.set_start_method('fork')\n"
                "    with multiprocessing.Pool(2) as p:\n"
                "        p.map(burn, range(4), chunksize=1)\n")
        r = run(["python3", "-c", code], self.env({"PYROSCOPE_SAMPLE_RATE": "100",
                                                    "PYROSCOPE_LOG_LEVEL": "debug"}))
        self.assertEqual((r.rc, r.out, r.err), (0, b"", b""))
        at_exit, _ = self.cpu_seconds()
        log = helper_log(self, self.log)
        if not re.search(r"pid %d's last pass \(exit\) ended \d+ ms after it stopped waiting"
                         % r.pid, log):
            self.assertLess(abs(at_exit / r.cpu - 1), 0.15, "at python's exit, profiles "
                            "%.3f s of %.3f s: %s" % (at_exit, r.cpu, log[-3000:]))
        got, _ = self.cpu_seconds()
        self.assertLess(abs(got / r.cpu - 1), 0.15, "profiles %.3f s of %.3f s (%s): %s"
                        % (got, r.cpu, self.files(), log[-3000:]))
        self.assertEqual(self.helpers_started(), 1, log)

    def test_a_leader_that_stops_waiting_is_told_of_and_its_files_come_later(self):
        """The leader waits for its tree's last pass at most its flush
        timeout (100 ms here).  Its helper, stopped by the program itself
        for three seconds, writes the files after the program's end: the
        info log names the pass that came after its program stopped
        waiting, and the files hold the program's CPU (0.3 s at 100 Hz: 30
        expiries; the same tolerance as the pool's)."""
        code = ("import os, signal, subprocess, time\n"
                "t = time.process_time()\n"
                "while time.process_time() - t < 0.3:\n"
                "    pass\n"
                # The tree's whole name, as a child gets it: the leader's
                # own environment has only the socket's part.
                "name = subprocess.run(['printenv', 'PYROSHIM_HELPER'], check=True,\n"
                "                      capture_output=True, text=True).stdout\n"
                "helper = int(name.split('-')[3])\n"
                "env = {k: v for k, v in os.environ.items() if k != 'LD_PRELOAD'}\n"
                "subprocess.Popen(['sh', '-c', 'sleep 3; kill -CONT %d' % helper], env=env,\n"
                "                 start_new_session=True)\n"
                "os.kill(helper, signal.SIGSTOP)\n")
        r = run(["python3", "-c", code], self.env({"PYROSCOPE_SAMPLE_RATE": "100",
                                                    "PYROSCOPE_FLUSH_TIMEOUT": "100ms",
                                                    "PYROSCOPE_LOG_LEVEL": "debug"}))
        self.assertEqual((r.rc, r.out, r.err), (0, b"", b""))
        at_exit = self.files()
        log = helper_log(self, self.log)
        self.assertRegex(log, r"info: uploader: pid %d's last pass \(exit\) ended \d+ ms after "
                         r"it stopped waiting \(PYROSCOPE_FLUSH_TIMEOUT\): its files were "
                         r"written after its exit" % r.pid)
        self.assertEqual(at_exit, [], "the files were there before the helper could write them")
        got, _ = self.cpu_seconds()
        self.assertLess(abs(got / r.cpu - 1), 0.15, "profiles %.3f s of %.3f s: %s"
                        % (got, r.cpu, log[-3000:]))

    def spins_and_seds(self, extra=None):
        """A shell loop of 4 spin (30 ms) and 3 sed, each program named
        after itself, every allocation sampled so that each sed records
        some."""
        env = self.env(dict({"PYROSCOPE_SAMPLE_RATE": "100",
                             "PYROSCOPE_PROFILING_ALLOC_ENABLED": "true",
                             "PYROSCOPE_ALLOC_SAMPLE_BYTES": "1"}, **(extra or {})))
        del env["PYROSCOPE_APPLICATION_NAME"]
        r = run(["bash", "-c", 'for i in 1 2 3 4; do "%s" 30; done; '
                 'for i in 1 2 3; do echo x | sed s/x/y/; done' % SPIN], env)
        self.assertEqual((r.rc, r.out, r.err), (0, b"y\n" * 3, b""))
        return r

    def test_a_tree_writes_one_set_of_files_per_program_name(self):
        """Part 4: a shell loop of 4 spin and 3 sed, each program named
        after itself (no PYROSCOPE_APPLICATION_NAME), every allocation
        sampled so that each sed records some.  The files are one set per
        name, all named after the shell, the tree's leader; each sample
        has its process's numeric pid label, so the labels are exactly
        the processes that ran, and `-tagfocus pid=N` gives one process:
        together they are the whole file."""
        r = self.spins_and_seds()
        names = {tuple(f.split(".")[:2]) for f in self.files()}
        self.assertEqual(names, {(n, str(r.pid)) for n in ("bash", "spin", "sed")}, self.files())
        spins, seds = self.pids_of("spin", "cpu.pb.gz"), self.pids_of("sed", "alloc.pb.gz")
        self.assertEqual((len(spins), len(seds)), (4, 3), (spins, seds))
        # The images that joined; the shell's fork children that joined
        # (each pipeline's `echo x`, its allocations sampled) are in the
        # shell's files.
        joined = set(self.joined())
        self.assertEqual(spins | seds, joined & self.exec_d())
        self.assertLessEqual(joined - spins - seds, self.pids_of("bash", "alloc.pb.gz"))
        path = self.profile("spin", r.pid, "cpu.pb.gz")
        _, every = pprof_raw(path)
        each = [sum(v[1] for v, _ in pprof_raw(path, pid)[1]) for pid in spins]
        self.assertTrue(all(t >= 2 * 10 ** 7 for t in each), each)   # 30 ms: 3 expiries
        self.assertEqual(sum(each), sum(v[1] for v, _ in every))

    def test_a_tree_uploads_one_series_per_program_name(self):
        """Part 4, uploads: the same loop with a server.  Each program name
        sends one request per family and interval (one interval here: it
        is a minute) holding every process of that name, each sample with
        its pid and its own span_id; the series' tags are the tree's:
        trace_id, and root_span_id the leader's span (the shell's).  The
        sed processes ended before the upload: their live heap is gone,
        so the in-use values are zero and the allocations are not."""
        if not have_go():
            self.skipTest("go tool pprof not installed")
        peer = Peer(self.tmp)
        try:
            r = self.spins_and_seds({"PYROSCOPE_SERVER_ADDRESS": peer.url,
                                     "PYROSCOPE_UPLOAD_INTERVAL": "60s",
                                     "PYROSCOPE_TRACE_CORRELATION": "true"})
            spans = {int(p): (t, s) for p, t, s in re.findall(
                r"pyroshim\[(\d+)\]: info: trace_id (\w+), root span_id (\w+)", self.log_text())}
            trace, root = spans[r.pid]
            by_name = {}
            for rec in peer.ingest():
                m = re.match(r"^(\w+)\{(.*)\}$", rec["query"]["name"])
                self.assertIsNotNone(m, rec["query"]["name"])
                tags = dict(t.split("=", 1) for t in m.group(2).split(","))
                self.assertEqual((tags["trace_id"], tags["root_span_id"]), (trace, root), tags)
                by_name.setdefault((m.group(1), rec["units"]), []).append(rec)
        finally:
            peer.stop()
        joined = set(self.joined())
        for key, recs in by_name.items():
            self.assertEqual(len(recs), 1, "%s: one request per family and interval" % (key,))
        print(sorted(by_name), self.log_text()[-6000:]) if ("spin", "samples") not in by_name else None
        (spin,) = by_name[("spin", "samples")]
        (sed,) = by_name[("sed", "bytes")]
        _, spin_pids = pprof_by_pid(spin["payload"])
        _, sed_pids = pprof_by_pid(sed["payload"])
        self.assertEqual(len(spin_pids), 4, spin_pids.keys())
        self.assertEqual(len(sed_pids), 3, sed_pids.keys())
        self.assertEqual(set(spin_pids) | set(sed_pids), joined & self.exec_d())
        (shell,) = by_name[("bash", "bytes")]
        self.assertLessEqual(joined - set(spin_pids) - set(sed_pids),
                             set(pprof_by_pid(shell["payload"])[1]))
        for path, pids in ((spin["payload"], spin_pids), (sed["payload"], sed_pids)):
            for pid in pids:
                # (Weighted by in-use space for sed: no percentages.)
                self.assertEqual(set(pprof_tags(path, pid)["span_id"]), {spans[pid][1]})
        # sed's values: alloc_objects, alloc_space, inuse_objects, inuse_space.
        totals = [sum(v[k] for samples in sed_pids.values() for v, _ in samples)
                  for k in range(4)]
        self.assertGreater(totals[1], 0)
        self.assertEqual(totals[2:], [0, 0])

    def test_a_leader_that_ended_is_uploaded_no_more(self):
        """The leader (python, with a live heap of 50 MB when it exits:
        _exit frees nothing) forks and ends 0.3 s later; its fork child, of the same name, burns
        1.2 s, uploaded every 300 ms in the same series.  The leader's
        last interval goes with one upload, with no live heap (its image
        is gone): no later interval holds any of its samples.  Found by
        review: the leader's state stayed a member of its group, and its
        final live heap was sent again at every interval."""
        if not have_go():
            self.skipTest("go tool pprof not installed")
        code = ("import os, time\n"
                "heap = bytearray(50 << 20)\n"
                "if os.fork() == 0:\n"
                "    t = time.process_time()\n"
                "    while time.process_time() - t < 1.2:\n"
                "        pass\n"
                "else:\n"
                "    time.sleep(0.3)\n"
                "    os._exit(0)\n")
        peer = Peer(self.tmp)
        try:
            r = run(["python3", "-c", code],
                    self.env({"PYROSCOPE_SERVER_ADDRESS": peer.url,
                              "PYROSCOPE_UPLOAD_INTERVAL": "300ms", "PYROSCOPE_LOG_LEVEL": "debug",
                              "PYROSCOPE_PROFILING_ALLOC_ENABLED": "true"}))
            self.assertEqual((r.rc, r.out, r.err), (0, b"", b""))
            # The helper ends after the child: its last flush is in then.
            helper_log(self, self.log)
            recs = sorted(peer.ingest(), key=lambda x: x["from_ns"])
        finally:
            peer.stop()
        self.assertEqual(self.helpers_started(), 1, self.log_text()[-3000:])
        cpu = [x for x in recs if x["units"] == "samples"]
        self.assertGreaterEqual(len(cpu), 3, "too few intervals after the leader's end to tell")
        with_leader = [x["from_ns"] for x in recs if r.pid in pprof_by_pid(x["payload"])[1]]
        # However long it lived (one interval or five, on a busy machine),
        # no upload after the one that took its last interval holds it:
        # the child's later ones do not.
        self.assertGreaterEqual(len(with_leader), 1)
        later = [x for x in cpu if x["from_ns"] > max(with_leader)]
        self.assertGreaterEqual(len(later), 2, (with_leader, [x["from_ns"] for x in cpu]))

    def test_a_reused_descriptor_is_never_written(self):
        """A fork child announces its tables by descriptor number; after an
        exec that number may name another file (here cat's input, opened
        where the shim's were).  The helper checks that it is the memfd
        announced before it maps it: the file is never written."""
        victim = os.path.join(self.tmp, "victim")
        with open(SPIN, "rb") as f:
            data = f.read()
        with open(victim, "wb") as f:
            f.write(data)
        r = run(["bash", "-c", 'for i in {1..100}; do cat "%s" > /dev/null; "%s" 1; done'
                 % (victim, SPIN)], self.env({"PYROSCOPE_SAMPLE_RATE": "1000"}), timeout=300)
        self.assertEqual((r.rc, r.out, r.err), (0, b"", b""))
        with open(victim, "rb") as f:
            self.assertEqual(f.read(), data)

    CLOSER = ("import os, time\n"
              "pid = os.fork()\n"
              "if pid == 0:\n"
              "    os.closerange(3, 4096)\n"
              "    t = time.process_time()\n"
              "    while time.process_time() - t < 0.3:\n"
              "        pass\n"
              "    os._exit(0)\n"
              "os.waitpid(pid, 0)\n"
              "print(pid)\n")

    def test_a_child_that_closes_every_descriptor_joins_at_its_first_sample(self):
        """A fork child that closes every descriptor at once (a daemon's
        habit) holds none of the shim's then: it puts off joining until
        its first record (ps_worker_child), and makes and hands over its
        tables at its first sample.  It is a session of the tree's one
        helper, and its 300 ms are in the tree's profile under its pid
        (30 expiries of 10 ms: +-5 is many standard deviations)."""
        r = run(["python3", "-c", self.CLOSER], self.env({"PYROSCOPE_SAMPLE_RATE": "100",
                                                          "PYROSCOPE_LOG_LEVEL": "debug"}))
        self.assertEqual((r.rc, r.err), (0, b""))
        child = int(r.out)
        self.assert_a_session_of_the_one_helper(child)
        _, samples = self.samples_of("tree", "cpu.pb.gz", child)
        got = sum(v[1] for v, _ in samples)
        self.assertAlmostEqual(got / 1e9, 0.3, delta=0.05, msg=self.log_text()[-2000:])

    def test_a_child_announced_at_fork_that_closes_every_descriptor_falls_back(self):
        """A program with a span to send over OTLP announces its fork
        children at their fork (ps_worker_defer): their notice names
        memfds open in them.  One that closes every descriptor takes them
        with it: the helper cannot open them, refuses the notice (and says
        so in the info log), and the child makes a helper of its own at its
        end.  Its 300 ms are in its profile all the same."""
        peer = Peer(self.tmp)
        try:
            r = run(["python3", "-c", self.CLOSER], self.env({
                "PYROSCOPE_SAMPLE_RATE": "100", "PYROSCOPE_LOG_LEVEL": "debug",
                "PYROSCOPE_TRACE_CORRELATION": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": peer.url}))
        finally:
            peer.stop()
        self.assertEqual((r.rc, r.err), (0, b""))
        child = int(r.out)
        got = 0
        for f in self.files():
            if f.endswith(".cpu.folded") and f.split(".")[-3] == str(child):
                got += sum(read_folded(os.path.join(self.out, f)).values())
        self.assertAlmostEqual(got / 1e9, 0.3, delta=0.05, msg=self.log_text()[-2000:])
        self.assertEqual(self.helpers_started(), 1)
        self.assertNotRegex(self.log_text(), r"fork child %d of \d+ joined" % child)
        # Not silent: the child cannot say it in _exit; the helper does.
        self.assertRegex(self.log_text(), r"info: uploader: fork child %d of \d+ not taken "
                         r"\(its tables are not the memfds it announced\)" % child)

    def test_a_shells_failed_execs_along_path(self):
        """dash tries execve in each directory of PATH: its child (a
        subshell that execs: a real fork, and dash tries each directory)
        withdraws its notice at the first attempt (nothing recorded), and
        the next ones find it outside the tree, with no uploader until one
        is due.
        (Found by test_pyrorun: the second attempt crashed the child.)"""
        script = ('PATH=/nonexistent/a:/nonexistent/b:$PATH; '
                  'for i in 1 2 3 4 5 6 7 8; do (exec env "%s" 20); done; echo done' % SPIN)
        # With CPU off (block profiling on, so the shim runs) a child has
        # recorded nothing when it execs: it withdraws its notice at its
        # first attempt.  With CPU on, most have something by then.
        for cpu in ("false", "true"):
            r = run(["sh", "-c", script], self.env({"PYROSCOPE_PROFILING_CPU_ENABLED": cpu,
                                                    "PYROSCOPE_PROFILING_BLOCK_ENABLED": "true"}))
            self.assertEqual((r.rc, r.out, r.err), (0, b"done\n", b""), cpu)

    def test_an_exec_chain_stays_in_the_tree(self):
        """sh joins, then execs env, which execs spin: each image is a
        session of its own, and the one before ends with its exec."""
        r = run(["sh", "-c", 'exec env "%s" 200' % SPIN], self.env())
        self.assertEqual((r.rc, r.out, r.err), (0, b"", b""))
        self.assertEqual(self.helpers_started(), 1, self.log_text())
        self.assertNotIn("not taken", self.log_text())
        got, pids = self.cpu_seconds()
        self.assertLess(abs(got / r.cpu - 1), 0.15, "profiles %.3f s of %.3f s" % (got, r.cpu))
        # Named from the files each image mapped, read from /proc/PID/maps
        # (the helper is no copy of them), the vDSO included: spin reads
        # the clock through it all the time.
        stacks = {}
        for f in self.files():
            if f.endswith(".cpu.folded"):
                stacks.update(read_folded(os.path.join(self.out, f)))
        self.assertTrue(any(s.endswith(";burn") for s in stacks), stacks)
        # (env and dash are stripped: the expiries added at their exec,
        # under their entry point, show as env+0x..., as without a tree.)
        self.assertEqual([s for s in stacks if "[unknown]" in s or "vdso" in s], [])

    def test_a_scrubbed_environment_makes_a_helper_of_its_own(self):
        """env -i drops PYROSHIM_HELPER: the child cannot know of the tree
        and leads one of its own; nothing is lost."""
        inner = 'env -i LD_PRELOAD=%s PYROSCOPE_OUTPUT_DIR=%s PYROSCOPE_LOG_LEVEL=info ' \
                'PYROSCOPE_LOG_FILE=%s PYROSCOPE_APPLICATION_NAME=tree "%s" 300' % (
                    SHIM, self.out, os.path.join(self.tmp, "log"), SPIN)
        r = run(["bash", "-c", inner + '; "%s" 100' % SPIN], self.env())
        self.assertEqual((r.rc, r.out, r.err), (0, b"", b""))
        self.assertEqual(self.helpers_started(), 2, self.log_text())
        got, _ = self.cpu_seconds()
        self.assertLess(abs(got / r.cpu - 1), 0.15, "profiles %.3f s of %.3f s" % (got, r.cpu))

    def test_an_unreachable_helper_is_said_and_replaced(self):
        """A helper that is gone: the program says so in the info log,
        makes its own, and is profiled as well as ever; stderr is silent."""
        gone = "pyroshim-1-0123456789abcdef-4194304-3"   # above any pid_max
        r = run([SPIN, "200"], self.env({"PYROSHIM_HELPER": gone}))
        self.assertEqual((r.rc, r.out, r.err), (0, b"", b""))
        text = self.log_text()
        self.assertIn("the tree's helper %s cannot be used "
                      "(it is gone, or in another network namespace)" % gone, text)
        self.assertEqual(self.helpers_started(), 1)
        got, _ = self.cpu_seconds()
        self.assertLess(abs(got / r.cpu - 1), 0.15, "profiles %.3f s of %.3f s" % (got, r.cpu))

    def test_a_malformed_helper_name_is_one_configuration_line(self):
        r = run([SPIN, "20"], clean_env({"PYROSCOPE_OUTPUT_DIR": self.out,
                                         "PYROSHIM_HELPER": "../etc/passwd"}))
        self.assertEqual((r.rc, r.out), (0, b""))
        self.assertEqual(r.err, b"pyroshim: PYROSHIM_HELPER=../etc/passwd: not a helper's "
                                b"name; starting a helper of its own\n")

    def listener(self, name, user=None):
        """A process that listens on `name` and never answers, as `user`."""
        code = ("import socket, sys, time\n"
                "s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
                "s.bind('\\0' + sys.argv[1]); s.listen(4); print('ok', flush=True)\n"
                "time.sleep(60)\n")
        p = subprocess.Popen(["python3", "-c", code, name], stdout=subprocess.PIPE,
                             preexec_fn=(lambda: os.setuid(user)) if user else None)
        self.addCleanup(p.wait)
        self.addCleanup(p.kill)
        self.assertEqual(p.stdout.readline(), b"ok\n")
        return p

    def test_a_helper_that_never_answers_costs_at_most_a_second(self):
        name = "pyroshim-1-%016x" % int.from_bytes(os.urandom(8), "big")
        self.listener(name)
        t0 = time.monotonic()
        r = run([SPIN, "50"], self.env({"PYROSHIM_HELPER": name + "-4194304-3"}))
        waited = time.monotonic() - t0
        self.assertEqual((r.rc, r.out, r.err), (0, b"", b""))
        self.assertIn("did not answer within a second", self.log_text())
        self.assertLess(waited, 10)
        got, _ = self.cpu_seconds()
        self.assertGreater(got, 0)

    def test_another_users_socket_is_never_joined(self):
        if os.getuid() != 0:
            self.skipTest("needs root to listen as another user")
        name = "pyroshim-1-%016x" % int.from_bytes(os.urandom(8), "big")
        self.listener(name, user=65534)
        r = run([SPIN, "50"], self.env({"PYROSHIM_HELPER": name + "-4194304-3"}))
        self.assertEqual((r.rc, r.out, r.err), (0, b"", b""))
        self.assertIn("cannot be used (it belongs to another user)", self.log_text())
        got, _ = self.cpu_seconds()
        self.assertGreater(got, 0)

    def test_a_fork_child_that_gives_up_root_is_profiled_by_the_trees_helper(self):
        """A server's workers (gunicorn --user, nginx, php-fpm): forked as
        root, then setuid to another user before their first record.  The
        helper refused their tables (another user's), the worker took the
        hand-over for a join, and all it recorded was lost.  Its tables
        are taken now (with its parent's settings, not its own: another
        user's program decides no file of root's).  About 300 ms at 100
        Hz: within 40 %, over five standard deviations."""
        if os.getuid() != 0:
            self.skipTest("needs root to give it up")
        script = ("import os\n"
                  "pid = os.fork()\n"
                  "if pid == 0:\n"
                  "    os.setgroups([]); os.setgid(65534); os.setuid(65534)\n"
                  "    s = 0\n"
                  "    for i in range(5 * 10**6): s += i\n"
                  "    os._exit(0)\n"
                  "_, status, ru = os.wait4(pid, 0)\n"
                  "print(pid, ru.ru_utime + ru.ru_stime, status)\n")
        r = run([sys.executable, "-c", script], self.env({"PYROSCOPE_LOG_LEVEL": "debug"}))
        self.assertEqual((r.rc, r.err), (0, b""))
        child, cpu, status = r.out.split()
        self.assertEqual(status, b"0")
        helper_log(self, self.log)
        types, samples = self.samples_of("tree", "cpu.pb.gz", int(child))
        got = sum(v[types.index("cpu")] for v, _ in samples) / 1e9 if samples else 0
        self.assertLess(abs(got / float(cpu) - 1), 0.4,
                        "%.3f s of %s s: %s" % (got, cpu, self.log_text()[-3000:]))

    @unittest.skipUnless(os.path.exists("/usr/bin/python3"), "no /usr/bin/python3")
    def test_idle_connections_of_another_user_keep_no_program_out(self):
        """Any user can connect to a tree's socket (its name is in
        /proc/net/unix).  Once hand-overs came from other users too (a
        fork child that gave up root), 70 idle connections of another
        user held the accepting thread a second each and filled its
        backlog: every program of the tree made a helper of its own.  A
        process of another user is heard only if it holds a notice in the
        bell now."""
        if os.getuid() != 0:
            self.skipTest("needs root to connect as another user")
        hog = ("import socket, sys, time\n"
               "held, end = [], time.time() + 6\n"
               "while time.time() < end:\n"
               "    for l in open('/proc/net/unix'):\n"
               "        f = l.split()\n"
               "        if len(f) >= 8 and f[-1].startswith('@pyroshim-') and len(held) < 70:\n"
               "            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
               "            try:\n"
               "                s.connect('\\0' + f[-1][1:])\n"
               "                held.append(s)\n"
               "            except OSError:\n"
               "                s.close()\n"
               "    time.sleep(0.02)\n")

        def nobody():
            os.setgid(65534)
            os.setuid(65534)

        # The system's python3: this one's may be in a directory of root's.
        h = subprocess.Popen(["/usr/bin/python3", "-c", hog], env=clean_env(preload=False),
                             preexec_fn=nobody, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        try:
            r = run(["sh", "-c", 'sleep 1.5; for i in $(seq 10); do "%s" 30; done' % SPIN],
                    self.env({"PYROSCOPE_LOG_LEVEL": "debug"}))
        finally:
            h.kill()
            h.wait()
        self.assertEqual((r.rc, r.out, r.err), (0, b"", b""))
        helper_log(self, self.log)
        text = self.log_text()
        self.assertEqual(self.helpers_started(), 1, text[-3000:])
        # The ten spins; seq or sleep too, when sampled.
        self.assertGreaterEqual(len(re.findall(r"pid \d+ joined the tree", text)), 10, text[-3000:])
        self.assertNotIn("of its own", text)

    @unittest.skipUnless(shutil.which("setpriv"), "no setpriv (util-linux)")
    def test_a_program_run_as_another_user_in_the_tree_prints_nothing(self):
        """setpriv, gosu, sudo -E in a profiled tree: the program runs as
        another user, cannot join the tree's helper (another user's) and
        cannot write the tree's log or directory (0700, root's).  That is
        no mistake of its configuration: nothing on its stderr, which
        took two pyroshim lines before, and its log lines, which went
        there."""
        if os.getuid() != 0:
            self.skipTest("needs root to run a program as another user")
        r = run(["bash", "-c", 'setpriv --reuid=65534 --regid=65534 --clear-groups '
                 '"$1" -c "print(sum(range(10**6)))"', "bash", sys.executable],
                self.env({"PYROSCOPE_LOG_LEVEL": "debug"}), cwd="/")
        self.assertEqual((r.rc, r.out, r.err), (0, b"499999500000\n", b""))

    def test_a_subreaper_leaves_no_zombie_helper_of_its_children(self):
        """A program that is a child subreaper (or a container's init)
        profiles in a thread: a helper of its own would be its child.  The
        helpers of the programs below it come back to it once their own
        parent is gone; one that waits for its children by their pids
        (Python's subprocess) never reaped them: 20 subprocesses, 20
        zombies for good.  Its thread reaps them now, within a second."""
        script = ("import os, subprocess, time\n"
                  "for i in range(20):\n"
                  "    subprocess.run(['/bin/true'])\n"
                  "time.sleep(2.5)\n"
                  "z = 0\n"
                  "for t in os.listdir('/proc/self/task'):\n"
                  "    for c in open('/proc/self/task/%s/children' % t).read().split():\n"
                  "        try:\n"
                  "            z += ') Z ' in open('/proc/%s/stat' % c).read()\n"
                  "        except OSError:\n"
                  "            pass\n"
                  "print('zombies', z)\n")
        # The subreaper is the preloaded program from its start: made so
        # before its exec, by a wrapper without the shim.
        wrapper = ("import ctypes, os, sys\n"
                   "ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)\n"   # PR_SET_CHILD_SUBREAPER
                   "os.execve(sys.executable, [sys.executable, '-c', sys.argv[1]],\n"
                   "          dict(os.environ, LD_PRELOAD=sys.argv[2]))\n")
        env = self.env({"PYROSCOPE_LOG_LEVEL": "debug"})
        del env["LD_PRELOAD"]
        r = run([sys.executable, "-c", wrapper, script, SHIM], env)
        self.assertEqual((r.rc, r.out, r.err), (0, b"zombies 0\n", b""), self.log_text()[-2000:])
        self.assertIn("a child subreaper or pid 1", self.log_text())

    def test_another_users_bell_is_never_mapped(self):
        """A root program given a user's PYROSHIM_HELPER (sudo -E, su) must
        not map that user's bell, which the user may write (it would wait
        on it at its end, and lose its profile to a helper that refuses
        it): it says why, and makes a helper of its own."""
        if os.getuid() != 0:
            self.skipTest("needs root to run a tree as another user")
        lib = os.path.join(self.tmp, "libpyroshim.so")
        shutil.copy(SHIM, lib)
        os.chmod(self.tmp, 0o755)
        out = os.path.join(self.tmp, "nobody")
        os.mkdir(out)
        os.chmod(out, 0o777)

        def nobody():
            os.setgid(65534)
            os.setuid(65534)

        # The tree's whole name, as a child gets it (the leader's own
        # environment has it without the helper's part, which it has only
        # from its first child on).
        p = subprocess.Popen(["bash", "-c", 'printenv PYROSHIM_HELPER; exec sleep 30'],
                             env=clean_env({"LD_PRELOAD": lib, "PYROSCOPE_OUTPUT_DIR": out},
                                           preload=False),
                             stdout=subprocess.PIPE, preexec_fn=nobody, cwd="/")
        self.addCleanup(p.wait)
        self.addCleanup(p.kill)
        name = p.stdout.readline().decode().strip()
        self.assertRegex(name, r"^pyroshim-\d+-[0-9a-f]{16}-\d+-\d+$")
        r = run([SPIN, "100"], self.env({"PYROSHIM_HELPER": name, "PYROSCOPE_LOG_LEVEL": "debug"}))
        self.assertEqual((r.rc, r.out, r.err), (0, b"", b""))
        text = self.log_text()
        self.assertIn("not announced to the tree's helper (its bell belongs to another user)",
                      text)
        self.assertIn("cannot be used (it belongs to another user)", text)
        self.assertEqual(self.helpers_started(), 1, text[-3000:])
        got, _ = self.cpu_seconds()
        self.assertGreater(got, 0)

    def test_a_bell_cannot_be_shrunk_under_the_tree(self):
        """Every program of a tree maps its bell, a memfd: a process of the
        same user that truncated it through /proc (a bug, or on purpose)
        killed the leader with SIGBUS at its next fork.  It is sealed at
        its size: the truncation is refused, and the tree goes on."""
        code = ("import os\n"
                "h = os.environ['PYROSHIM_HELPER'].split('-')\n"
                "fd = os.open('/proc/%s/fd/%s' % (h[3], h[4]), os.O_RDWR)\n"
                "try:\n"
                "    os.ftruncate(fd, 0)\n"
                "    print('shrunk', flush=True)\n"
                "except PermissionError:\n"
                "    print('refused', flush=True)\n")
        r = run(["bash", "-c", 'env -u LD_PRELOAD python3 -c "$CODE"; /bin/true; /bin/true; '
                 'echo ok'], self.env({"CODE": code}))
        self.assertEqual((r.rc, r.out, r.err), (0, b"refused\nok\n", b""))

    def test_two_trees_at_once(self):
        """Two loops at the same time: two helpers, and each process joins
        its own tree's."""
        env = self.env({"PYROSCOPE_SAMPLE_RATE": "100"})
        loop = 'for i in 1 2 3 4 5; do "%s" 30; done' % SPIN
        ps = [subprocess.Popen(["bash", "-c", loop], env=env) for _ in range(2)]
        for p in ps:
            self.assertEqual(p.wait(timeout=120), 0)
        joined = self.joined()
        self.assertEqual(len(joined), 10, self.log_text()[-3000:])
        self.assertEqual(len(set(joined.values())), 2)
        self.assertEqual(self.helpers_started(), 2)
        for h in set(joined.values()):
            self.assertEqual(list(joined.values()).count(h), 5)

    def session_rss(self, n, extra, ms=2):
        """Run n processes of `ms` ms at 1000 Hz in one tree; the helper's
        resident memory as each session ended (the debug log)."""
        env = self.env(dict({"PYROSCOPE_SAMPLE_RATE": "1000", "PYROSCOPE_LOG_LEVEL": "debug"},
                            **extra))
        r = run(["bash", "-c", 'for i in {1..%d}; do "%s" %d; done' % (n, SPIN, ms)], env,
                timeout=900)
        self.assertEqual((r.rc, r.err), (0, b""))
        deadline = time.monotonic() + 30
        while "helper used" not in self.log_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        joined = self.joined()
        self.assertEqual(len(joined), n)
        self.assertEqual(len(set(joined.values())), 1, "one helper for the whole tree")
        rss = [int(k) for k in re.findall(r"session ended, \d+ left; helper RSS (\d+) KiB",
                                           self.log_text())]
        self.assertGreaterEqual(len(rss), n)
        return rss

    def test_the_helpers_memory_stays_bounded_over_2000_processes(self):
        """The helper frees each session at its end: its resident memory as
        sessions end is the same after 2000 processes as after 200, give or
        take 4 MiB (a leak of 2 KiB a session would be 3.5 MiB).  Without
        source lines, whose reader (libdw, loaded once, when first needed)
        would make a step at a moment that depends on the symbol cache."""
        rss = self.session_rss(2000, {"PYROSCOPE_DWARF_MEMORY": "0"})
        early, late = max(rss[150:250]), max(rss[-100:-5])
        self.assertLess(late, early + 4 * 1024, "helper RSS %d KiB near the end, %d near the "
                        "200th session" % (late, early))
        # The ended processes' samples are kept for the name's files (8 MiB
        # at most, group.h: past it a set is closed and the next begins;
        # check_export tests that).  Every process is in exactly one set
        # (each got at least one expiry: it used more than a period of
        # CPU).
        sets = [pprof_pids(f) for f in self.files_of("tree", "cpu.pb.gz")]
        seen = [p for s in sets for p in s]
        self.assertEqual(len(seen), len(set(seen)), "a process in two sets")
        self.assertLessEqual(set(self.joined()), set(seen))

    def test_source_lines_leave_nothing_behind_in_the_helper(self):
        """Every session reads libc's DWARF itself (no symbol cache): after
        libdw is loaded, the helper's memory as sessions end stays within
        4 MiB over 200 sessions (libc6-dbg's DWARF is tens of MiB: one
        session's left behind would show).  The last few sessions end after
        bash's own last pass, which reads its DWARF into bash's session,
        kept to the helper's end: they are left out (and no pass is due
        before: the upload interval is an hour)."""
        rss = self.session_rss(300, {"PYROSCOPE_SYMBOL_CACHE_SIZE": "0",
                                     "PYROSCOPE_UPLOAD_INTERVAL": "1h"}, ms=4)
        early, late = max(rss[80:100]), max(rss[-30:-5])
        self.assertLess(late, early + 4 * 1024, "helper RSS %d KiB at the end, %d at the "
                        "100th session" % (late, early))

    def symbol_counts(self, n, extra):
        """Run n `echo x | sed s/x/y/` in one tree, every allocation
        sampled so that every sed's session names frames in sed and libc;
        per session, the debug log's (objects read, objects another
        session had read, objects the process gave libdw, cache files
        read, caches another had open), summed."""
        env = self.env(dict({"PYROSCOPE_LOG_LEVEL": "debug",
                             "PYROSCOPE_PROFILING_ALLOC_ENABLED": "true",
                             "PYROSCOPE_ALLOC_SAMPLE_BYTES": "1"}, **extra))
        r = run(["bash", "-c", "for i in {1..%d}; do echo x | sed s/x/y/; done" % n], env)
        self.assertEqual((r.rc, r.out, r.err), (0, b"y\n" * n, b""))
        deadline = time.monotonic() + 30
        while "helper used" not in self.log_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(self.helpers_started(), 1)
        rows = [tuple(int(v) for v in m) for m in re.findall(
            r"symbols: (\d+) objects read, (\d+) already read for another program; .*"
            r"(\d+) opened by this process\), \d+ answered by the symbol cache "
            r"\((\d+) files read, (\d+) already open", self.log_text())]
        self.assertGreaterEqual(len(rows), n, self.log_text()[-3000:])
        os.unlink(self.log)
        return [sum(col) for col in zip(*rows)]

    def test_a_trees_programs_read_each_object_once(self):
        """Symbols once per object for the whole tree (issue 22, part 2).
        30 sed processes: without sharing every session reads sed's and
        libc's symbols itself (60 reads or more); shared, each object of
        the tree is read once, bash's, sed's and their libraries' (fewer
        than 20).  Then the symbol cache: a first tree fills it, and in a
        second of 10 processes each object's cache file is read once
        (fewer than 10 in all), not once per session."""
        read, shared, _, _, _ = self.symbol_counts(30, {"PYROSCOPE_DWARF_MEMORY": "0"})
        self.assertLess(read, 20)
        self.assertGreaterEqual(shared, 2 * 29)
        cache = {"XDG_CACHE_HOME": os.path.join(self.tmp, "xdg")}
        self.symbol_counts(2, cache)
        _, _, _, files, already = self.symbol_counts(10, cache)
        self.assertLess(files, 10)
        self.assertGreaterEqual(already, 9)

    def test_a_trees_programs_open_each_objects_dwarf_once(self):
        """DWARF once per object for the whole tree: 10 sed processes
        without a symbol cache each look libc's frames up in DWARF
        (libc6-dbg).  The reader is the helper's, shared: the last session
        says the process gave libdw at most a few objects (libc, bash's
        and sed's libraries with debug files), not one per session."""
        env = self.env({"PYROSCOPE_LOG_LEVEL": "debug", "PYROSCOPE_SYMBOL_CACHE_SIZE": "0",
                        "PYROSCOPE_PROFILING_ALLOC_ENABLED": "true",
                        "PYROSCOPE_ALLOC_SAMPLE_BYTES": "1"})
        r = run(["bash", "-c", "for i in {1..10}; do echo x | sed s/x/y/; done"], env)
        self.assertEqual((r.rc, r.err), (0, b""))
        deadline = time.monotonic() + 30
        while "helper used" not in self.log_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        rows = [(int(a), int(b)) for a, b in re.findall(
            r"source lines: (\d+) looked up in DWARF \(libdw loaded, \d+ objects without "
            r"debug information, (\d+) opened by this process", self.log_text())]
        self.assertGreaterEqual(sum(1 for looked, _ in rows if looked), 10, rows)
        self.assertLessEqual(max(opened for _, opened in rows), 4, rows)

    def test_a_program_of_the_tree_ends_without_waiting_for_the_helper(self):
        """A program of the tree (not its leader) that ends leaves the
        executable lines of its maps and its last request, and goes: the
        helper holds its tables, so it waits for nothing.  The shell stops
        the helper (SIGSTOP), runs spin for 60 ms of CPU (about 6 samples
        at 100 Hz) and reaps it, then lets the helper go on: the helper
        takes spin's notice though spin is gone, and names its frames from
        the lines it left (its /proc/PID/maps is gone).  Before, spin
        waited a second for the stopped helper, withdrew its notice and
        made a helper of its own: the tree's helper never took it."""
        env = self.env({"PYROSCOPE_SAMPLE_RATE": "100", "PYROSCOPE_LOG_LEVEL": "debug"})
        script = ('h=$(printenv PYROSHIM_HELPER); h=${h#pyroshim-*-*-}; h=${h%%-*}; kill -STOP $h; '
                  '"%s" 60 & p=$!; wait $p; kill -CONT $h; echo $p' % SPIN)
        r = run(["bash", "-c", script], env)
        self.assertEqual((r.rc, r.err), (0, b""))
        pid = int(r.out)
        helper_log(self, self.log)
        text = self.log_text()
        self.assertRegex(text, r"debug: uploader: pid %d joined the tree" % pid)
        self.assertNotIn("not taken", text)
        self.assertEqual(self.helpers_started(), 1, text[-3000:])
        _, samples = self.samples_of("tree", "cpu.pb.gz", pid)
        stacks = {}
        for vals, frames in samples:
            key = ";".join(reversed(frames))
            stacks[key] = stacks.get(key, 0) + vals[1]
        # burn() alone runs 60 ms of CPU: 5 expiries at least.
        named = sum(v for k, v in stacks.items() if "burn" in k.split(";"))
        self.assertGreaterEqual(named, 4 * 10 ** 7, stacks)

    def test_a_program_gone_before_its_notice_is_drained_before_the_leader(self):
        """As above, but the shell ends while the helper is still stopped
        (a background subshell lets it go on 0.3 s later): the helper then
        finds spin's notice and the shell's last request together.  spin,
        gone, is drained first, so that its samples are in the files when
        the shell's last pass answers -- looked at by the shell's parent
        (not preloaded) at once."""
        env = self.env({"PYROSCOPE_SAMPLE_RATE": "100"})
        del env["LD_PRELOAD"]
        script = ('h=$(printenv PYROSHIM_HELPER); h=${h#pyroshim-*-*-}; h=${h%%-*}; kill -STOP $h; '
                  '"%s" 60 & p=$!; wait $p; (sleep 0.3; kill -CONT $h) & echo $p' % SPIN)
        r = run(["sh", "-c", 'env LD_PRELOAD="%s" bash -c \'%s\'; ls "%s"'
                 % (SHIM, script, self.out)], env)
        self.assertEqual((r.rc, r.err), (0, b""))
        pid, listing = r.out.decode().split("\n", 1)
        self.assertIn(".cpu.pb.gz", listing)
        self.assertIn(int(pid), self.pids_of("tree", "cpu.pb.gz"), self.log_text()[-3000:])

    def test_a_killed_program_of_the_tree_is_named(self):
        """A program exec'd in the tree and killed (SIGKILL: no last
        pass; its /proc/PID/maps is gone when the helper drains it) has its
        frames named all the same: the helper read its object list when it
        joined.  About 30 samples of spin's burn(), every one under main.
        The shell recorded nothing (allocations are not profiled here): as
        the leader of a tree with other programs it waits all the same, so
        spin's profile is there when it returns -- looked at by its parent
        (not preloaded) at once, before the helper could have written it
        had the shell not waited."""
        env = self.env({"PYROSCOPE_SAMPLE_RATE": "100"})
        del env["LD_PRELOAD"]
        # Killed once it has used 0.3 s (/proc/PID/stat's utime and stime,
        # at 100 ticks a second), however busy the machine, for 10 s at most.
        script = ('"%s" 5000 & p=$!; for i in $(seq 200); do read -r -a s < /proc/$p/stat; '
                  '[ $((s[13] + s[14])) -ge 30 ] && break; sleep 0.05; done; '
                  'kill -9 $p; wait $p 2>/dev/null; echo $p' % SPIN)
        r = run(["sh", "-c", 'env LD_PRELOAD="%s" bash -c \'%s\'; ls "%s"'
                 % (SHIM, script, self.out)], env)
        self.assertEqual((r.rc, r.err), (0, b""))
        pid, listing = r.out.decode().split("\n", 1)
        self.assertEqual(self.helpers_started(), 1, self.log_text())
        # One set of files for the name, the shell's; spin's samples are
        # those labelled with its pid.
        self.assertTrue(re.search(r"(^|\n)tree\.\d+\.cpu\.pb\.gz\n", listing), listing)
        _, samples = self.samples_of("tree", "cpu.pb.gz", int(pid))
        stacks = {}
        for vals, frames in samples:
            key = ";".join(reversed(frames))
            stacks[key] = stacks.get(key, 0) + vals[1]
        total = sum(stacks.values())
        named = sum(v for k, v in stacks.items() if "main" in k.split(";"))
        self.assertIn(int(pid), self.pids_of("tree", "cpu.pb.gz"))
        self.assertGreater(total, 0)
        self.assertGreaterEqual(named, 0.9 * total, stacks)
