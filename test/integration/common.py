"""Shared helpers for the integration tests: run real programs under the
shim and read what it wrote with independent tools (go tool pprof)."""
import atexit
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SHIM = os.path.join(ROOT, "shim", "libpyroshim.so")
PROG = os.path.join(ROOT, "build", "prog")
EXAMPLES = os.path.join(ROOT, "examples")


# The symbol cache of this run of the tests (XDG_CACHE_HOME/pyroshim):
# never the user's, so that no earlier run's answers are read, and shared
# by the tests of one run, so that most of them read source lines from it
# as users' second runs do.
CACHE_HOME = tempfile.mkdtemp(prefix="pyroshim-cache-")
atexit.register(shutil.rmtree, CACHE_HOME, True)
os.environ["XDG_CACHE_HOME"] = CACHE_HOME   # for what runs pyrorun with os.environ


def clean_env(extra=None, preload=True):
    """The test's environment: no PYROSCOPE_*/OTEL_* leaking in from the
    caller, the shim preloaded, this run's symbol cache, plus `extra`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYROSCOPE_", "PYROSHIM_", "OTEL_", "TRACEPARENT", "TRACESTATE",
                                 "LD_PRELOAD"))}
    if preload:
        env["LD_PRELOAD"] = SHIM
    env.update(extra or {})
    return env


def default_signals():
    """preexec_fn: SIGINT and SIGQUIT at their default actions in the child,
    as a terminal gives them, even when the tests run in the background
    (a non-interactive shell's `&` ignores both, and an ignored signal
    stays ignored across exec: pyrorun could not forward it, and the
    programs' own tests of it would fail with or without the shim)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


class Run:
    def __init__(self, rc, out, err, utime, stime, wall, pid=None):
        self.rc, self.out, self.err = rc, out, err
        self.cpu = utime + stime
        self.wall = wall
        self.pid = pid


def run(argv, env, timeout=120, cwd=None, stdin=None):
    """Run argv to completion; return exit status, output and the child's
    own rusage (wait4), so CPU totals can be compared."""
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(argv, env=env, stdout=out, stderr=err, cwd=cwd,
                             stdin=subprocess.DEVNULL if stdin is None else stdin,
                             preexec_fn=default_signals)
        deadline = t0 + timeout
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                p.kill()
                os.wait4(p.pid, 0)
                raise AssertionError("timed out after %ss: %s" % (timeout, argv))
            time.sleep(0.01)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Run(p.returncode, out.read(), err.read(), ru.ru_utime, ru.ru_stime,
                   time.monotonic() - t0, p.pid)


def helper_log(test, log, timeout=30):
    """The debug log once the helper's last line is in it: what comes after
    the program's profiles (the symbol cache, its counts) is written once
    the program no longer waits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(log) as f:
            text = f.read()
        if "uploader: helper used" in text:
            return text
        time.sleep(0.05)
    test.fail("the helper did not end: " + text[-2000:])


def have_go():
    return shutil.which("go") is not None


def pprof_by_pid(path, pid=None):
    """Decode a pprof file with `go tool pprof -raw`: (sample_types,
    {pid: samples}), samples as pprof_raw's, keyed by their numeric `pid`
    label (None without one).  With pid, that process's only
    (`-tagfocus pid=N`)."""
    env = dict(os.environ, PPROF_TMPDIR=tempfile.gettempdir(), HOME=os.environ.get("HOME", "/tmp"))
    focus = ["-tagfocus", "pid=%d" % pid] if pid is not None else []
    p = subprocess.run(["go", "tool", "pprof", "-raw", "-symbolize=none"] + focus + [path],
                       capture_output=True, text=True, env=env, timeout=120)
    if p.returncode != 0:
        raise AssertionError("go tool pprof failed on %s: %s" % (path, p.stderr))
    lines = p.stdout.splitlines()
    types, locs = [], {}
    cur = None
    section = None
    raw = []
    for line in lines:
        if line.startswith("Samples:"):
            section = "samples"
            continue
        if line.startswith("Locations"):
            section = "locations"
            continue
        if line.startswith("Mappings"):
            section = None
            continue
        if section == "samples":
            if not types and line.strip() and ":" not in line:
                types = [t.split("/")[0] for t in line.split()]
                continue
            m = re.match(r"\s*([-\d\s]+):\s*([\d\s]*)$", line)
            if m:
                raw.append(([int(v) for v in m.group(1).split()],
                            [int(x) for x in m.group(2).split()], [None]))
                continue
            # The sample's labels, on the lines below it.
            m = re.search(r"(?:^|\s)pid:\[(\d+)\]", line)
            if m and raw:
                raw[-1][2][0] = int(m.group(1))
        elif section == "locations":
            # "N: 0xADDR M=k name file:line s=start(system_name)"; the
            # system name is printed only where it differs from the name.
            m = re.match(r"\s*(\d+):\s*0x[0-9a-f]+\s+(?:M=\d+\s+)?(.*?)\s+\S*:\d+\s+s=\d+(?:\(.*\))?\s*$",
                         line)
            if m:
                cur = int(m.group(1))
                locs[cur] = [m.group(2)]
                continue
            # The next Line of the same location: its inlined caller.
            m = re.match(r"\s+(.*?)\s+\S*:\d+\s+s=\d+(?:\(.*\))?\s*$", line)
            if m and cur is not None:
                locs[cur].append(m.group(1))
    by = {}
    for vals, ids, label in raw:
        by.setdefault(label[0], []).append((vals, [f for i in ids for f in locs.get(i, ["?%d" % i])]))
    return types, by


def pprof_raw(path, pid=None):
    """Decode a pprof file with `go tool pprof -raw`.  Returns
    (sample_types, samples) where samples is a list of (values, frames)
    with frames leaf first, as function names: a location with inlined
    functions stands for several frames, innermost first, as Pyroscope's
    flame graph shows them.  With pid, that process's samples only
    (`-tagfocus pid=N`: a tree's file holds every process of a name)."""
    types, by = pprof_by_pid(path, pid)
    return types, [s for samples in by.values() for s in samples]


def pprof_pids(path):
    """The processes a pprof file holds: the set of its samples' numeric
    `pid` labels (every sample type counts: `go tool pprof -tags` would
    show only those with some of the default type)."""
    return {pid for pid in pprof_by_pid(path)[1] if pid is not None}


def pprof_tags(path, pid=None):
    """{label: {value: percent}} from go tool pprof -tags, weighted by the
    default sample type (None when that type sums to zero, as in-use
    bytes of an interval that freed everything).  With pid, that
    process's samples only (`-tagfocus pid=N`)."""
    env = dict(os.environ, HOME=os.environ.get("HOME", "/tmp"))
    focus = ["-tagfocus", "pid=%d" % pid] if pid is not None else []
    p = subprocess.run(["go", "tool", "pprof", "-tags"] + focus + [path], capture_output=True,
                       text=True, env=env, timeout=120)
    if p.returncode != 0:
        raise AssertionError("go tool pprof -tags failed: %s" % p.stderr)
    tags, key = {}, None
    for line in p.stdout.splitlines():
        m = re.match(r"^\s*(\S+): Total", line)
        if m:
            key = m.group(1)
            tags[key] = {}
            continue
        m = re.match(r"^\s*\S+(?:\s+\(\s*([\d.]+)%\))?:\s*(\S+)\s*$", line)
        if m and key:
            tags[key][m.group(2)] = float(m.group(1)) if m.group(1) else None
    return tags


def pprof(*args):
    """Run `go tool pprof -symbolize=none ARGS` from / and return its output."""
    env = dict(os.environ, PPROF_TMPDIR=tempfile.gettempdir(), HOME=os.environ.get("HOME", "/tmp"))
    p = subprocess.run(["go", "tool", "pprof", "-symbolize=none"] + list(args),
                       capture_output=True, text=True, env=env, timeout=120, cwd="/")
    if p.returncode != 0:
        raise AssertionError("go tool pprof %s: %s" % (args, p.stderr))
    return p.stdout


def top_lines(path, extra=()):
    """{(function, file, line): flat} from -lines -top, and the set of
    functions shown as inlined."""
    rows, inlined = {}, set()
    out = pprof("-lines", "-top", "-nodecount=1000", *extra, path)
    for line in out.splitlines():
        m = re.match(r"\s*([\d.]+)(\w*)\s+[\d.]+%\s+[\d.]+%\s+[\d.]+\w*\s+[\d.]+%\s+(\S+)\s+(\S+):(\d+)"
                     r"(\s+\(inline\))?\s*$", line)
        if not m:
            continue
        key = (m.group(3), m.group(4), int(m.group(5)))
        rows[key] = rows.get(key, 0) + float(m.group(1))
        if m.group(6):
            inlined.add(m.group(3))
    return rows, inlined


def flat_and_cum(samples, index):
    """Per function: (flat, cumulative) of sample value `index`."""
    flat, cum = {}, {}
    for vals, frames in samples:
        v = vals[index]
        if frames:
            flat[frames[0]] = flat.get(frames[0], 0) + v
        for f in set(frames):
            cum[f] = cum.get(f, 0) + v
    return flat, cum


def read_folded(path):
    """{stack: count} from a folded file; the count is after the last space."""
    out = {}
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            out[stack] = out.get(stack, 0) + int(count)
    return out


class ShimTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="pyroshim-it-")
        self.out = os.path.join(self.tmp, "profiles")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def profile(self, app, pid, kind):
        return os.path.join(self.out, "%s.%d.%s" % (app, pid, kind))

    def files(self):
        return sorted(os.listdir(self.out)) if os.path.isdir(self.out) else []

    def files_of(self, app, kind):
        """Every file of program name `app` and `kind` ("cpu.pb.gz"): a
        tree writes one set per name (app.LEADER.kind, app.LEADER.N.kind)."""
        return [os.path.join(self.out, f) for f in self.files()
                if re.fullmatch(r"%s\.\d+(\.\d+)?\.%s" % (re.escape(app), re.escape(kind)), f)]

    def samples_of(self, app, kind, pid):
        """Process pid's samples in app's files of `kind`: (types, samples)
        as pprof_raw's, or (None, []) when no file holds it."""
        types, got = None, []
        for path in self.files_of(app, kind):
            t, by = pprof_by_pid(path)
            if pid in by:
                types = t
                got += by[pid]
        return types, got

    def pids_of(self, app, kind):
        """Every process in app's files of `kind`."""
        pids = set()
        for path in self.files_of(app, kind):
            pids |= set(pprof_pids(path))
        return pids
