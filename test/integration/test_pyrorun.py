"""pyrorun(1), the man pages and make install (issue 6, items 1-3).

pyrorun is run as a user would run it, with no LD_PRELOAD of its own; what
the command sees is checked by making the command print its environment.
A preloaded `sh` rewrites TRACEPARENT for its own children (its span becomes
their parent), so exact trace values are checked with the shim disabled
(PYROSCOPE_ENABLED=false) or through a static program."""
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import time
import unittest
import urllib.parse

from common import PROG, ROOT, SHIM, ShimTest, clean_env, default_signals, read_folded, run

PYRORUN = os.path.join(ROOT, "scripts", "pyrorun")
REAL_SHIM = os.path.realpath(SHIM)
HEX32 = re.compile(r"^[0-9a-f]{32}$")
HEX16 = re.compile(r"^[0-9a-f]{16}$")
# Every option of the brief; --help and pyrorun(1) must both name each one.
OPTIONS = ["-s", "--server", "-n", "--app-name", "-t", "--tag", "-r", "--sample-rate",
           "--no-cpu", "--no-alloc", "--alloc-sample-bytes", "-o", "--output", "-i",
           "--upload-interval", "--trace", "-v", "--verbose", "-q", "--help", "--version",
           "--pprof-address", "--no-block", "--no-mutex", "--block-rate"]
VARIABLES = ["PYROSCOPE_SERVER_ADDRESS", "PYROSCOPE_APPLICATION_NAME", "PYROSCOPE_TAGS",
             "PYROSCOPE_SAMPLE_RATE", "PYROSCOPE_PROFILING_CPU_ENABLED",
             "PYROSCOPE_PROFILING_ALLOC_ENABLED", "PYROSCOPE_ALLOC_SAMPLE_BYTES",
             "PYROSCOPE_OUTPUT_DIR", "PYROSCOPE_UPLOAD_INTERVAL", "PYROSCOPE_TRACE_CORRELATION",
             "PYROSCOPE_LOG_LEVEL", "TRACEPARENT", "TRACESTATE", "LD_PRELOAD",
             "PYROSCOPE_PPROF_ADDRESS", "PYROSCOPE_PROFILING_BLOCK_ENABLED",
             "PYROSCOPE_PROFILING_MUTEX_ENABLED", "PYROSCOPE_BLOCK_RATE"]
SHOW_TRACE = "echo $TRACEPARENT; echo $TRACESTATE; echo $PYROSCOPE_TAGS; echo $PYROSCOPE_TRACE_CORRELATION"


def env_for(extra=None):
    """The caller's environment: nothing preloaded, no PYROSCOPE_*."""
    env = clean_env(preload=False)
    env.pop("PYROSHIM_LIB", None)
    env.pop("PYROSCOPE_GRAFANA_URL", None)
    env.update(extra or {})
    return env


def static_libc():
    """True when `cc -static` can link (libc.a is installed)."""
    if not shutil.which("cc"):
        return False
    p = subprocess.run(["cc", "-print-file-name=libc.a"], capture_output=True, text=True,
                       timeout=30)
    return os.path.isabs(p.stdout.strip())


def pyrorun_lines(err):
    return [l for l in err.decode().splitlines() if l.startswith("pyrorun:")]


