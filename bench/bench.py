#!/usr/bin/env python3
"""bench.py -- pyroshim against its anchors, side by side, in one run.

Every comparison runs its configurations interleaved (A B C A B C ...) so
that the machine's drift hits them all alike, and reports the median with
min-max.  CPU time is the child's own rusage from wait4 (user + sys, the
child and the descendants it waited for).  Figures a 2-core VM cannot
resolve from outside (a 1 % overhead: REFERENCES.md section 7 measured
+-3 % between identical runs) are also counted inside: the handler timing
of shim/libpyroshim-bench.so and callgrind instruction counts.

usage: python3 bench/bench.py [--smoke] [--out FILE] [--only SECTION,...]
Called by bench/run.sh, which installs the tools and builds the programs.
A tool that is missing makes its rows read "not measured: why".
Python 3 standard library only.
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SHIM = os.path.join(ROOT, "shim", "libpyroshim.so")
SHIM_BENCH = os.path.join(ROOT, "shim", "libpyroshim-bench.so")
BB = os.path.join(ROOT, "build", "bench")
IDLE = os.path.join(BB, "libidle_thread.so")  # one idle thread, nothing else
# The floor: malloc/free/calloc/realloc forwarded through dlsym(RTLD_NEXT)
# pointers with a per-thread byte countdown, nothing else (bench/bare_interposer.c).
BARE = os.path.join(BB, "libbare_interposer.so")
# The same for the waiting calls of section 13 (bench/bare_wait_interposer.c),
# and the prototype of the slot design it is weighed against
# (bench/slot_wait_interposer.c).
BARE_WAIT = os.path.join(BB, "libbare_wait_interposer.so")
SLOT_WAIT = os.path.join(BB, "libslot_wait_interposer.so")
# Objects whose instructions cg_run counts as "the interposer's own code".
OWN_OBJECTS = ("libpyroshim", "libbare_interposer", "libbare_wait_interposer",
               "libslot_wait_interposer")
# PYROSHIM_BEFORE=/path/to/an/older/libpyroshim.so adds its rows to the
# generator, start-up and memory sections, measured in the same run.
BEFORE = os.environ.get("PYROSHIM_BEFORE", "")
PROG = os.path.join(ROOT, "build", "prog")
GEN = os.path.join(ROOT, "examples", "generator")
PEER = os.path.join(ROOT, "test", "peer", "pyroscope_peer.py")
LIBDIRS = ["/usr/lib/x86_64-linux-gnu", "/usr/lib", "/usr/local/lib"]

# Sizes: "full" is the published run (about 15 minutes here), "smoke" only
# proves every path still works (well under a minute).
SIZES = {
    "full": dict(rounds=5, burn_miters=400, handler_miters=1000, handler_runs=3,
                 split_ms=4000, split_ms4=2000, split_reps=2, sites_mib=200,
                 sites_reps=5, pairs=20000000, pair_rounds=7, mixed=3000000,
                 mixed_rounds=3, gen_n=200000, gen_rounds=9, true_rounds=200,
                 shell_cmds=1000, shell_rounds=3, heap_mib=1024, rss_rounds=3,
                 cg_pairs=200000, calls=8000000, calls_rounds=7, cg_calls=200000,
                 wait_mutex=20000000, wait_pipe=500000, wait_rounds=7, wait_pingpong=100000,
                 cg_wait_mutex=100000, cg_wait_pipe=20000, wait_gen_rounds=9,
                 slot_sleep=1.0, slot_rounds=5,
                 tree_rounds=5, tree_loop=300, tree_true_runs=100, tree_true_rounds=7,
                 tree_gen_n=50000, tree_gen_rounds=9, tree_files=40, tree_funcs=12,
                 tree_make_rounds=5, tree_short=(200, 20), tree_short_rounds=3),
    "smoke": dict(rounds=1, burn_miters=10, handler_miters=20, handler_runs=1,
                  split_ms=300, split_ms4=150, split_reps=1, sites_mib=4,
                  sites_reps=1, pairs=200000, pair_rounds=1, mixed=20000,
                  mixed_rounds=1, gen_n=500, gen_rounds=1, true_rounds=5,
                  shell_cmds=20, shell_rounds=1, heap_mib=16, rss_rounds=1,
                  cg_pairs=2000, calls=20000, calls_rounds=1, cg_calls=5000,
                  wait_mutex=20000, wait_pipe=2000, wait_rounds=1, wait_pingpong=200,
                  cg_wait_mutex=1000, cg_wait_pipe=500, wait_gen_rounds=1,
                  slot_sleep=0.05, slot_rounds=1,
                  tree_rounds=1, tree_loop=10, tree_true_runs=5, tree_true_rounds=1,
                  tree_gen_n=500, tree_gen_rounds=1, tree_files=4, tree_funcs=4,
                  tree_make_rounds=1, tree_short=(5, 2), tree_short_rounds=1),
}


# ---- running programs -------------------------------------------------

class Result:
    def __init__(self, rc, cpu, wall, maxrss_kb, out, err):
        self.rc, self.cpu, self.wall, self.maxrss_kb = rc, cpu, wall, maxrss_kb
        self.out, self.err = out, err


def base_env(extra=None):
    """The caller's environment without anything that would change what is
    measured (a profiler preloaded, pyroshim or gperftools settings)."""
    drop = ("PYROSCOPE_", "OTEL_", "LD_PRELOAD", "CPUPROFILE", "HEAPPROFILE",
            "HEAP_PROFILE", "TCMALLOC_", "TRACEPARENT", "TRACESTATE")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(extra or {})
    return env


def run(argv, env, timeout=300, cwd=None):
    """Run argv to completion and return its wait4 rusage.  The wait blocks
    (no polling, so wall times of 1 ms programs stay exact); a timer kills
    the process group when `timeout` seconds pass."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                             stdout=out, stderr=err, start_new_session=True)
        expired = []

        def kill():
            expired.append(1)
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            _, status, ru = os.wait4(p.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        res = Result(p.returncode, ru.ru_utime + ru.ru_stime, wall, ru.ru_maxrss,
                     out.read().decode(errors="replace"), err.read().decode(errors="replace"))
    if expired:
        raise RuntimeError("timed out after %ss: %s" % (timeout, " ".join(argv)))
    if res.rc != 0:
        raise RuntimeError("exit %d: %s\n%s" % (res.rc, " ".join(argv), res.err[-2000:]))
    return res


def interleave(configs, rounds, make):
    """configs: list of names; make(name, round) -> Result.  Runs A B C A B
    C ... and returns {name: [Result, ...]}."""
    res = {c: [] for c in configs}
    for r in range(rounds):
        for c in configs:
            res[c].append(make(c, r))
    return res


def med(xs):
    return statistics.median(xs)


def cpu_rows(res, configs):
    """Table rows of CPU s against configs[0] (the baseline): the span, the
    per-round change in %, and min against min."""
    base = [x.cpu for x in res[configs[0]]]
    rows = [[configs[0], span(base), "-", "-"]]
    for c in configs[1:]:
        cpu = [x.cpu for x in res[c]]
        rows.append([c, span(cpu), span([100 * (a / b - 1) for a, b in zip(cpu, base)], "%+.2f"),
                     "%+.2f" % (100 * (min(cpu) / min(base) - 1))])
    return rows


def span(xs, fmt="%.3f"):
    """'median (min-max)' of xs."""
    if len(xs) == 1:
        return fmt % xs[0]
    return (fmt + " (" + fmt + "-" + fmt + ")") % (med(xs), min(xs), max(xs))


# ---- tools ---------------------------------------------------------------

def find_lib(name):
    for d in LIBDIRS:
        p = os.path.join(d, name)
        if os.path.exists(p):
            return p
    return None


def probe_tools():
    """{tool: None if usable, else why not}."""
    why = {}
    why["go"] = None if shutil.which("go") else "go (golang-go) not installed"
    why["gperf"] = None if find_lib("libprofiler.so") else \
        "libprofiler.so not found (google-perftools / libgoogle-perftools-dev)"
    why["tcmalloc"] = None if find_lib("libtcmalloc.so") else \
        "libtcmalloc.so not found (libgoogle-perftools-dev)"
    why["heaptrack"] = None if shutil.which("heaptrack") else "heaptrack not installed"
    why["valgrind"] = None if shutil.which("valgrind") else "valgrind not installed"
    why["perf"] = "perf not installed"
    if shutil.which("perf"):
        d = tempfile.mkdtemp(prefix="pyroshim-bench-perf-")
        try:
            p = subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-o",
                                os.path.join(d, "p.data"), "--", "true"],
                               capture_output=True, text=True, timeout=60)
            why["perf"] = None if p.returncode == 0 else \
                "perf record -e cpu-clock fails here: " + (p.stderr.strip().splitlines() or ["?"])[-1]
        finally:
            shutil.rmtree(d, ignore_errors=True)
    for so in (SHIM, SHIM_BENCH):
        if not os.path.exists(so):
            raise SystemExit("bench: %s is missing; run make bench" % so)
    return why


# ---- profile readers -----------------------------------------------------

def pprof_raw(path, binary=None):
    """Decode a pprof (or legacy gperftools) profile with go tool pprof
    -raw: (sample type names, [(values, frames leaf first)])."""
    env = dict(os.environ, PPROF_TMPDIR=tempfile.gettempdir(),
               HOME=os.environ.get("HOME", "/tmp"))
    argv = ["go", "tool", "pprof", "-raw"]
    argv += [binary, path] if binary else ["-symbolize=none", path]
    p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    if p.returncode != 0:
        raise RuntimeError("go tool pprof failed on %s: %s" % (path, p.stderr))
    types, raw, locs, section = [], [], {}, None
    for line in p.stdout.splitlines():
        if line.startswith("Samples:"):
            section = "samples"
        elif line.startswith("Locations"):
            section = "locations"
        elif line.startswith("Mappings"):
            section = None
        elif section == "samples":
            m = re.match(r"\s*([-\d\s]+):\s*([\d\s]*)$", line)
            if m:
                raw.append(([int(v) for v in m.group(1).split()],
                            [int(x) for x in m.group(2).split()]))
            elif not types and line.strip() and ":" not in line:
                types = [t.split("/")[0] for t in line.split()]
        elif section == "locations":
            m = re.match(r"\s*(\d+):\s*0x[0-9a-f]+\s+M=\d+\s+(\S+)", line)
            if m:
                locs[int(m.group(1))] = m.group(2)
    return types, [(v, [locs.get(i, "?") for i in ids]) for v, ids in raw]