class Pyrorun(ShimTest):
    def pr(self, args, extra=None, timeout=120, **kw):
        return run([PYRORUN] + args, env_for(extra), timeout=timeout, **kw)

    def popen(self, args, extra=None, **kw):
        # A new session: no controlling terminal, so pyrorun forwards SIGINT
        # itself whatever terminal `make check` runs in.
        kw.setdefault("preexec_fn", default_signals)
        return subprocess.Popen([PYRORUN] + args, env=env_for(extra), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=self.tmp, **kw)

    def wait(self, p, timeout=60):
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            raise AssertionError("pyrorun did not end within %ss" % timeout)
        return p.returncode, out.decode(), err.decode()

    # --- help, version, usage -------------------------------------------

    def test_version(self):
        r = self.pr(["--version"])
        version = open(os.path.join(ROOT, "VERSION"), "rb").read().strip()
        self.assertEqual((r.rc, r.out, r.err), (0, b"pyrorun (pyroshim) %s\n" % version, b""))

    def test_help_lists_every_option_and_variable(self):
        r = self.pr(["--help"])
        self.assertEqual(r.rc, 0)
        self.assertEqual(r.err, b"")
        text = r.out.decode()
        for word in OPTIONS + VARIABLES + ["PYROSHIM_LIB", "PYROSCOPE_GRAFANA_URL"]:
            self.assertRegex(text, r"(^|[\s,(=$])%s\b" % re.escape(word), word)

    def test_man_page_documents_every_option(self):
        page = open(os.path.join(ROOT, "man", "pyrorun.1")).read().replace("\\-", "-")
        for word in OPTIONS + ["PYROSHIM_LIB", "PYROSCOPE_GRAFANA_URL", "EXIT STATUS",
                               "pyroshim (7)"]:
            self.assertIn(word, page)

    def test_usage_errors_exit_125_and_run_nothing(self):
        marker = os.path.join(self.tmp, "ran")
        for args in (["--bogus", "touch", marker], ["-t", "novalue", "touch", marker],
                     ["-t", "a=1,b=2", "touch", marker], ["-o"], []):
            r = self.pr(args)
            self.assertEqual(r.rc, 125, args)
            self.assertTrue(r.err.startswith(b"pyrorun: "), r.err)
            self.assertIn(b"pyrorun --help", r.err)
        self.assertFalse(os.path.exists(marker))

    def test_command_not_found_is_127(self):
        r = self.pr(["-o", self.out, "--", "no-such-command-pyrorun"])
        self.assertEqual(r.rc, 127)
        self.assertEqual(pyrorun_lines(r.err),
                         ["pyrorun: no-such-command-pyrorun: command not found"])
        r = self.pr(["-q", os.path.join(self.tmp, "missing")])
        self.assertEqual((r.rc, r.err), (127, b""), "-q prints nothing")

    # --- LD_PRELOAD and the library -------------------------------------

    def test_shim_prepended_once_to_existing_preload(self):
        show = ["sh", "-c", "echo $LD_PRELOAD"]
        r = self.pr(["-q", "--"] + show)
        self.assertEqual(r.out.decode().strip(), REAL_SHIM)
        # Space- or colon-separated, with another copy of the shim in it;
        # same in local mode, where the command is a child.
        before = "/nonexistent/a.so %s:/nonexistent/libpyroshim.so:/nonexistent/b.so" % SHIM
        for mode in (["-q"], ["-o", self.out]):
            r = self.pr(mode + ["--"] + show, {"LD_PRELOAD": before})
            self.assertEqual(r.rc, 0, r.err)
            self.assertEqual(r.out.decode().strip(),
                             REAL_SHIM + ":/nonexistent/a.so:/nonexistent/b.so", mode)

    def test_pyroshim_lib_wins_and_missing_library_warns(self):
        copy = os.path.join(self.tmp, "copy.so")
        shutil.copy(SHIM, copy)
        show = ["sh", "-c", "echo $LD_PRELOAD"]
        r = self.pr(["-q", "--"] + show, {"PYROSHIM_LIB": copy})
        self.assertEqual(r.out.decode().strip(), copy)
        r = self.pr(["-o", self.out, "--"] + show + ["x"],
                    {"PYROSHIM_LIB": copy + ".gone", "LD_PRELOAD": "/nonexistent/a.so"})
        self.assertEqual(r.out.decode().strip(), "/nonexistent/a.so")
        self.assertIn("pyrorun: PYROSHIM_LIB=%s.gone: no such file" % copy,
                      pyrorun_lines(r.err)[0])

    def test_uninstalled_copy_without_library_warns_and_runs(self):
        # A script whose @LIBDIR@ was never substituted, with no build tree
        # next to it: a clear warning, and the command still runs.
        lone = os.path.join(self.tmp, "bin", "pyrorun")
        os.makedirs(os.path.dirname(lone))
        shutil.copy(PYRORUN, lone)
        r = run([lone, "-o", self.out, "--", "sh", "-c", "echo [$LD_PRELOAD]; exit 5"],
                env_for(), timeout=60)
        self.assertEqual(r.rc, 5)
        self.assertEqual(r.out, b"[]\n")
        lines = pyrorun_lines(r.err)
        self.assertTrue(lines[0].startswith("pyrorun: libpyroshim.so not found"), lines)
        self.assertIn("running sh without the profiler", lines[0])
        self.assertNotIn("@", lines[0])

    # --- commands the shim cannot load into ----------------------------

    @unittest.skipUnless(static_libc(), "libc.a is not installed (no cc -static)")
    def test_static_binary_warns_runs_and_still_gets_the_trace(self):
        src = os.path.join(self.tmp, "st.c")
        exe = os.path.join(self.tmp, "st")
        with open(src, "w") as f:
            f.write('#include <stdio.h>\n#include <stdlib.h>\nint main(void) {\n'
                    'printf("%s\\n%s\\n", getenv("TRACEPARENT"), getenv("PYROSCOPE_TAGS"));\n'
                    'return 4;\n}\n')
        subprocess.run(["cc", "-static", "-O1", src, "-o", exe], check=True, timeout=120)
        r = self.pr(["--trace", "-t", "env=ci", "-o", self.out, "--", exe])
        self.assertEqual(r.rc, 4)
        lines = pyrorun_lines(r.err)
        self.assertIn("pyrorun: %s is statically linked: the shim cannot load into it; "
                      "running it without the profiler" % exe, lines)
        tid = [l for l in lines if l.startswith("pyrorun: trace_id ")][0].split()[-1]
        tp, tags = r.out.decode().split()
        _, t, s, flags = tp.split("-")
        self.assertEqual((t, flags), (tid, "03"))
        self.assertEqual(tags, "env=ci,trace_id=%s,root_span_id=%s" % (t, s))
        # A dynamic program is not warned about; nor is a script whose
        # interpreter is dynamic.
        script = os.path.join(self.tmp, "s.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(script, 0o755)
        for cmd in ([os.path.join(PROG, "spin"), "1"], [script]):
            r = self.pr(["-o", self.out, "--"] + cmd)
            self.assertEqual(r.rc, 0)
            self.assertNotIn("linked", r.err.decode())

    def test_setuid_to_another_user_warns_and_runs(self):
        exe = os.path.join(self.tmp, "suid")
        shutil.copy(os.path.join(PROG, "spin"), exe)
        os.chmod(self.tmp, 0o755)
        # Setuid to ourselves changes no identity: the shim loads, no warning.
        os.chmod(exe, 0o4755)
        r = self.pr(["-o", self.out, "--", exe, "1"])
        self.assertEqual(r.rc, 0)
        self.assertNotIn("setuid", r.err.decode())
        if os.geteuid() != 0:
            self.skipTest("making a binary setuid to another user needs root")
        os.chown(exe, 65534, -1)
        os.chmod(exe, 0o4755)  # chown clears the bit
        r = self.pr(["-o", self.out, "--", exe, "1"])
        self.assertEqual(r.rc, 0)
        self.assertIn("pyrorun: %s is setuid/setgid: the loader ignores LD_PRELOAD" % exe,
                      pyrorun_lines(r.err)[0])

    # --- exit status and signals -----------------------------------------

    MODES = (["-q"], ["-o", "OUT"])

    def modes(self):
        return [[self.out if a == "OUT" else a for a in m] for m in self.MODES]

    def test_exit_status_and_fatal_signal_are_the_commands(self):
        for mode in self.modes():
            r = self.pr(mode + ["--", "sh", "-c", "exit 3"])
            self.assertEqual(r.rc, 3, mode)
            r = self.pr(mode + ["--", "sh", "-c", "kill -TERM $$"])
            self.assertEqual(r.rc, -signal.SIGTERM, mode)
            # SIGINT keeps its default action in the command (a background
            # child of sh would otherwise have it ignored).
            r = self.pr(mode + ["--", "sh", "-c", "kill -INT $$; exit 9"])
            self.assertEqual(r.rc, -signal.SIGINT, mode)
            r = self.pr(mode + ["--", "sh", "-c", "kill -QUIT $$; exit 9"], cwd=self.tmp)
            self.assertEqual(r.rc, -signal.SIGQUIT, mode)

    def test_signals_ignored_by_the_caller_stay_ignored(self):
        def ignore():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        for mode in self.modes():
            p = subprocess.Popen([PYRORUN] + mode + ["--", "sh", "-c", "kill -INT $$; exit 9"],
                                 env=env_for(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 preexec_fn=ignore)
            self.assertEqual(self.wait(p)[0], 9, mode)

    def test_sigint_and_sigterm_to_pyrorun_reach_the_command(self):
        code = ("import signal, sys, time\n"
                "def h(n, f):\n"
                "    print('got', signal.Signals(n).name, flush=True); sys.exit(7)\n"
                "signal.signal(signal.SIGINT, h)\n"
                "signal.signal(signal.SIGTERM, h)\n"
                "print('ready', flush=True)\n"
                "time.sleep(60)\n")
        for mode in self.modes():
            for sig in (signal.SIGINT, signal.SIGTERM):
                p = self.popen(mode + ["--", "python3", "-c", code])
                self.assertEqual(p.stdout.readline(), b"ready\n")
                p.send_signal(sig)
                rc, out, err = self.wait(p)
                self.assertEqual((rc, out), (7, "got %s\n" % sig.name), (mode, sig, err))

    def test_exec_mode_keeps_the_pid_local_mode_does_not(self):
        for mode, same in ((["-q", "-o", self.out], True),
                           (["-s", "http://127.0.0.1:9", "-q"], True),
                           (["-o", self.out], False)):
            p = self.popen(mode + ["--", "sh", "-c", "echo $$"],
                           {"PYROSCOPE_ENABLED": "false"})
            rc, out, err = self.wait(p)
            self.assertEqual(rc, 0, err)
            self.assertEqual(int(out) == p.pid, same, mode)
        # A server without -o: exec, no summary.
        r = self.pr(["-s", "http://127.0.0.1:9", "--", "sh", "-c", "exit 0"],
                    {"PYROSCOPE_ENABLED": "false"})
        self.assertEqual(pyrorun_lines(r.err), [])

    def test_stdin_and_other_descriptors_pass_through_in_local_mode(self):
        rd, wr = os.pipe()
        p = subprocess.Popen([PYRORUN, "-o", self.out, "--", "sh", "-c", "cat; echo fd9 >&9"],
                             env=env_for(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, close_fds=False,
                             preexec_fn=lambda: (os.dup2(wr, 9), os.close(rd)))
        os.close(wr)
        out, err = p.communicate(b"hello\n", timeout=60)
        self.assertEqual((p.returncode, out), (0, b"hello\n"), err)
        with os.fdopen(rd) as f:
            self.assertEqual(f.read(), "fd9\n")

    # --- the local summary ----------------------------------------------

    def summary_rows(self, err, header):
        lines = err.decode().splitlines()
        i = [n for n, l in enumerate(lines) if l.startswith(header)]
        self.assertEqual(len(i), 1, "no %r in %s" % (header, lines))
        rows = []
        for l in lines[i[0] + 1:]:
            if not l.startswith("  "):
                break
            m = re.match(r"\s+([\d.]+ \S+)\s+([\d.]+)%  (.*)$", l)
            self.assertTrue(m, l)
            rows.append((m.group(1), float(m.group(2)), m.group(3)))
        return rows

    def truth(self, kind):
        """{leaf: value} over this run's folded files of `kind`."""
        leaf = {}
        for f in os.listdir(self.out):
            if f.endswith(".%s.folded" % kind) and not f.startswith("stale."):
                for stack, v in read_folded(os.path.join(self.out, f)).items():
                    name = stack.split(";")[-1]
                    leaf[name] = leaf.get(name, 0) + v
        return leaf

    def test_summary_shows_top_cpu_functions_of_this_run_only(self):
        os.makedirs(self.out, mode=0o700)
        # A file from an earlier run, which must not count.
        stale = os.path.join(self.out, "stale.1.cpu.folded")
        with open(stale, "w") as f:
            f.write("main;stale_function 99000000000\n")
        os.utime(stale, (time.time() - 3600,) * 2)
        r = self.pr(["-o", os.path.relpath(self.out, self.tmp), "-r", "250", "--",
                     os.path.join(PROG, "cpu_split"), "1200", "1", "25",
                     os.path.join(self.tmp, "t.json")], cwd=self.tmp)
        self.assertEqual(r.rc, 0, r.err)
        self.assertIn("pyrorun: profiles in %s\n" % self.out, r.err.decode())
        rows = self.summary_rows(r.err, "pyrorun: top functions by self CPU")
        self.assertTrue(1 <= len(rows) <= 10, rows)
        names = [n for _, _, n in rows]
        self.assertNotIn("stale_function", names)
        self.assertIn(names[0], ("spin", "burn_alpha", "burn_beta"))
        # The table is the folded files' own numbers, sorted.
        leaf = self.truth("cpu")
        total = sum(leaf.values())
        best = max(leaf, key=leaf.get)
        self.assertEqual(names[0], best)
        self.assertEqual(rows[0][0], "%.1f ms" % (leaf[best] / 1e6))
        self.assertAlmostEqual(rows[0][1], 100 * leaf[best] / total, delta=0.06)
        pct = [p for _, p, _ in rows]
        self.assertEqual(pct, sorted(pct, reverse=True))

    def test_summary_shows_top_allocating_functions(self):
        gen = os.path.join(ROOT, "examples", "generator")
        if not os.path.exists(gen):
            self.skipTest("examples/generator not built")
        r = self.pr(["-o", self.out, "--alloc-sample-bytes", "1", "--no-cpu", "--",
                     gen, "3000", os.path.join(self.tmp, "out.json")])
        self.assertEqual(r.rc, 0, r.err)
        self.assertFalse(any(f.endswith(".cpu.folded") for f in os.listdir(self.out)),
                         "--no-cpu reached the shim")
        self.assertNotIn("self CPU", r.err.decode())
        rows = self.summary_rows(r.err, "pyrorun: top functions by allocated bytes")
        leaf = self.truth("alloc_space")
        self.assertEqual(rows[0][2], max(leaf, key=leaf.get))
        self.assertAlmostEqual(rows[0][1], 100 * max(leaf.values()) / sum(leaf.values()),
                               delta=0.06)

    def test_summary_shows_top_waits_with_their_caller(self):
        r = self.pr(["-o", self.out, "--no-cpu", "--no-alloc", "--",
                     os.path.join(PROG, "offcpu"), "known"])
        self.assertEqual(r.rc, 0, r.err)
        rows = self.summary_rows(r.err, "pyrorun: top waits")
        # The folded files' own numbers: each waiting call with its caller.
        want = {}
        for f in os.listdir(self.out):
            if f.endswith(".block_duration.folded"):
                for stack, v in read_folded(os.path.join(self.out, f)).items():
                    fr = stack.split(";")
                    key = "%s in %s" % (fr[-1], fr[-2])
                    want[key] = want.get(key, 0) + v
        best = max(want, key=want.get)
        self.assertEqual(rows[0][2], best)
        self.assertEqual(rows[0][0], "%.1f ms" % (want[best] / 1e6))
        names = [n for _, _, n in rows]
        self.assertIn("read in wait_pipe_reader", names)
        self.assertIn("pthread_cond_wait in wait_cond_waiter", names)

    def test_summary_says_when_nothing_was_written(self):
        r = self.pr(["-o", self.out, "--", "sh", "-c", "exit 0"],
                    {"PYROSCOPE_ENABLED": "false"})
        self.assertEqual(pyrorun_lines(r.err),
                         ["pyrorun: no profiles written in %s (the shim did not load, or "
                          "nothing was sampled)" % self.out])

    def test_quiet_prints_nothing_and_options_reach_the_command(self):
        r = self.pr(["-q", "-n", "app", "-t", "a=1", "--tag=b=2", "-r", "250", "--no-cpu",
                     "--no-alloc", "--alloc-sample-bytes=4096", "-o", "rel", "-i", "2s",
                     "--no-block", "--no-mutex", "--block-rate=250us",
                     "-vv", "--", "env"], {"PYROSCOPE_ENABLED": "false",
                                            "PYROSCOPE_LABELS": "z=0"}, cwd=self.tmp)
        self.assertEqual((r.rc, r.err), (0, b""))
        env = dict(l.split("=", 1) for l in r.out.decode().splitlines() if "=" in l)
        want = {"PYROSCOPE_APPLICATION_NAME": "app", "PYROSCOPE_TAGS": "z=0,a=1,b=2",
                "PYROSCOPE_SAMPLE_RATE": "250", "PYROSCOPE_PROFILING_CPU_ENABLED": "false",
                "PYROSCOPE_PROFILING_ALLOC_ENABLED": "false",
                "PYROSCOPE_ALLOC_SAMPLE_BYTES": "4096",
                "PYROSCOPE_OUTPUT_DIR": os.path.join(os.path.realpath(self.tmp), "rel"),
                "PYROSCOPE_UPLOAD_INTERVAL": "2s", "PYROSCOPE_LOG_LEVEL": "debug",
                "PYROSCOPE_PROFILING_BLOCK_ENABLED": "false",
                "PYROSCOPE_PROFILING_MUTEX_ENABLED": "false", "PYROSCOPE_BLOCK_RATE": "250us"}
        self.assertEqual({k: env.get(k) for k in want}, want)
        self.assertNotIn("PYROSCOPE_TRACE_CORRELATION", env)
        r = self.pr(["-q", "-v", "-s", "http://h:4040", "--", "env"],
                    {"PYROSCOPE_ENABLED": "false"})
        env = dict(l.split("=", 1) for l in r.out.decode().splitlines() if "=" in l)
        self.assertEqual((env["PYROSCOPE_LOG_LEVEL"], env["PYROSCOPE_SERVER_ADDRESS"]),
                         ("info", "http://h:4040"))

    # --- --trace ---------------------------------------------------------

    def test_trace_starts_a_new_trace(self):
        r = self.pr(["--trace", "-o", self.out, "--", "sh", "-c", SHOW_TRACE],
                    {"PYROSCOPE_ENABLED": "false", "PYROSCOPE_TAGS": "env=dev"})
        self.assertEqual(r.rc, 0, r.err)
        tp, ts, tags, corr = r.out.decode().splitlines()
        m = re.match(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-03$", tp)
        self.assertTrue(m, tp)
        trace, span = m.groups()
        self.assertEqual(ts, "pyroshim=root")
        self.assertEqual(tags, "env=dev,trace_id=%s,root_span_id=%s" % (trace, span))
        self.assertEqual(corr, "true")
        self.assertEqual(pyrorun_lines(r.err)[0], "pyrorun: trace_id " + trace)
        # Fresh ids every run.
        r2 = self.pr(["--trace", "-q", "--", "sh", "-c", SHOW_TRACE],
                     {"PYROSCOPE_ENABLED": "false"})
        self.assertNotEqual(r2.out.decode().split()[0][3:35], trace)
        self.assertEqual(r2.err, b"", "-q prints no trace id")

    def test_trace_joins_a_valid_traceparent_and_keeps_existing_tags(self):
        tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        r = self.pr(["--trace", "-o", self.out, "--", "sh", "-c", SHOW_TRACE],
                    {"PYROSCOPE_ENABLED": "false", "TRACEPARENT": tp, "TRACESTATE": "k=v",
                     "PYROSCOPE_TAGS": "trace_id=mine"})
        self.assertEqual(r.out.decode().splitlines(),
                         [tp, "k=v", "trace_id=mine,root_span_id=b7ad6b7169203331", "true"])
        self.assertEqual(pyrorun_lines(r.err)[0],
                         "pyrorun: trace_id 0af7651916cd43dd8448eb211c80319c")
        for bad in ("00-00000000000000000000000000000000-b7ad6b7169203331-01",
                    "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-x",
                    "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", "junk"):
            r = self.pr(["--trace", "-o", self.out, "--", "sh", "-c", SHOW_TRACE],
                        {"PYROSCOPE_ENABLED": "false", "TRACEPARENT": bad})
            out = r.out.decode().split()
            self.assertNotEqual(out[0], bad)
            self.assertEqual(out[1], "pyroshim=root", bad)
            self.assertIn("is not valid; starting a new trace", r.err.decode())

    def test_trace_accepts_exactly_what_the_library_accepts(self):
        # pyrorun asks the library's own parser (pyroshim-traceparent): the
        # W3C suite's invalid values start a new trace, a valid value of a
        # later version is joined, and every answer matches the parser's.
        from test_trace import INVALID
        later = "cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-what-the-future-holds"
        for tp in INVALID + [later]:
            r = self.pr(["--trace", "-o", self.out, "--", "sh", "-c", SHOW_TRACE],
                        {"PYROSCOPE_ENABLED": "false", "TRACEPARENT": tp})
            lib = run([os.path.join(ROOT, "build", "pyroshim-traceparent"), tp], clean_env())
            joined = r.out.decode().split()[0] == tp
            self.assertEqual(joined, lib.rc == 0, tp)
            self.assertEqual(joined, tp == later, tp)

    def test_trace_id_survives_the_shim(self):
        # With the shim loaded into sh, its children see sh's own span as
        # parent, but the same trace.
        r = self.pr(["--trace", "-o", self.out, "--", "sh", "-c", "echo $TRACEPARENT"])
        self.assertEqual(r.rc, 0, r.err)
        trace = pyrorun_lines(r.err)[0].split()[-1]
        self.assertEqual(r.out.decode().split("-")[1], trace)

    def test_trace_prints_grafana_explore_link(self):
        r = self.pr(["--trace", "-o", self.out, "--", "true"],
                    {"PYROSCOPE_ENABLED": "false", "PYROSCOPE_GRAFANA_URL": "http://graf:3000/"})
        lines = pyrorun_lines(r.err)
        trace = lines[0].split()[-1]
        self.assertTrue(HEX32.match(trace))
        url = lines[1][len("pyrorun: trace "):]
        parts = urllib.parse.urlsplit(url)
        self.assertEqual((parts.scheme, parts.netloc, parts.path),
                         ("http", "graf:3000", "/explore"))
        self.assertNotRegex(url, r"[\"{} ]", "the JSON must be URL-encoded")
        left = json.loads(urllib.parse.parse_qs(parts.query)["left"][0])
        self.assertEqual(left["datasource"], "tempo")
        self.assertEqual(left["queries"][0]["query"], trace)
        self.assertEqual(left["queries"][0]["queryType"], "traceql")


class Install(ShimTest):
    def make(self, *args):
        # -o: never rebuild the library here; `make check` built it, and
        # others may be editing its sources.
        p = subprocess.run(["make", "-s", "-C", ROOT, "-o", "shim/libpyroshim.so"] + list(args),
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def test_install_finds_installed_library_and_uninstall_removes_it(self):
        prefix = os.path.join(self.tmp, "prefix")
        installed = ["bin/pyrorun", "lib/libpyroshim.so", "share/man/man1/pyrorun.1",
                     "share/man/man7/pyroshim.7", "lib/pyroshim/pyroshim-traceparent"]
        self.make("install", "PREFIX=" + prefix)
        for f in installed:
            self.assertTrue(os.path.isfile(os.path.join(prefix, f)), f)
        exe = os.path.join(prefix, "bin", "pyrorun")
        self.assertEqual(stat.S_IMODE(os.stat(exe).st_mode), 0o755)
        self.assertNotIn("@LIBDIR@", open(exe).read())
        r = run([exe, "-q", "--", "sh", "-c", "echo $LD_PRELOAD"], env_for(), timeout=60)
        self.assertEqual(r.out.decode().strip(), os.path.join(prefix, "lib", "libpyroshim.so"))
        r = run([exe, "-o", self.out, "-n", "inst", "--", os.path.join(PROG, "spin"), "100"],
                env_for(), timeout=60)
        self.assertEqual(r.rc, 0, r.err)
        self.assertTrue(any(f.startswith("inst.") and f.endswith(".cpu.pb.gz")
                            for f in self.files()), self.files())
        self.assertIn(b"pyrorun: profiles in", r.err)
        # The installed copy checks TRACEPARENT with the installed parser.
        tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        r = run([exe, "--trace", "-o", self.out, "--", "sh", "-c", "echo $TRACEPARENT"],
                env_for({"PYROSCOPE_ENABLED": "false", "TRACEPARENT": tp}), timeout=60)
        self.assertEqual(r.out.decode().strip(), tp, r.err)
        self.make("uninstall", "PREFIX=" + prefix)
        for f in installed:
            self.assertFalse(os.path.exists(os.path.join(prefix, f)), f)

    def test_destdir_install_points_at_prefix(self):
        dest = os.path.join(self.tmp, "dest")
        self.make("install", "DESTDIR=" + dest, "PREFIX=/opt/pyro")
        exe = os.path.join(dest, "opt", "pyro", "bin", "pyrorun")
        self.assertIn("libdir='/opt/pyro/lib'", open(exe).read())
        self.assertTrue(os.path.isfile(os.path.join(dest, "opt/pyro/lib/libpyroshim.so")))
        self.make("uninstall", "DESTDIR=" + dest, "PREFIX=/opt/pyro")
        self.assertFalse(os.path.exists(exe))


class Lint(unittest.TestCase):
    @unittest.skipUnless(shutil.which("shellcheck"), "shellcheck is not installed")
    def test_pyrorun_is_shellcheck_clean(self):
        p = subprocess.run(["shellcheck", "-s", "sh", PYRORUN], capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    @unittest.skipUnless(shutil.which("groff"), "groff is not installed")
    def test_man_pages_render_without_warnings(self):
        for page in ("pyrorun.1", "pyroshim.7"):
            p = subprocess.run(["groff", "-man", "-ww", "-z", os.path.join(ROOT, "man", page)],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual((p.returncode, p.stderr), (0, ""), page)


if __name__ == "__main__":
    unittest.main()