def cum_by_function(samples, index, names):
    """Cumulative value of sample index `index` for each of `names`, and the
    profile's total."""
    cum = {n: 0 for n in names}
    total = 0
    for vals, frames in samples:
        total += vals[index]
        for n in names:
            if n in frames:
                cum[n] += vals[index]
    return cum, total


def perf_cum(data, names):
    """perf script call chains: cumulative ns per function, total ns and the
    sample count (each sample's period is cpu-clock nanoseconds)."""
    p = subprocess.run(["perf", "script", "-i", data, "-F", "period,ip,sym"],
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError("perf script: " + p.stderr[-500:])
    cum, total, n = {k: 0 for k in names}, 0, 0
    for block in p.stdout.split("\n\n"):
        lines = [l.strip() for l in block.strip().splitlines() if l.strip()]
        if not lines:
            continue
        period = int(lines[0].split()[0])
        syms = {l.split()[-1] for l in lines[1:]}
        n += 1
        total += period
        for k in names:
            if k in syms:
                cum[k] += period
    return cum, total, n


def ids_in(d, suffix):
    return [f for f in os.listdir(d) if f.endswith(suffix)] if os.path.isdir(d) else []


# ---- the sections ------------------------------------------------------

class Bench:
    def __init__(self, size, tools, out):
        self.s = SIZES[size]
        self.smoke = size == "smoke"
        self.tools = tools
        self.tmp = tempfile.mkdtemp(prefix="pyroshim-bench-")
        self.out = out
        self.lines = []
        self.data = {}

    def emit(self, line=""):
        print(line, flush=True)
        self.lines.append(line)

    def table(self, head, rows):
        self.emit("| " + " | ".join(head) + " |")
        self.emit("|" + "---|" * len(head))
        for r in rows:
            self.emit("| " + " | ".join(str(c) for c in r) + " |")
        self.emit()

    def fresh(self, name):
        d = os.path.join(self.tmp, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        return d

    def shim_env(self, d, rate=100, so=SHIM, extra=None):
        e = {"LD_PRELOAD": so, "PYROSCOPE_OUTPUT_DIR": d, "PYROSCOPE_SAMPLE_RATE": str(rate)}
        e.update(extra or {})
        return base_env(e)

    def gperf_env(self, d, rate=100):
        return base_env({"LD_PRELOAD": find_lib("libprofiler.so"),
                         "CPUPROFILE": os.path.join(d, "cpu.prof"),
                         "CPUPROFILE_FREQUENCY": str(rate)})

    # 1. CPU overhead ------------------------------------------------------
    def cpu_overhead(self):
        self.emit("## 1. CPU overhead: user+sys of `burn %d THREADS 30`, ratio to no profiler"
                  % self.s["burn_miters"])
        self.emit()
        configs = ["none", "shim@100", "shim@1000"]
        if not self.tools["gperf"]:
            configs += ["gperftools@100", "gperftools@1000"]
        rows = []
        for threads in (1, 2):
            argv = [os.path.join(BB, "burn"), str(self.s["burn_miters"]), str(threads), "30"]

            def make(c, r):
                d = self.fresh("ovh")
                if c == "none":
                    return run(argv, base_env())
                rate = int(c.split("@")[1])
                env = self.shim_env(d, rate) if c.startswith("shim") else self.gperf_env(d, rate)
                return run(argv, env)
            res = interleave(configs, self.s["rounds"], make)
            base = [x.cpu for x in res["none"]]
            for c in configs:
                cpu = [x.cpu for x in res[c]]
                # Ratio per round (each run against the baseline of its own
                # round), so that slow drift of the machine cancels.
                ratio = [100.0 * (a / b - 1) for a, b in zip(cpu, base)]
                rows.append([threads, c, span(cpu, "%.3f"),
                             "-" if c == "none" else span(ratio, "%+.2f")])
        if self.tools["gperf"]:
            rows.append(["-", "gperftools", "not measured: " + self.tools["gperf"], "-"])
        self.table(["threads", "profiler", "CPU s, median (min-max)", "overhead %, median (min-max)"], rows)
        self.data["cpu_overhead"] = rows

    # 2. per-sample cost ----------------------------------------------------
    def handler_cost(self):
        self.emit("## 2. Per-sample cost inside the SIGPROF handler (libpyroshim-bench.so)")
        self.emit()
        rows = []
        for depth, threads, rate in ((30, 1, 100), (30, 2, 100), (30, 1, 1000), (30, 2, 1000), (1, 1, 1000)):
            stats = []
            for _ in range(self.s["handler_runs"]):
                d = self.fresh("handler")
                r = run([os.path.join(BB, "burn"), str(self.s["handler_miters"]), str(threads), str(depth)],
                        self.shim_env(d, rate, SHIM_BENCH, {"PYROSCOPE_APPLICATION_NAME": "burn"}))
                f = ids_in(d, ".handler.txt")
                if len(f) != 1:
                    raise RuntimeError("no handler.txt from the bench build: %s" % os.listdir(d))
                kv = dict(l.split() for l in open(os.path.join(d, f[0])) if l.strip())
                kv = {k: int(v) for k, v in kv.items()}
                kv["inside_pct"] = 100.0 * kv["sum_ns"] / (r.cpu * 1e9)
                kv["per_cpu_s"] = kv["count"] / r.cpu
                stats.append(kv)
            rows.append([depth, threads, rate,
                         "%.0f" % med([k["per_cpu_s"] for k in stats]),
                         span([k["p50_ns"] / 1000 for k in stats], "%.1f"),
                         span([k["p99_ns"] / 1000 for k in stats], "%.1f"),
                         "%.0f" % (max(k["max_ns"] for k in stats) / 1000),
                         "%d, %.0f" % (sum(k.get("warm_count", 0) for k in stats),
                                       max(k.get("warm_max_ns", 0) for k in stats) / 1000),
                         span([k["inside_pct"] for k in stats], "%.2f")])
        self.table(["depth", "threads", "Hz asked", "samples per CPU-s", "p50 us", "p99 us",
                    "max us", "warm-up: samples, max us",
                    "handler time, % of CPU"], rows)
        self.data["handler"] = rows

    # 3a. CPU accuracy --------------------------------------------------------
    def cpu_accuracy(self):
        self.emit("## 3a. CPU accuracy: `cpu_split MS THREADS 25` (truth: each thread's own CPU clock)")
        self.emit()
        # The shim in both timer modes: per-thread timers (the default) and
        # one process-wide ITIMER_PROF, as gperftools uses.
        profs = ["shim", "shim-process"]
        for t, n in (("gperf", "gperftools"), ("perf", "perf")):
            if not self.tools[t]:
                profs.append(n)
        if self.tools["go"]:
            self.emit("not measured: " + self.tools["go"])
            return
        names = ["burn_alpha", "burn_beta"]
        split = os.path.join(PROG, "cpu_split")
        rows = []
        for threads in (1, 2, 4, 8):
            ms = self.s["split_ms"] if threads < 4 else self.s["split_ms4"] // (threads // 4)

            def make(p, r):
                d = self.fresh("acc")
                truth = os.path.join(d, "truth.json")
                argv = [split, str(ms), str(threads), "25", truth]
                if p.startswith("shim"):
                    timer = "process" if p == "shim-process" else "thread"
                    res = run(argv, self.shim_env(d, 100, extra={"PYROSCOPE_APPLICATION_NAME": "split",
                                                                 "PYROSCOPE_CPU_TIMER": timer}))
                    f = ids_in(d, ".cpu.pb.gz")
                    _, samples = pprof_raw(os.path.join(d, f[0]))
                    cum, total = cum_by_function(samples, 1, names)
                    n = sum(v[0] for v, _ in samples)
                elif p == "gperftools":
                    res = run(argv, self.gperf_env(d, 100))
                    _, samples = pprof_raw(os.path.join(d, "cpu.prof"), split)
                    cum, total = cum_by_function(samples, 1, names)
                    n = sum(v[0] for v, _ in samples)
                else:
                    data = os.path.join(d, "perf.data")
                    res = run(["perf", "record", "-q", "-e", "cpu-clock", "-c", "10000000", "-g",
                               "-o", data, "--"] + argv, base_env())
                    cum, total, n = perf_cum(data, names)
                t = json.load(open(truth))
                true_p = t["burn_alpha"] / (t["burn_alpha"] + t["burn_beta"])
                got = cum["burn_alpha"] + cum["burn_beta"]
                res.acc = dict(n=n, err_pts=100 * (cum["burn_alpha"] / got - true_p) if got else float("nan"),
                               total_vs_truth=100 * (total / (t["burn_alpha"] + t["burn_beta"]) - 1),
                               # perf's rusage includes perf itself: no
                               # comparison with the program's alone.
                               total_vs_rusage=None if p == "perf" else
                               100 * (total / 1e9 / res.cpu - 1))
                return res
            res = interleave(profs, self.s["split_reps"], make)
            for p in profs:
                a = [x.acc for x in res[p]]
                n = med([x["n"] for x in a])
                # One standard deviation of a share of 25 % measured from n
                # independent samples: the noise floor of any sampler.
                sd = 100 * (0.25 * 0.75 / max(n, 1)) ** 0.5
                rows.append([threads, p, "%.0f" % n, "%.1f" % sd,
                             ", ".join("%+.1f" % x["err_pts"] for x in a),
                             ", ".join("%+.1f" % x["total_vs_truth"] for x in a),
                             "n/a" if p == "perf" else
                             ", ".join("%+.1f" % x["total_vs_rusage"] for x in a)])
        for t, n in (("gperf", "gperftools"), ("perf", "perf")):
            if self.tools[t]:
                rows.append(["-", n, "not measured: " + self.tools[t], "", "", "", ""])
        self.table(["threads", "profiler", "samples", "1 sd, pts", "alpha share error, pts (each run)",
                    "total vs thread clocks, %", "total vs rusage, %"], rows)
        self.data["cpu_accuracy"] = rows

    # 3b. allocation accuracy ------------------------------------------------
    def alloc_accuracy(self):
        self.emit("## 3b. Allocation accuracy: per-site alloc_space of `alloc_sites %d` against exact counts"
                  % self.s["sites_mib"])
        self.emit()
        if self.tools["go"]:
            self.emit("not measured: " + self.tools["go"])
            return
        sites = ["site_large", "site_mixed", "site_small"]
        prog = os.path.join(BB, "alloc_sites")
        profs = ["shim"] + ([] if self.tools["tcmalloc"] else ["tcmalloc HEAPPROFILE"])
        reps = {"shim": self.s["sites_reps"], "tcmalloc HEAPPROFILE": 1}
        rows = []
        for p in profs:
            errs = {s: [] for s in sites}
            cpu = []
            for _ in range(reps[p]):
                d = self.fresh("sites")
                truth = os.path.join(d, "truth.json")
                argv = [prog, str(self.s["sites_mib"]), truth]
                if p == "shim":
                    r = run(argv, self.shim_env(d, extra={"PYROSCOPE_APPLICATION_NAME": "sites"}))
                    _, samples = pprof_raw(os.path.join(d, ids_in(d, ".alloc.pb.gz")[0]))
                else:
                    r = run(argv, base_env({"LD_PRELOAD": find_lib("libtcmalloc.so"),
                                            "HEAPPROFILE": os.path.join(d, "heap")}))
                    last = sorted(ids_in(d, ".heap"))[-1]
                    _, samples = pprof_raw(os.path.join(d, last), prog)
                cum, _ = cum_by_function(samples, 1, sites)  # alloc_space
                t = json.load(open(truth))
                for s in sites:
                    errs[s].append(100 * (cum[s] / t[s] - 1))
                cpu.append(r.cpu)
            rows.append([p, len(cpu)] + [", ".join("%+.1f" % e for e in errs[s]) for s in sites]
                        + ["%.2f" % med(cpu)])
        if self.tools["tcmalloc"]:
            rows.append(["tcmalloc HEAPPROFILE", "not measured: " + self.tools["tcmalloc"], "", "", "", ""])
        self.table(["profiler", "runs", "site_large err %", "site_mixed err %", "site_small err %",
                    "CPU s"], rows)
        self.data["alloc_accuracy"] = rows

    # 4. allocation fast path and malloc-heavy loop ------------------------------
    # The allocation configurations of section 4, by name: environment for
    # a run whose profiles go to directory d.
    def alloc_envs(self, d):
        return {"none": base_env(),
                "bare interposer": base_env({"LD_PRELOAD": BARE}),
                "idle thread only": base_env({"LD_PRELOAD": IDLE}),
                "shim, alloc off": self.shim_env(d, extra={"PYROSCOPE_PROFILING_ALLOC_ENABLED": "false"}),
                "shim (default)": self.shim_env(d),
                # The uploader's source-line look-ups (a fixed cost per
                # process, in the helper) apart from the allocation path.
                "shim (default), source lines off": self.shim_env(d, extra={"PYROSCOPE_DWARF_MEMORY": "0"})}

    def alloc_fast_path(self):
        n = self.s["pairs"]
        self.emit("## 4a. Allocation fast path: `malloc_loop pairs %d` (malloc(32)/free), ns per pair" % n)
        self.emit()
        prog = os.path.join(BB, "malloc_loop")
        configs = ["none", "bare interposer", "idle thread only", "shim (default)", "shim, alloc off"]

        def make(c, r):
            d = self.fresh("pairs")
            res = run([prog, "pairs", str(n)], self.alloc_envs(d)[c])
            res.ns = float(res.out.split()[1])
            return res
        res = interleave(configs, self.s["pair_rounds"], make)
        base = [x.ns for x in res["none"]]
        rows = []
        for c in configs:
            ns = [x.ns for x in res[c]]
            added = [a - b for a, b in zip(ns, base)]
            rows.append([c, span(ns, "%.2f"), "-" if c == "none" else span(added, "%+.2f")])
        self.table(["configuration", "ns per pair", "added ns per pair (same round)"], rows)
        self.data["fast_path"] = rows
        self.callgrind()
        self.per_call()
        self.per_call_callgrind()

    def cg_run(self, env, argv, toggle):
        """Instructions callgrind counts inside function `toggle` of argv:
        (all, the interposer's own), the latter being the self cost of the
        code of libpyroshim.so or of a bench interposer (OWN_OBJECTS)."""
        d = self.fresh("cg")
        out = os.path.join(d, "cg.out")
        run(["valgrind", "--tool=callgrind", "--toggle-collect=" + toggle,
             "--callgrind-out-file=" + out] + argv, env, timeout=900)
        total, own, ob, after_call = 0, 0, None, False
        names = {}
        # The file format: "ob=(id) name" names the object of the cost
        # lines that follow; the line after "calls=" is a call's inclusive
        # cost, not a self cost.
        for line in open(out):
            if line.startswith(("ob=", "cob=")):
                m = re.match(r"c?ob=\((\d+)\)(?: (.*))?", line.strip())
                if m and m.group(2):
                    names[m.group(1)] = m.group(2)
                if line.startswith("ob=") and m:
                    ob = names.get(m.group(1), "")
                continue
            if line.startswith("calls="):
                after_call = True
                continue
            if line[:1].isdigit() or line[:1] in "+-*":
                if after_call:
                    after_call = False
                    continue
                v = int(line.split()[-1])
                total += v
                if ob and any(o in ob for o in OWN_OBJECTS):
                    own += v
        return total, own

    def callgrind(self):
        n = self.s["cg_pairs"]
        self.emit("### 4b. callgrind: instructions per malloc/free pair (`pair_loop`, %d + %d pairs)"
                  % (n, n // 10 + 1))
        self.emit()
        if self.tools["valgrind"]:
            self.emit("not measured: " + self.tools["valgrind"])
            self.emit()
            return
        rows = []
        prog = os.path.join(BB, "malloc_loop")
        base = None
        for c in ("none", "bare interposer", "idle thread only", "shim, alloc off", "shim (default)"):
            env = self.alloc_envs(self.fresh("cgenv"))[c]
            if c.startswith("shim"):
                env["PYROSCOPE_PROFILING_CPU_ENABLED"] = "false"
            ir, own = self.cg_run(env, [prog, "pairs", str(n)], "pair_loop")
            per = ir / (n + n // 10 + 1)
            if base is None:
                base = per
            rows.append([c, "%.1f" % per, "-" if c == "none" else "%+.1f" % (per - base),
                         "%.1f" % (own / (n + n // 10 + 1))])
        self.table(["configuration (CPU profiling off)", "instructions per pair", "added",
                    "in the interposer's own code"], rows)
        self.data["callgrind"] = rows

    def per_call(self):
        n = self.s["calls"]
        self.emit("### 4e. Per call: `malloc_loop calls %d` (16 MiB live; malloc(32) and "
                  "calloc(1, 32) in batches of 4096, free of those blocks, "
                  "p = realloc(p, 1 + i %% 256)), ns per call" % n)
        self.emit()
        prog = os.path.join(BB, "malloc_loop")
        configs = ["none", "bare interposer", "shim, alloc off", "shim (default)"]
        fns = ["malloc", "calloc", "free", "realloc"]

        def make(c, r):
            d = self.fresh("calls")
            res = run([prog, "calls", str(n)], self.alloc_envs(d)[c])
            res.ns = {m.group(1): float(m.group(2))
                      for m in re.finditer(r"^ns_per_(\w+) ([0-9.]+)$", res.out, re.M)}
            return res
        res = interleave(configs, self.s["calls_rounds"], make)
        rows = []
        for c in configs:
            row = [c]
            for f in fns:
                ns = [x.ns[f] for x in res[c]]
                added = [a - b.ns[f] for a, b in zip(ns, res["none"])]
                row.append("%.2f" % min(ns) + ("" if c == "none" else " (%+.2f)" % med(added)))
            rows.append(row)
        self.table(["configuration"] + ["%s ns (added, median per round)" % f for f in fns], rows)
        self.data["per_call"] = rows

    def per_call_callgrind(self):
        n = self.s["cg_calls"]
        batch = (n // 4096 + 1) * 4096
        loops = [("malloc", "malloc_batch", batch), ("calloc", "calloc_batch", batch),
                 ("free", "free_batch", 2 * batch), ("realloc", "realloc_loop", n + n // 10 + 1)]
        self.emit("### 4f. callgrind per call: `malloc_loop calls %d`, instructions per call "
                  "(whole call / the interposer's own code)" % n)
        self.emit()
        if self.tools["valgrind"]:
            self.emit("not measured: " + self.tools["valgrind"])
            self.emit()
            return
        prog = os.path.join(BB, "malloc_loop")
        rows = []
        for c in ("none", "bare interposer", "shim, alloc off", "shim (default)"):
            env = self.alloc_envs(self.fresh("cgenv"))[c]
            if c.startswith("shim"):
                env["PYROSCOPE_PROFILING_CPU_ENABLED"] = "false"
            row = [c]
            for _, fn, calls in loops:
                ir, own = self.cg_run(env, [prog, "calls", str(n)], fn)
                row.append("%.1f / %.1f" % (ir / calls, own / calls))
            rows.append(row)
        self.table(["configuration (CPU profiling off)"] + [f for f, _, _ in loops], rows)
        self.data["per_call_callgrind"] = rows

    def malloc_heavy(self):
        n = self.s["mixed"]
        self.emit("## 4c. Malloc-heavy loop: `malloc_loop mixed %d` (4096 live blocks, 16..4096 B)" % n)
        self.emit()
        prog = os.path.join(BB, "malloc_loop")
        configs = ["none", "bare interposer", "idle thread only", "shim (default)"]
        if not self.tools["tcmalloc"]:
            configs += ["tcmalloc, no profiler", "tcmalloc HEAPPROFILE"]
        if not self.tools["heaptrack"]:
            configs += ["heaptrack"]

        def make(c, r):
            d = self.fresh("mixed")
            argv = [prog, "mixed", str(n)]
            if c == "none":
                return run(argv, base_env())
            if c == "shim (default)":
                return run(argv, self.shim_env(d))
            if c in ("idle thread only", "bare interposer"):
                return run(argv, self.alloc_envs(d)[c])
            if c == "heaptrack":
                return run(["heaptrack", "-o", os.path.join(d, "ht")] + argv, base_env(), timeout=900)
            env = {"LD_PRELOAD": find_lib("libtcmalloc.so")}
            if c == "tcmalloc HEAPPROFILE":
                env["HEAPPROFILE"] = os.path.join(d, "heap")
            return run(argv, base_env(env), timeout=900)
        res = interleave(configs, self.s["mixed_rounds"], make)
        base_cpu = [x.cpu for x in res["none"]]
        base_wall = [x.wall for x in res["none"]]
        rows = []
        for c in configs:
            cpu = [x.cpu for x in res[c]]
            wall = [x.wall for x in res[c]]
            rows.append([c, span(cpu, "%.3f"), span([a / b for a, b in zip(cpu, base_cpu)], "%.2f"),
                         span(wall, "%.3f"), span([a / b for a, b in zip(wall, base_wall)], "%.2f")])
        for t, name in (("tcmalloc", "tcmalloc"), ("heaptrack", "heaptrack")):
            if self.tools[t]:
                rows.append([name, "not measured: " + self.tools[t], "", "", ""])
        self.table(["configuration", "CPU s", "CPU x", "wall s", "wall x"], rows)
        self.data["malloc_heavy"] = rows

    # task-clock from `perf stat` counts the program and everything it
    # starts, the shim's helper process included (wait4 would miss it:
    # the helper is not the program's child).
    def task_clock_usable(self):
        return bool(shutil.which("perf")) and subprocess.run(
            ["perf", "stat", "-x,", "-e", "task-clock", "--", "true"],
            capture_output=True).returncode == 0

    def run_task_clock(self, argv, env, perf, cwd=None):
        """run(argv, env), its .cpu the task-clock of `perf stat` if perf
        is usable, else the wait4 rusage."""
        if not perf:
            return run(argv, env, cwd=cwd)
        res = run(["perf", "stat", "-x,", "-e", "task-clock", "--"] + argv, env, cwd=cwd)
        m = re.search(r"^([0-9.]+),msec,task-clock", res.err, re.M)
        if not m:
            raise RuntimeError("perf stat printed no task-clock: " + res.err[-500:])
        res.cpu = float(m.group(1)) / 1000
        return res

    def generator(self):
        n = self.s["gen_n"]
        self.emit("## 4d. Generator demo: `examples/generator %d out.json --seed 1`" % n)
        self.emit()
        configs = ["none", "bare interposer", "idle thread only", "shim, alloc off", "shim (default)",
                   "shim (default), source lines off"]
        if BEFORE:
            configs.append("before (default)")
        perf = self.task_clock_usable()

        def make(c, r):
            d = self.fresh("gen")
            env = base_env({"LD_PRELOAD": BEFORE, "PYROSCOPE_OUTPUT_DIR": d}) \
                if c == "before (default)" else self.alloc_envs(d)[c]
            return self.run_task_clock([GEN, str(n), os.path.join(d, "out.json"), "--seed", "1"],
                                       env, perf)
        res = interleave(configs, self.s["gen_rounds"], make)
        rows = cpu_rows(res, configs)
        rows.append(["bare interposer -> shim (default)", "",
                     span([100 * (a.cpu / b.cpu - 1) for a, b in
                           zip(res["shim (default)"], res["bare interposer"])], "%+.2f"),
                     "%+.2f" % (100 * (min(x.cpu for x in res["shim (default)"]) /
                                       min(x.cpu for x in res["bare interposer"]) - 1))])
        lo = "shim (default), source lines off"
        rows.append(["bare interposer -> " + lo, "",
                     span([100 * (a.cpu / b.cpu - 1) for a, b in
                           zip(res[lo], res["bare interposer"])], "%+.2f"),
                     "%+.2f" % (100 * (min(x.cpu for x in res[lo]) /
                                       min(x.cpu for x in res["bare interposer"]) - 1))])
        self.table(["configuration", ("task-clock s (program + helper)" if perf else
                                      "CPU s (wait4; perf stat unusable)"),
                    "slowdown %, per round", "slowdown %, min vs min"], rows)
        self.data["generator"] = rows

    # 5. start-up ----------------------------------------------------------------
    def startup(self):
        self.emit("## 5. Start-up: wall time of `/bin/true` (%d interleaved runs each)" % self.s["true_rounds"])
        self.emit()
        configs = ["none", "shim (local)"] + (["before (local)"] if BEFORE else [])
        if not self.tools["gperf"]:
            configs.append("gperftools")
        server = self.server_status()
        peer = None
        if server is None:
            peer = self.start_peer()
            configs.append("shim (server)")
        try:
            def env_for(c, d):
                if c == "none":
                    return base_env()
                if c == "shim (local)":
                    return self.shim_env(d)
                if c == "before (local)":
                    return base_env({"LD_PRELOAD": BEFORE, "PYROSCOPE_OUTPUT_DIR": d})
                if c == "shim (server)":
                    return base_env({"LD_PRELOAD": SHIM, "PYROSCOPE_SERVER_ADDRESS": peer[1]})
                return self.gperf_env(d)
            d = self.fresh("true")
            envs = {c: env_for(c, d) for c in configs}
            res = interleave(configs, self.s["true_rounds"], lambda c, r: run(["/bin/true"], envs[c]))
            base = [x.wall * 1e3 for x in res["none"]]
            rows = []
            for c in configs:
                w = [x.wall * 1e3 for x in res[c]]
                rows.append([c, "%.3f" % min(w), "%.3f" % med(w),
                             "-" if c == "none" else "%+.3f" % (min(w) - min(base)),
                             "-" if c == "none" else "%+.3f" % (med(w) - med(base))])
            if server is not None:
                rows.append(["shim (server)", "not measured yet: " + server, "", "", ""])
            if self.tools["gperf"]:
                rows.append(["gperftools", "not measured: " + self.tools["gperf"], "", "", ""])
            self.table(["configuration", "min ms", "median ms", "added ms (min)", "added ms (median)"], rows)
            self.data["startup_true"] = rows

            k = self.s["shell_cmds"]
            self.emit("### Shell script running %d short commands (`/bin/true` in a loop), every child inheriting the profiler" % k)
            self.emit()
            script = 'i=0; while [ $i -lt %d ]; do /bin/true; i=$((i+1)); done' % k
            res = interleave(configs, self.s["shell_rounds"], lambda c, r: run(["sh", "-c", script], envs[c]))
            base = [x.wall for x in res["none"]]
            rows = []
            for c in configs:
                w = [x.wall for x in res[c]]
                rows.append([c, span(w), "-" if c == "none" else
                             span([1e3 * (a - b) / k for a, b in zip(w, base)], "%+.3f")])
            self.table(["configuration", "wall s", "added ms per command"], rows)
            self.data["startup_shell"] = rows
        finally:
            if peer:
                peer[0].terminate()
                try:
                    peer[0].wait(timeout=10)
                except subprocess.TimeoutExpired:
                    peer[0].kill()
                    peer[0].wait(timeout=10)

    def server_status(self):
        """None when PYROSCOPE_SERVER_ADDRESS uploads to the loopback peer,
        else why not."""
        man = open(os.path.join(ROOT, "man", "pyroshim.7")).read()
        if "PYROSCOPE_SERVER_ADDRESS" not in man or not os.path.exists(PEER):
            return "no PYROSCOPE_SERVER_ADDRESS or no test peer"
        peer = self.start_peer()
        try:
            run([os.path.join(PROG, "spin"), "300"],
                base_env({"LD_PRELOAD": SHIM, "PYROSCOPE_SERVER_ADDRESS": peer[1],
                          "PYROSCOPE_SAMPLE_RATE": "250"}), timeout=60)
            got = [f for f in os.listdir(peer[2]) if f.endswith(".json")]
            return None if got else "the shim sent nothing to the loopback peer (uploader not wired in yet)"
        except RuntimeError as e:
            return "a profiled run with a server failed: %s" % str(e).splitlines()[0]
        finally:
            peer[0].terminate()
            peer[0].wait(timeout=10)

    def start_peer(self):
        d = self.fresh("peer")
        port_file = os.path.join(d, "port")
        p = subprocess.Popen([sys.executable, PEER, "--dir", d, "--port-file", port_file,
                              "--max-seconds", "900"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while not os.path.exists(port_file):
            if time.monotonic() > deadline or p.poll() is not None:
                p.kill()
                raise RuntimeError("the loopback peer did not start")
            time.sleep(0.05)
        port = open(port_file).read().strip()
        return p, "http://127.0.0.1:%s" % port, d

    # 6. memory -------------------------------------------------------------------
    def memory(self):
        self.emit("## 6. Peak RSS (ru_maxrss) added")
        self.emit()
        rows = []
        for label, argv in (("small: `spin 300`", [os.path.join(PROG, "spin"), "300"]),
                            ("`bigheap %d` (live heap)" % self.s["heap_mib"],
                             [os.path.join(BB, "bigheap"), str(self.s["heap_mib"])])):
            configs = ["none", "shim (default)"] + (["before"] if BEFORE else [])

            def make(c, r):
                # maxrss runs without the profiler and execs `env VAR=..
                # PROGRAM`, so only the measured program carries it.
                d = self.fresh("rss")
                so = BEFORE if c == "before" else SHIM
                pre = [] if c == "none" else ["LD_PRELOAD=" + so, "PYROSCOPE_OUTPUT_DIR=" + d]
                res = run([os.path.join(BB, "maxrss"), "env"] + pre + argv, base_env())
                res.rss_mib = int(res.err.split("maxrss_kb")[1].split()[0]) / 1024
                return res
            res = interleave(configs, self.s["rss_rounds"], make)
            base = [x.rss_mib for x in res["none"]]
            shim = [x.rss_mib for x in res["shim (default)"]]
            row = [label, span(base, "%.1f"), span(shim, "%.1f"),
                   span([a - b for a, b in zip(shim, base)], "%+.1f")]
            if BEFORE:
                old = [x.rss_mib for x in res["before"]]
                row.append(span([a - b for a, b in zip(old, base)], "%+.1f"))
            rows.append(row)
        self.table(["program", "none MiB", "shim MiB", "added MiB"] +
                   (["added MiB, before"] if BEFORE else []), rows)
        self.data["memory"] = rows

    def finish(self):
        if self.out:
            with open(self.out, "w") as f:
                f.write("\n".join(self.lines) + "\n")
            with open(os.path.splitext(self.out)[0] + ".json", "w") as f:
                json.dump(self.data, f, indent=1)
        shutil.rmtree(self.tmp, ignore_errors=True)


def _upload(self):
    """Bytes on the wire and CPU per upload interval for the generator demo,
    against the loopback peer that applies Pyroscope's rules."""
    self.emit("## 7. Upload: `generator N out.json --seed 1`, interval %s, loopback peer"
              % self.s.get("upload_interval", "200ms"))
    self.emit()
    n = "2000" if self.smoke else "200000"
    gen = os.path.join(ROOT, "examples", "generator")
    rounds = 1 if self.smoke else 3
    rows, cpu_l, cpu_s, reqs, body = [], [], [], [], []
    for r in range(rounds):
        for mode in ("local", "server"):
            d = self.fresh("upl")
            extra = {"PYROSCOPE_UPLOAD_INTERVAL": "200ms", "PYROSCOPE_APPLICATION_NAME": "generator"}
            if mode == "server":
                pdir = os.path.join(d, "peer")
                os.makedirs(pdir)
                portf = os.path.join(d, "port")
                peer = subprocess.Popen([sys.executable, os.path.join(ROOT, "test", "peer", "pyroscope_peer.py"),
                                         "--dir", pdir, "--port-file", portf, "--max-seconds", "120"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for _ in range(500):
                    if os.path.exists(portf) and open(portf).read().strip():
                        break
                    time.sleep(0.01)
                extra["PYROSCOPE_SERVER_ADDRESS"] = "http://127.0.0.1:%s" % open(portf).read().strip()
            env = self.shim_env(d, 100, extra=extra)
            if mode == "server":
                env.pop("PYROSCOPE_OUTPUT_DIR", None)
            res = run([gen, n, os.path.join(d, "out.json"), "--seed", "1"], env)
            if mode == "local":
                cpu_l.append(res.cpu)
                continue
            peer.terminate()
            peer.wait(timeout=30)
            cpu_s.append(res.cpu)
            metas = [json.load(open(os.path.join(pdir, f))) for f in os.listdir(pdir) if f.endswith(".json")]
            profiles = [m for m in metas if m.get("path", "").endswith("/ingest")]
            reqs.append(len(profiles))
            body.append(sum(m.get("body_len", 0) for m in profiles))
    intervals = [max(1, q // 2) for q in reqs]  # a CPU and an alloc request per interval
    per_int_bytes = [b / i for b, i in zip(body, intervals)]
    per_int_cpu = [1e3 * (s_ - l) / i for s_, l, i in zip(cpu_s, cpu_l, intervals)]
    rows.append(["requests per run", span(reqs, "%.0f")])
    rows.append(["bytes per interval (CPU + alloc request bodies, gzipped pprof)", span(per_int_bytes, "%.0f")])
    rows.append(["CPU ms per interval (server run minus local-files run)", span(per_int_cpu, "%.2f")])
    rows.append(["CPU s, local files / server", "%s / %s" % (span(cpu_l), span(cpu_s))])
    self.table(["what", "median (min-max)"], rows)
    self.data["upload"] = rows


Bench.upload = _upload


def machine():
    """nproc, CPU model, kernel, glibc: the figures depend on all four."""
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return "%d cores, %s, kernel %s, glibc %s" % (
        os.cpu_count(), model, os.uname().release, os.confstr("CS_GNU_LIBC_VERSION"))


def tree():
    """Which code was measured: the commit, whether the tree had local
    changes, and the libraries' hashes (others may rebuild them meanwhile)."""
    import hashlib
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=30).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        head, dirty = "?", ""
    sums = ", ".join("%s %s" % (os.path.basename(p), hashlib.sha256(open(p, "rb").read()).hexdigest()[:12])
                     for p in (SHIM, SHIM_BENCH))
    return "commit %s%s; %s" % (head, " + local changes" if dirty else "", sums)


def _go(self):
    """A Go program (test/prog/gogen) at 100 Hz: no profiler, the shim, and
    Go's own runtime/pprof (100 Hz too), interleaved."""
    gogen = os.path.join(PROG, "gogen")
    self.emit("## 8. Go: `gogen N` (two goroutines of JSON events), CPU s, 100 Hz")
    self.emit()
    if not os.path.exists(gogen):
        self.emit("not measured: build/prog/gogen missing (no Go toolchain)")
        self.emit()
        return
    n = "2000" if self.smoke else "100000"
    configs = ["none", "shim", "runtime/pprof"]

    def make(c, r):
        d = self.fresh("go")
        if c == "runtime/pprof":
            return run([gogen, n, os.path.join(d, "go.prof")], base_env())
        return run([gogen, n], self.shim_env(d) if c == "shim" else base_env())
    res = interleave(configs, 1 if self.smoke else 7, make)
    rows = cpu_rows(res, configs)
    self.table(["configuration", "CPU s", "overhead %, per round", "overhead %, min vs min"], rows)
    self.data["go"] = rows


Bench.go = _go

PY_WORK = """
import json, random, re, sys, time
random.seed(1)
t = time.process_time()
while time.process_time() - t < float(sys.argv[1]):
    d = [{"k%d" % i: random.random(), "s": "x" * (i % 50)} for i in range(200)]
    s = json.dumps(d)
    json.loads(s)
    re.findall(r"k(\\d+)", s)
    sorted(s)
"""


def uploader_cost(log, within=10.0):
    """(CPU ms, peak RSS KiB) of the helper process, from the debug line
    it logs as it ends, just after the program (waits up to `within` s)."""
    deadline = time.monotonic() + within
    while True:
        m = None
        if os.path.exists(log):
            m = re.search(r"helper used (\d+) ms of CPU, peak RSS (\d+) KiB", open(log).read())
        if m:
            return int(m.group(1)), int(m.group(2))
        if time.monotonic() > deadline:
            return None, None
        time.sleep(0.05)


def _source_lines(self):
    """What source lines cost the uploader (CPU, peak RSS) on a large
    binary with full debug information, and what they add to the pprof
    files, next to function-level profiles (PYROSCOPE_DWARF_MEMORY=0)."""
    self.emit("## 10. Source lines: the uploader with DWARF line tables vs function names")
    self.emit()
    py = shutil.which("python3.11-dbg")
    configs = {"function names (PYROSCOPE_DWARF_MEMORY=0)": {"PYROSCOPE_DWARF_MEMORY": "0"},
               "source lines (default)": {}}
    rows = []
    secs = "0.3" if self.smoke else "5"
    for name, extra in configs.items():
        if not py:
            rows.append([name, "not measured: python3.11-dbg missing", "", "", ""])
            continue
        cost, rss, size, cpu = [], [], [], []
        for r in range(1 if self.smoke else 3):
            d = self.fresh("lines")
            log = os.path.join(d, "log")
            env = self.shim_env(d, 100, extra=dict(extra, PYROSCOPE_LOG_LEVEL="debug",
                                                   PYROSCOPE_LOG_FILE=log,
                                                   PYROSCOPE_APPLICATION_NAME="py"))
            res = run([py, "-c", PY_WORK, secs], env)
            c, m = uploader_cost(log)
            files = [f for f in os.listdir(d) if f.endswith(".cpu.pb.gz")]
            if c is None or not files:
                continue
            cost.append(c)
            rss.append(m / 1024.0)
            size.append(os.path.getsize(os.path.join(d, files[0])))
            cpu.append(res.cpu)
        if not cost:
            rows.append([name, "not measured: the uploader logged no cost line", "", "", ""])
            continue
        rows.append([name, span(cost, "%.0f"), span(rss, "%.1f"), span(size, "%.0f"), span(cpu, "%.2f")])
    self.emit("`python3.11-dbg` (CPython 3.11 with full DWARF, LTO) running a JSON/regex/sort loop for "
              "%s CPU-seconds at 100 Hz; the uploader's own CPU time and peak RSS come from its "
              "debug log line at exit (it is a separate process)." % secs)
    self.emit()
    self.table(["profiles", "uploader CPU ms", "uploader peak RSS MiB", "cpu.pb.gz bytes",
                "program CPU s"], rows)
    gen = os.path.join(ROOT, "examples", "generator")
    n = "2000" if self.smoke else "200000"
    grows = []
    for name, extra in configs.items():
        d = self.fresh("glines")
        run([gen, n, os.path.join(d, "out.json"), "--seed", "1"], self.shim_env(d, 100, extra=extra))
        sz = {k: sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(k))
              for k in (".cpu.pb.gz", ".alloc.pb.gz")}
        grows.append([name, str(sz[".cpu.pb.gz"]), str(sz[".alloc.pb.gz"])])
    self.emit("What the detail adds to the pprof files (the same bytes go to Pyroscope): "
              "`examples/generator %s`, whole-run files:" % n)
    self.emit()
    self.table(["profiles", "cpu.pb.gz bytes", "alloc.pb.gz bytes"], grows)
    self.data["lines"] = rows + grows


Bench.source_lines = _source_lines

# PYROSHIM_BEFORE_BENCH=/path/to/an/older/libpyroshim-bench.so adds its Go
# rows to the handler section below, measured in the same rounds.
BEFORE_BENCH = os.environ.get("PYROSHIM_BEFORE_BENCH", "")


def _mean_depth(d):
    """Mean stack depth of the samples in d's folded CPU file (weighted by
    CPU time), or None."""
    f = ids_in(d, ".cpu.folded")
    if len(f) != 1:
        return None
    tot = frames = 0
    for line in open(os.path.join(d, f[0])):
        st, _, v = line.rstrip("\n").rpartition(" ")
        if st and v.isdigit():
            tot += int(v)
            frames += int(v) * len(st.split(";"))
    return frames / tot if tot else None


def _go_handler(self):
    """The handler's cost per sample on Go code next to C code, one run,
    interleaved rounds (libpyroshim-bench.so; the Go programs end by a raw
    exit_group, so their timings are written by the uploader's helper)."""
    self.emit("## 9b. Per-sample handler cost: Go code next to C code (libpyroshim-bench.so, 1000 Hz asked)")
    self.emit()
    gogen, goleaf = os.path.join(PROG, "gogen"), os.path.join(PROG, "goleaf")
    if not (os.path.exists(gogen) and os.path.exists(goleaf)):
        self.emit("not measured: build/prog/gogen or goleaf missing (no Go toolchain)")
        self.emit()
        return
    m = str(self.s["handler_miters"])
    progs = {
        "C: burn, depth 10": [os.path.join(BB, "burn"), m, "1", "10"],
        "C: burn, depth 30": [os.path.join(BB, "burn"), m, "1", "30"],
        "Go: gogen (2 goroutines, JSON)": [gogen, "2000" if self.smoke else "300000"],
        "Go: goleaf (leaf, bad BP, cgo)": [goleaf, "200000" if self.smoke else "20000000"],
    }
    libs = [("now", SHIM_BENCH)]
    if BEFORE_BENCH:
        libs.append(("before", BEFORE_BENCH))
    configs = [(p, lib) for p in progs for lib in libs if lib[0] == "now" or p.startswith("Go")]
    names = ["%s | %s" % (p, lib[0]) for p, lib in configs]
    stats = {n: [] for n in names}

    def make(name, r):
        p, lib = configs[names.index(name)]
        d = self.fresh("gohandler")
        res = run(progs[p], self.shim_env(d, 1000, lib[1], {"PYROSCOPE_APPLICATION_NAME": "prog"}))
        for _ in range(50):     # the helper writes after the program's end
            if ids_in(d, ".handler.txt"):
                break
            time.sleep(0.1)
        f = ids_in(d, ".handler.txt")
        if len(f) != 1:
            raise RuntimeError("no handler.txt from %s: %s" % (name, os.listdir(d)))
        time.sleep(0.3)         # and the profile just before it
        kv = {k: int(v) for k, v in (l.split() for l in open(os.path.join(d, f[0])) if l.strip())}
        kv["inside_pct"] = 100.0 * kv["sum_ns"] / (res.cpu * 1e9)
        kv["depth"] = _mean_depth(d)
        stats[name].append(kv)
        return res
    interleave(names, 1 if self.smoke else 3, make)
    rows = []
    for name in names:
        k = stats[name]
        depth = [x["depth"] for x in k if x["depth"]]
        rows.append(name.split(" | ") + [
            "%d" % sum(x["count"] for x in k),
            "%.1f" % med(depth) if depth else "-",
            span([x["p50_ns"] / 1000 for x in k], "%.1f"),
            span([x["p99_ns"] / 1000 for x in k], "%.1f"),
            "%.0f" % (max(x["max_ns"] for x in k) / 1000),
            span([x["inside_pct"] for x in k], "%.2f")])
    self.table(["program", "library", "samples", "mean depth", "p50 us", "p99 us", "max us",
                "handler time, % of CPU"], rows)
    self.data["go_handler"] = rows


Bench.go_handler = _go_handler

# 13. Off-CPU time: the block and mutex profiles' cost (issue 23) ---------------
# bench/wait_loop.c: a process with an idle thread from its start, running
# `mutex N` (free mutex lock/unlock pairs), `read N` (write(2) by raw system
# call, then one-byte read(): a read that never blocks, alone interposed),
# `pipe N` (write() then read(), both interposed) or `pingpong N` (two
# threads bouncing a byte: every read blocks a few us).
WAIT_LOOP = os.path.join(BB, "wait_loop")
WAIT_CONFIGS = ["none", "bare interposer", "slot prototype", "shim, waits off", "shim (default)"]
WAITS_OFF = {"PYROSCOPE_PROFILING_BLOCK_ENABLED": "false",
             "PYROSCOPE_PROFILING_MUTEX_ENABLED": "false"}


def _wait_envs(self, d):
    return {"none": base_env(),
            "bare interposer": base_env({"LD_PRELOAD": BARE_WAIT}),
            "slot prototype": base_env({"LD_PRELOAD": SLOT_WAIT}),
            "shim, waits off": self.shim_env(d, extra=WAITS_OFF),
            "shim (default)": self.shim_env(d)}


def _per_round(res, a, b, f):
    """Median (min-max) over rounds of f(a's result, b's result)."""
    return [f(x, y) for x, y in zip(res[a], res[b])]


def _wait_cost(self):
    self.emit("## 13. Off-CPU time: block and mutex profiles (issue 23)")
    self.emit()
    self.wait_callgrind()
    self.wait_time()
    self.wait_slot_helper()
    self.wait_pingpong()
    self.wait_generator()


def _wait_callgrind(self):
    # Iterations main runs for a loop length n: the warm-up n/10+1, then n.
    def iters(n):
        return n + n // 10 + 1
    loops = [("mutex", "mutex", self.s["cg_wait_mutex"]),
             ("read", "read", self.s["cg_wait_pipe"]),
             ("write+read", "pipe", self.s["cg_wait_pipe"])]
    self.emit("### 13a. callgrind: instructions per iteration inside `main` "
              "(`--toggle-collect=main`), slope between `wait_loop LOOP N` and `2N` "
              "(N = %d for mutex, %d for the pipe loops)"
              % (self.s["cg_wait_mutex"], self.s["cg_wait_pipe"]))
    self.emit()
    if self.tools["valgrind"]:
        self.emit("not measured: " + self.tools["valgrind"])
        self.emit()
        return
    # Under valgrind every call takes some 50 times longer, so at the
    # default rate (1ms) far more short waits are kept than natively.  Two
    # more rows split the shim's count: its fast path alone (rate 10s: the
    # countdown is next to never due) and every wait kept (rate 1us).
    rates = {"shim (default), rate 10s: fast path": "10s",
             "shim (default), rate 1us: every wait kept": "1us"}
    configs = WAIT_CONFIGS + list(rates)
    if self.smoke:  # every code path once, in a few seconds
        configs, loops = ["bare interposer", "shim (default)"], loops[:2]
    per = {}
    for c in configs:
        env = self.wait_envs(self.fresh("cgenv"))["shim (default)" if c in rates else c]
        if c in rates:
            env["PYROSCOPE_BLOCK_RATE"] = rates[c]
        if c.startswith("shim"):
            env["PYROSCOPE_PROFILING_CPU_ENABLED"] = "false"
        for name, mode, n in loops:
            a = self.cg_run(env, [WAIT_LOOP, mode, str(n)], "main")
            b = self.cg_run(env, [WAIT_LOOP, mode, str(2 * n)], "main")
            k = iters(2 * n) - iters(n)
            per[c, name] = ((b[0] - a[0]) / k, (b[1] - a[1]) / k)
    rows = []
    for c in configs:
        row = [c]
        for name, _, _ in loops:
            ir, own = per[c, name]
            over = "" if c == "bare interposer" or ("bare interposer", name) not in per else \
                " (%+.1f)" % (ir - per["bare interposer", name][0])
            row.append("%.1f%s / %.1f" % (ir, over, own))
        rows.append(row)
    self.table(["configuration (CPU profiling off)"] +
               ["%s: all (over bare) / own code" % name for name, _, _ in loops], rows)
    self.data["wait_callgrind"] = {"%s | %s" % k: v for k, v in per.items()}
    for c in ("shim (default)", "shim (default), rate 10s: fast path"):
        if (c, "mutex") in per and ("bare interposer", "mutex") in per:
            m = per[c, "mutex"][0] - per["bare interposer", "mutex"][0]
            r = per[c, "read"][0] - per["bare interposer", "read"][0]
            self.emit("Targets, %s: mutex lock/unlock pair %+.1f instructions over the bare "
                      "interposer (target <= 6: %s); one-byte read %+.1f (target <= 60: %s)."
                      % (c, m, "met" if m <= 6 else "MISSED", r, "met" if r <= 60 else "MISSED"))
            self.emit()


def _wait_time(self):
    loops = [("mutex", self.s["wait_mutex"]), ("read", self.s["wait_pipe"]),
             ("pipe", self.s["wait_pipe"])]
    self.emit("### 13b. Time: `wait_loop mutex %d`, `wait_loop read %d`, `wait_loop pipe %d`, "
              "%d interleaved rounds; ns per iteration from the thread's CPU clock "
              "(system time included)"
              % (loops[0][1], loops[1][1], loops[2][1], self.s["wait_rounds"]))
    self.emit()
    names = ["%s | %s" % (c, m) for m, _ in loops for c in WAIT_CONFIGS]

    def make(name, r):
        c, m = name.split(" | ")
        res = run([WAIT_LOOP, m, str(dict(loops)[m])], self.wait_envs(self.fresh("wl"))[c])
        res.ns = float(res.out.split()[1])
        return res
    res = interleave(names, self.s["wait_rounds"], make)
    rows = []
    for m, _ in loops:
        base, bare = "none | " + m, "bare interposer | " + m
        for c in WAIT_CONFIGS:
            k = "%s | %s" % (c, m)
            rows.append([m, c, span([x.ns for x in res[k]], "%.2f"),
                         "-" if c == "none" else
                         span(_per_round(res, k, base, lambda a, b: a.ns - b.ns), "%+.2f"),
                         "-" if c == "none" else
                         span(_per_round(res, k, base, lambda a, b: a.ns / b.ns), "%.3f"),
                         "-" if c in ("none", "bare interposer") else
                         span(_per_round(res, k, bare, lambda a, b: a.ns / b.ns), "%.3f")])
    self.table(["loop", "configuration", "ns per iteration", "added ns (per round)",
                "ratio to none (per round)", "ratio to bare (per round)"], rows)
    self.data["wait_time"] = rows


def _wait_pingpong(self):
    n = self.s["wait_pingpong"]
    # On one CPU: both threads then take turns, every read blocks, and a
    # round trip is two context switches.  On two CPUs a round trip is
    # either that or two cross-CPU wake-ups (8x slower on this VM), at
    # random, which no round-to-round ratio survives.
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    self.emit("### 13d. On by default? Syscall-heavy loop: `%swait_loop pingpong %d` (two threads bounce a byte "
              "over two pipes; every read blocks), %d interleaved rounds"
              % ("taskset -c 0 " if pin else "", n, self.s["wait_rounds"]))
    self.emit()

    def make(c, r):
        res = run(pin + [WAIT_LOOP, "pingpong", str(n)], self.wait_envs(self.fresh("pp"))[c])
        res.ns = float(res.out.split()[1])
        return res
    res = interleave(WAIT_CONFIGS, self.s["wait_rounds"], make)
    rows = []
    off = "shim, waits off"
    for c in WAIT_CONFIGS:
        rows.append([c, span([x.ns / 1000 for x in res[c]], "%.2f"),
                     span([x.cpu for x in res[c]], "%.3f"),
                     "-" if c == "none" else span(_per_round(res, c, "none", lambda a, b: a.cpu / b.cpu), "%.3f"),
                     "-" if c != "shim (default)" else
                     span(_per_round(res, c, off, lambda a, b: a.cpu / b.cpu), "%.3f"),
                     "-" if c != "shim (default)" else
                     span(_per_round(res, c, off, lambda a, b: a.ns / b.ns), "%.3f")])
    self.table(["configuration", "us per round trip (wall)", "CPU s (wait4)", "CPU ratio to none",
                "CPU ratio to waits off", "wall ratio to waits off"], rows)
    self.data["wait_pingpong"] = rows


def _wait_slot_helper(self):
    secs = self.s["slot_sleep"]
    self.emit("### 13c. The slot design's helper: CPU of `sleep %g` under the slot prototype, "
              "by tick rate (SLOT_TICK_HZ), %d interleaved rounds" % (secs, self.s["slot_rounds"]))
    self.emit()
    # Against 1 Hz, so that the helper thread's creation cancels.
    configs = ["none", "0", "1", "100", "1000", "10000"]

    def make(c, r):
        env = base_env() if c == "none" else base_env({"LD_PRELOAD": SLOT_WAIT, "SLOT_TICK_HZ": c})
        return run(["sleep", "%g" % secs], env)
    res = interleave(configs, self.s["slot_rounds"], make)
    rows = []
    for c in configs:
        cpu = [x.cpu * 1e3 for x in res[c]]
        added = _per_round(res, c, "1", lambda a, b: (a.cpu - b.cpu) * 1e3) \
            if c not in ("none", "0", "1") else None
        rows.append(["none (no preload)" if c == "none" else "slot prototype, %s Hz" % c,
                     span(cpu, "%.2f"), span(added, "%+.2f") if added else "-",
                     "%.2f" % (1e3 * med(added) / ((int(c) - 1) * secs)) if added else "-"])
    self.table(["configuration", "CPU ms", "added ms against 1 Hz (per round)",
                "us per tick (median)"], rows)
    self.data["wait_slot_helper"] = rows


def _wait_generator(self):
    n = self.s["gen_n"]
    self.emit("### 13d. On by default? `examples/generator %d out.json --seed 1`, "
              "%d interleaved rounds" % (n, self.s["wait_gen_rounds"]))
    self.emit()
    configs = ["none", "shim, waits off", "shim (default)"]
    perf = self.task_clock_usable()

    def make(c, r):
        d = self.fresh("gen")
        return self.run_task_clock([GEN, str(n), os.path.join(d, "out.json"), "--seed", "1"],
                                   self.wait_envs(d)[c], perf)
    res = interleave(configs, self.s["wait_gen_rounds"], make)
    rows = cpu_rows(res, configs)
    rows.append(["shim, waits off -> shim (default)", "",
                 span([100 * (a.cpu / b.cpu - 1) for a, b in
                       zip(res["shim (default)"], res["shim, waits off"])], "%+.2f"),
                 "%+.2f" % (100 * (min(x.cpu for x in res["shim (default)"]) /
                                   min(x.cpu for x in res["shim, waits off"]) - 1))])
    self.table(["configuration", ("task-clock s (program + helper)" if perf else
                                  "CPU s (wait4; perf stat unusable)"),
                "slowdown %, per round", "slowdown %, min vs min"], rows)
    self.data["wait_generator"] = rows


Bench.wait_envs = _wait_envs
Bench.wait_cost = _wait_cost
Bench.wait_callgrind = _wait_callgrind
Bench.wait_time = _wait_time
Bench.wait_pingpong = _wait_pingpong
Bench.wait_slot_helper = _wait_slot_helper
Bench.wait_generator = _wait_generator

# ---- 14. process trees (issue 22) -------------------------------------------

# bench/tree_wait.c: runs a command N times as a child subreaper and waits
# for every orphan of each run (the shim's helpers) before the next;
# bench/burn_ms.c: a process that burns MS ms of its own CPU.
TREE_WAIT = os.path.join(BB, "tree_wait")
BURN_MS = os.path.join(BB, "burn_ms")
TREE_DWARF0 = "shim, PYROSCOPE_DWARF_MEMORY=0"
TREE_COLD = "shim, symbol cache cold"
TREE_SERVER = "shim, server (loopback peer)"
# The floor of preloading the shim at all: loaded, relocated, its
# constructor reading the configuration and stopping there.
TREE_OFF = "shim loaded, PYROSCOPE_ENABLED=false"
# The floor of sampling every process of a tree at all (bench/min_sampler.c):
# the bare interposer plus a timer per process, its handler, a signal stack,
# and the fork and exec handling any such sampler needs.
MIN_SAMPLER = os.path.join(BB, "libmin_sampler.so")
TREE_MIN = "minimal sampler"
TREE_CONFIGS = ["none", TREE_COLD, "shim (default)", TREE_SERVER, TREE_DWARF0, TREE_OFF,
                TREE_MIN, "bare interposer"]
TREE_ANCHORS = ("none", "bare interposer", TREE_OFF, TREE_MIN)


def _tree_vars(self, c, d):
    """The VAR=VALUE pairs tree_wait sets in the measured command only.
    The symbol cache (XDG_CACHE_HOME/pyroshim) is the bench's own: "shim
    (default)" uses one that a first, untimed run of the same workload
    filled (what every run after a user's first two gets), the cold one a
    fresh empty one per run (a user's first run)."""
    if c == "none":
        return []
    if c == "bare interposer":
        return ["LD_PRELOAD=" + BARE]
    if c == TREE_OFF:
        return ["LD_PRELOAD=" + SHIM, "PYROSCOPE_ENABLED=false"]
    if c == TREE_MIN:
        return ["LD_PRELOAD=" + MIN_SAMPLER, "PYROSCOPE_OUTPUT_DIR=" + d]
    # The shim's defaults: nothing but the output directory (fresh per run).
    return ["LD_PRELOAD=" + SHIM, "PYROSCOPE_OUTPUT_DIR=" + d,
            "XDG_CACHE_HOME=" + (os.path.join(d, "xdg") if c == TREE_COLD else
                                 os.path.join(self.tmp, "warm-cache"))] + \
        (["PYROSCOPE_DWARF_MEMORY=0"] if c == TREE_DWARF0 else []) + \
        (["PYROSCOPE_SERVER_ADDRESS=" + self.tree_server] if c == TREE_SERVER else [])


def _peer_requests(d):
    """How many requests the loopback peer in d accepted so far."""
    return sum(1 for f in os.listdir(d) if re.match(r"^\d+\.json$", f))


def _tree_interleave(self, configs, rounds, make):
    """interleave(), after two untimed runs of the warm configuration (its
    symbol cache filled as by a user's first runs: the first run's helper
    looks libc up whole for at most 5 s, and a second one that opens DWARF
    finishes it)."""
    if "shim (default)" in configs:
        make("shim (default)", -1)
        make("shim (default)", -1)
    return interleave(configs, rounds, make)


def _folded_ns(d):
    """{app: [CPU ns of each cpu.folded file]} in d: one per program name
    and tree, app.PID.cpu.folded, or app.PID.N.cpu.folded once a name's
    kept samples filled a set (uploader/group.h)."""
    apps = {}
    for f in ids_in(d, ".cpu.folded"):
        ns = 0
        for line in open(os.path.join(d, f)):
            if line.strip():
                ns += int(line.rsplit(" ", 1)[1])
        apps.setdefault(re.sub(r"\.\d+(\.\d+)?\.cpu\.folded$", "", f), []).append(ns)
    return apps


def _tree_run(self, c, argv, n=1, cwd=None):
    """tree_wait N runs of argv(d) in configuration c, d a fresh directory
    (the shim's output and the command's own files; removed after).  The
    Result's figures are per run: .wall (fork to the command's end), .cpu
    (the whole tree with the helpers: task-clock of `perf stat` around
    tree_wait if perf is usable, else wait4's program + orphans), .prog_cpu
    (wait4 of the command: every process it waited for, no helper),
    .helper_cpu (wait4 of the orphans: the helpers to their end), .helpers
    (orphans per run), .folded (_folded_ns of the output)."""
    d = tempfile.mkdtemp(prefix="tree-", dir=self.tmp)
    before = _peer_requests(self.tree_peer_dir) if c == TREE_SERVER else 0
    try:
        res = self.run_task_clock([TREE_WAIT, str(n)] + self.tree_vars(c, d) + ["--"] + argv(d),
                                  base_env(), self.tree_perf, cwd=cwd)
        m = re.search(r"^tree_wait: runs \d+ prog_wall_ns (\d+) tree_wall_ns (\d+) prog_cpu_ns (\d+) "
                      r"orphan_cpu_ns (\d+) orphans (\d+)$", res.err, re.M)
        if not m:
            raise RuntimeError("tree_wait printed no figures: " + res.err[-500:])
        wall, tree_wall, prog, orphan, k = (int(x) for x in m.groups())
        res.wall, res.tree_wall = wall / 1e9 / n, tree_wall / 1e9 / n
        res.prog_cpu, res.helper_cpu, res.helpers = prog / 1e9 / n, orphan / 1e9 / n, k / n
        res.cpu = res.cpu / n if self.tree_perf else res.prog_cpu + res.helper_cpu
        res.folded = _folded_ns(d)
        # The helpers have ended (tree_wait waited): their last flush is in.
        res.requests = (_peer_requests(self.tree_peer_dir) - before) / n if c == TREE_SERVER else 0
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return res


def _tree_project(self):
    """A small C project of its own (tree_files sources of tree_funcs
    functions each, a header, a Makefile linking them): a clean `make -j2`
    of it is the build-farm row.  Self-contained, so that the row does not
    move with this repository's sources."""
    d = os.path.join(self.tmp, "project")
    if os.path.isdir(d):
        return d
    os.makedirs(d)
    nf, nfun = self.s["tree_files"], self.s["tree_funcs"]
    with open(os.path.join(d, "gen.h"), "w") as h:
        h.write("#include <stddef.h>\n#include <string.h>\n"
                "struct rec { int k; double v; char name[24]; };\n")
        h.write("".join("long file%d(int n);\n" % i for i in range(nf)))
    for i in range(nf):
        with open(os.path.join(d, "f%02d.c" % i), "w") as f:
            f.write('#include "gen.h"\n')
            for j in range(nfun):
                f.write("static long f%d_%d(struct rec *r, int n)\n{\n\tlong s = %d;\n"
                        "\tfor (int i = 0; i < n; i++) {\n\t\tswitch ((i + r[i %% 8].k) %% 7) {\n" % (i, j, j))
                f.write("".join("\t\tcase %d: s += (long)(r[i %% 8].v * %d) ^ i; r[(i + %d) %% 8].k += s & 3; break;\n"
                                % (c, c + j, c) for c in range(6)))
                f.write("\t\tdefault: s -= (long)strlen(r[i %% 8].name) + %d;\n\t\t}\n\t}\n" % j)
                f.write("\treturn s%s;\n}\n" % ((" + f%d_%d(r, n / 2)" % (i, j - 1)) if j else ""))
            f.write("long file%d(int n)\n{\n\tstruct rec r[8] = {{0}};\n\tlong s = 0;\n" % i)
            f.write("".join("\ts += f%d_%d(r, n);\n" % (i, j) for j in range(nfun)))
            f.write("\treturn s;\n}\n")
    with open(os.path.join(d, "main.c"), "w") as f:
        f.write('#include <stdio.h>\n#include "gen.h"\nint main(void)\n{\n\tlong s = 0;\n')
        f.write("".join("\ts += file%d(10);\n" % i for i in range(nf)))
        f.write('\tprintf("%ld\\n", s);\n\treturn 0;\n}\n')
    with open(os.path.join(d, "Makefile"), "w") as f:
        f.write("CFLAGS = -O2 -g -Wall\nOBJS = main.o %s\n"
                "prog: $(OBJS)\n\t$(CC) $(CFLAGS) -o $@ $(OBJS)\n"
                "%%.o: %%.c gen.h\n\t$(CC) $(CFLAGS) -c -o $@ $<\n"
                % " ".join("f%02d.o" % i for i in range(nf)))
    return d


def _tree_rows(self, res, label, rows):
    """One table row per configuration: wall and tree CPU, each with the
    median of its per-round ratio to "none"; the helpers' CPU."""
    for c in TREE_CONFIGS:
        ratio = (lambda f: "-" if c == "none" else
                 span(_per_round(res, c, "none", lambda a, b: f(a) / f(b)), "x%.2f"))
        rows.append([label if c == "none" else "", c, span([x.wall for x in res[c]]),
                     ratio(lambda x: x.wall), span([x.cpu for x in res[c]]), ratio(lambda x: x.cpu),
                     span([x.prog_cpu for x in res[c]]),
                     "-" if c in TREE_ANCHORS else
                     "%.3f (%.0f per run)" % (med([x.helper_cpu for x in res[c]]),
                                              med([x.helpers for x in res[c]]))])


def _process_trees(self):
    peer, self.tree_server, self.tree_peer_dir = self.start_peer()
    try:
        _process_trees_with_peer(self)
    finally:
        peer.terminate()
        peer.wait(timeout=10)


def _process_trees_with_peer(self):
    self.tree_perf = self.task_clock_usable()
    cpu = ("task-clock of `perf stat` around tree_wait: every process, helpers to their end"
           if self.tree_perf else "wait4 rusage: the command + its orphans (perf stat unusable)")
    self.emit("## 14. Process trees (issue 22)")
    self.emit()
    self.emit("Every run under `build/bench/tree_wait` (a child subreaper that waits for the "
              "shim's helpers before the next run); wall = the command's own (fork to its end); "
              "CPU = %s; ratios are medians of per-round ratios to `none`; each run writes to a "
              "fresh directory.  Symbol cache (XDG_CACHE_HOME): `%s` gets an empty one per run "
              "(a user's first run); `shim (default)` one that an untimed first run of the same "
              "workload filled (every later run); `%s` is the default one with "
              "PYROSCOPE_SERVER_ADDRESS, a loopback Pyroscope peer that accepts every request "
              "(its own CPU is not in the tree's)." % (cpu, TREE_COLD, TREE_SERVER))
    self.emit()
    rows, requests = [], []
    k, rounds = self.s["tree_loop"], self.s["tree_rounds"]
    for label, script in (("bash loop, %d x `/bin/true`" % k,
                           "for ((i = 0; i < %d; i++)); do /bin/true; done" % k),
                          ("bash loop, %d x `echo x | sed s/x/y/`" % k,
                           "for ((i = 0; i < %d; i++)); do echo x | sed s/x/y/ >/dev/null; done" % k)):
        res = self.tree_interleave(TREE_CONFIGS, rounds,
                         lambda c, r: self.tree_run(c, lambda d: ["bash", "-c", script]))
        self.tree_rows(res, label, rows)
        requests.append([label, span([x.requests for x in res[TREE_SERVER]], "%.1f")])
    n = self.s["tree_gen_n"]
    res = self.tree_interleave(TREE_CONFIGS, self.s["tree_gen_rounds"],
                     lambda c, r: self.tree_run(c, lambda d: [GEN, str(n), os.path.join(d, "out.json")]))
    self.tree_rows(res, "`examples/generator %d out.json` (%d rounds)" % (n, self.s["tree_gen_rounds"]), rows)
    requests.append(["`examples/generator %d out.json`" % n,
                     span([x.requests for x in res[TREE_SERVER]], "%.1f")])
    gen = res
    proj = self.tree_project()

    def make(c, r):
        for f in os.listdir(proj):
            if f.endswith(".o") or f == "prog":
                os.unlink(os.path.join(proj, f))
        return self.tree_run(c, lambda d: ["make", "-s", "-j2"], cwd=proj)
    res = self.tree_interleave(TREE_CONFIGS, self.s["tree_make_rounds"], make)
    self.tree_rows(res, "clean `make -j2`, synthetic C project of %d files (%d rounds)"
                   % (self.s["tree_files"] + 1, self.s["tree_make_rounds"]), rows)
    requests.append(["clean `make -j2`", span([x.requests for x in res[TREE_SERVER]], "%.1f")])
    mk = res
    self.table(["workload", "configuration", "wall s", "wall ratio", "CPU s (tree)", "CPU ratio",
                "programs' CPU s (wait4, no helper)", "helpers' CPU s (helpers per run)"], rows)
    self.data["process_trees"] = rows
    self.emit("Requests the loopback peer accepted per run (`%s`): one per program name, "
              "family and interval (uploader/group.h)." % TREE_SERVER)
    self.emit()
    self.table(["workload", "requests per run"], requests)
    self.data["process_trees_requests"] = requests

    nt = self.s["tree_true_runs"]
    self.emit("### 14a. `/bin/true` alone: %d runs per round, %d interleaved rounds, per process"
              % (nt, self.s["tree_true_rounds"]))
    self.emit()
    res = self.tree_interleave(TREE_CONFIGS, self.s["tree_true_rounds"],
                     lambda c, r: self.tree_run(c, lambda d: ["/bin/true"], n=nt))
    rows = []
    for c in TREE_CONFIGS:
        def added(base, f):
            return "-" if c in ("none", base) else \
                span(_per_round(res, c, base, lambda a, b: 1e3 * (f(a) - f(b))), "%+.3f")
        rows.append([c, span([1e3 * x.wall for x in res[c]]), span([1e3 * x.cpu for x in res[c]]),
                     added("none", lambda x: x.cpu), added("bare interposer", lambda x: x.cpu),
                     added("bare interposer", lambda x: x.wall),
                     "-" if c in TREE_ANCHORS else
                     "%.3f" % med([1e3 * x.helper_cpu for x in res[c]])])
    self.table(["configuration", "wall ms", "CPU ms (tree)", "CPU ms over none", "CPU ms over bare",
                "wall ms over bare", "helper CPU ms"], rows)
    self.data["process_trees_true"] = rows

    self.emit("### 14b. The generator against the bare interposer (points of CPU slowdown over `none`)")
    self.emit()
    rows = []
    for c in (TREE_COLD, "shim (default)", TREE_SERVER, TREE_DWARF0, TREE_OFF, TREE_MIN):
        rows.append([c, span(_per_round(gen, c, "bare interposer",
                                        lambda a, b: 100 * (a.cpu - b.cpu) / b.cpu), "%+.1f"),
                     span(_per_round(gen, c, "none", lambda a, b: 100 * (a.cpu / b.cpu - 1)), "%+.1f"),
                     "%+.1f" % (100 * (med([x.cpu for x in gen[c]]) / med([x.cpu for x in gen["none"]]) -
                                       med([x.cpu for x in gen["bare interposer"]]) /
                                       med([x.cpu for x in gen["none"]])))])
    self.table(["configuration", "% over bare (per round)", "% over none (per round)",
                "points over bare (medians)"], rows)
    self.data["process_trees_generator"] = rows

    self.emit("### 14c. What the profiles hold")
    self.emit()
    rows = []
    for c in ("shim (default)", TREE_DWARF0):
        apps = {}
        for x in mk[c]:
            for a, ns in x.folded.items():
                apps[a] = apps.get(a, 0) + len(ns)
        rows.append(["clean `make -j2`", c, span([sum(map(sum, x.folded.values())) / 1e9 for x in mk[c]]),
                     span([x.prog_cpu for x in mk[c]]),
                     span([100 * (sum(map(sum, x.folded.values())) / 1e9 / x.prog_cpu - 1) for x in mk[c]],
                          "%+.1f"), "+-15 %",
                     ", ".join("%s %.3g" % (a, v / len(mk[c])) for a, v in sorted(apps.items()))])
    for cnt, ms in zip(self.s["tree_short"], (3, 25)):
        script = "for ((i = 0; i < %d; i++)); do %s %d; done" % (cnt, BURN_MS, ms)
        res = self.tree_interleave(["shim (default)", TREE_DWARF0], self.s["tree_short_rounds"],
                         lambda c, r: self.tree_run(c, lambda d: ["bash", "-c", script]))
        for c in ("shim (default)", TREE_DWARF0):
            for x in res[c]:
                x.truth = sum(int(v) for v in re.findall(r"^burn_ms_cpu_ns (\d+)$", x.out, re.M)) / 1e9
                x.got = sum(x.folded.get("burn_ms", [])) / 1e9
            rows.append(["%d x `burn_ms %d`" % (cnt, ms), c, span([x.got for x in res[c]]),
                         span([x.truth for x in res[c]]),
                         span([100 * (x.got / x.truth - 1) for x in res[c]], "%+.1f"),
                         "+-25 %" if ms == 3 else "+-15 %",
                         "burn_ms %s of %d" % (span([len(x.folded.get("burn_ms", [])) for x in res[c]], "%d"),
                                               cnt)])
    self.table(["workload", "configuration", "profiles' CPU s (cpu.folded)",
                "real CPU s", "profiles vs real, %", "target", "files (cpu.folded) per run"], rows)
    self.emit("Real CPU: for `make`, wait4 of make (every process it waited for, no helper); "
              "for `burn_ms`, the sum of each burner's own process CPU clock at the end of main "
              "(from its fork: exec, loader, the shim's start-up, the burn).")
    self.emit()
    self.data["process_trees_accuracy"] = rows


Bench.tree_run = _tree_run
Bench.tree_vars = _tree_vars
Bench.tree_interleave = _tree_interleave
Bench.tree_project = _tree_project
Bench.tree_rows = _tree_rows
Bench.process_trees = _process_trees

SECTIONS = ["cpu_overhead", "handler_cost", "cpu_accuracy", "alloc_accuracy",
            "alloc_fast_path", "malloc_heavy", "generator", "startup", "memory", "upload", "go",
            "go_handler", "source_lines", "wait_cost", "process_trees"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: proves the scripts work")
    ap.add_argument("--out", default=os.path.join(BB, "results.md"))
    ap.add_argument("--only", default="", help="comma-separated sections: " + ",".join(SECTIONS))
    a = ap.parse_args()
    tools = probe_tools()
    b = Bench("smoke" if a.smoke else "full", tools, a.out)
    b.emit("# pyroshim benchmarks (%s run, %s)" % ("smoke" if a.smoke else "full",
                                                  time.strftime("%Y-%m-%d %H:%M")))
    b.emit()
    b.emit("- machine: %s" % machine())
    b.emit("- tree: %s" % tree())
    for k, v in sorted(tools.items()):
        if v:
            b.emit("- not measured: %s" % v)
    b.emit()
    only = [s for s in a.only.split(",") if s]
    t0 = time.monotonic()
    try:
        for s in SECTIONS:
            if not only or s in only:
                t = time.monotonic()
                getattr(b, s)()
                print("[%s: %.0f s]" % (s, time.monotonic() - t), file=sys.stderr, flush=True)
    finally:
        b.finish()
    print("[total: %.0f s]" % (time.monotonic() - t0), file=sys.stderr)


if __name__ == "__main__":
    main()
