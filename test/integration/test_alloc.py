"""Allocation profiling of real programs under the shim (issue 3).

Why the tolerances hold.  The shim samples a Poisson process on the byte
line: each thread's distances between sample points are exponential with
mean M (PYROSCOPE_ALLOC_SAMPLE_BYTES), and a block of s bytes is sampled
when a point falls in it, with probability p(s) = 1 - exp(-s/M),
independently of every other block (memorylessness).  A sampled block
counts 1/p(s) objects and s/p(s) bytes, so both totals are unbiased with
variances
    var(bytes)   = sum over blocks of s^2 (1-p)/p   (about M * total bytes)
    var(objects) = sum over blocks of (1-p)/p^2.
The programs allocate deterministic size sequences, so the tests compute
these standard deviations exactly and check that each fixed tolerance is
at least 4.5 of them (a correct shim then fails about once in 150000 runs
per assertion).  Programs run in their own session; on a timeout the whole
process group is killed, so a hung fork child cannot outlive the test."""
import json
import math
import os
import re
import signal
import subprocess
import tempfile
import unittest

from common import PROG, ShimTest, clean_env, flat_and_cum, have_go, pprof_raw, read_folded

DEFAULT_RATE = 524288
TYPES = ["alloc_objects", "alloc_space", "inuse_objects", "inuse_space"]
A_OBJ, A_SPACE, I_OBJ, I_SPACE = range(4)


class Result:
    def __init__(self, rc, out, err):
        self.rc, self.out, self.err = rc, out, err


def run_group(argv, env, timeout):
    """Run argv in a new session; kill its whole process group on timeout
    (and any leftover member after it exits).  Returns rc, stdout, stderr."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(argv, env=env, stdout=out, stderr=err,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            raise AssertionError("timed out after %ss (hang?): %s" % (timeout, argv)) from None
        finally:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        out.seek(0)
        err.seek(0)
        return Result(rc, out.read(), err.read())


def p_sampled(size, mean):
    return 1.0 if mean <= 1 else -math.expm1(-size / mean)


def sigmas(blocks, mean):
    """Standard deviations of the (bytes, objects) estimates for blocks
    given as {size: count}."""
    vb = vo = 0.0
    for s, n in blocks.items():
        p = p_sampled(s, mean)
        vb += n * s * s * (1 - p) / p
        vo += n * (1 - p) / (p * p)
    return math.sqrt(vb), math.sqrt(vo)


def cycle_blocks(total, nsizes=11):
    """The sizes alloc_sites allocates for one site: 64 << (i % 11) until
    `total` bytes, the last block cut short.  Mirrors churn() in
    test/prog/alloc_sites.c (called in 16 rounds)."""
    blocks = {}
    per_round = total // 16
    for _ in range(16):
        done, i = 0, 0
        while done < per_round:
            n = min(64 << (i % nsizes), per_round - done)
            blocks[n] = blocks.get(n, 0) + 1
            done += n
            i += 1
    return blocks


class AllocTest(ShimTest):
    def env(self, app, extra=None, cpu=False):
        e = {"PYROSCOPE_OUTPUT_DIR": self.out, "PYROSCOPE_APPLICATION_NAME": app}
        if not cpu:
            e["PYROSCOPE_PROFILING_CPU_ENABLED"] = "false"
        e.update(extra or {})
        return clean_env(e)

    def alloc_file(self, app, pid=None):
        names = [f for f in self.files() if f.startswith(app + ".") and f.endswith(".alloc.pb.gz")]
        if pid is not None:
            names = [f for f in names if f == "%s.%d.alloc.pb.gz" % (app, pid)]
        self.assertEqual(len(names), 1, self.files())
        return os.path.join(self.out, names[0])

    def decode(self, path):
        types, samples = pprof_raw(path)
        self.assertEqual(types, TYPES)
        return samples

    def within(self, got, want, tol, what, sigma=None):
        if sigma is not None:
            # The fixed tolerance must be statistically meaningful.
            self.assertGreaterEqual(tol * want, 4.5 * sigma,
                                    "%s: tolerance below 4.5 sigma; allocate more" % what)
        self.assertLess(abs(got - want), tol * want,
                        "%s: got %d, truth %d (%.1f %%; allowed %.0f %%%s)"
                        % (what, got, want, 100.0 * (got - want) / want, 100 * tol,
                           "" if sigma is None else ", sigma %.2f %%" % (100.0 * sigma / want)))


@unittest.skipUnless(have_go(), "go tool pprof is not installed")
class KnownSites(AllocTest):
    # At the default mean M = 512 KiB: the small site allocates 1.5 GiB, so
    # its relative error is at most sqrt(M/T) = 1.8 % and 10 % is > 5
    # sigma; the big site 4.5 GiB (1.05 %).  The leak keeps 128 MiB live:
    # sqrt(M/128 MiB) = 6.25 %, so 30 % is 4.8 sigma.  The blocks are
    # never written beyond their first and last byte, so this takes well
    # under a second and little resident memory.
    SMALL_MIB, LEAK_MIB = 1536, 128

    def test_site_totals_ratio_and_leak_match_truth(self):
        report = os.path.join(self.tmp, "truth.json")
        r = run_group([os.path.join(PROG, "alloc_sites"), str(self.SMALL_MIB),
                       str(self.LEAK_MIB), report], self.env("sites"), timeout=60)
        self.assertEqual(r.rc, 0, r.err)
        self.assertEqual(r.err, b"", "the shim must be silent by default")
        truth = json.load(open(report))
        samples = self.decode(self.alloc_file("sites"))
        _, a_space = flat_and_cum(samples, A_SPACE)
        _, a_obj = flat_and_cum(samples, A_OBJ)
        _, i_space = flat_and_cum(samples, I_SPACE)
        _, i_obj = flat_and_cum(samples, I_OBJ)
        mib = 1 << 20
        blocks = {"site_small": cycle_blocks(self.SMALL_MIB * mib),
                  "site_big": cycle_blocks(3 * self.SMALL_MIB * mib),
                  "site_leak": cycle_blocks(self.LEAK_MIB * mib)}
        for site, b in blocks.items():
            # The Python model of the program's sizes matches what it did.
            self.assertEqual(sum(s * n for s, n in b.items()), truth[site]["bytes"], site)
            self.assertEqual(sum(b.values()), truth[site]["objects"], site)
        for site in ("site_small", "site_big"):
            sb, so = sigmas(blocks[site], DEFAULT_RATE)
            self.within(a_space.get(site, 0), truth[site]["bytes"], 0.10,
                        site + " alloc_space", sb)
            # Objects are dominated by 64 B blocks, each sampled with
            # p = 1/8192: plausible means within 6 sigma, about 40 %.
            self.within(a_obj.get(site, 0), truth[site]["objects"], 6 * so / truth[site]["objects"],
                        site + " alloc_objects")
            self.assertEqual(i_space.get(site, 0), 0, site + " freed everything")
        ratio = a_space["site_big"] / a_space["site_small"]
        self.assertLess(abs(ratio / 3 - 1), 0.10, "big/small = %.3f, truth 3" % ratio)
        sb, so = sigmas(blocks["site_leak"], DEFAULT_RATE)
        self.within(i_space.get("site_leak", 0), truth["site_leak"]["bytes"], 0.30,
                    "site_leak inuse_space", sb)
        self.within(a_space.get("site_leak", 0), truth["site_leak"]["bytes"], 0.30,
                    "site_leak alloc_space", sb)
        self.within(i_obj.get("site_leak", 0), truth["site_leak"]["objects"],
                    6 * so / truth["site_leak"]["objects"], "site_leak inuse_objects")
        # Only the leak, main's array of its pointers (calloc of
        # LEAK/64 + 1 pointers, sampled with p = 1 - e^-32) and at most a
        # few stray libc buffers are live.
        keep = (self.LEAK_MIB * mib // 64 + 1) * 8
        total_inuse = sum(v[I_SPACE] for v, _ in samples)
        self.assertLess(abs(total_inuse - i_space["site_leak"] - keep), 4 * DEFAULT_RATE)
        # The folded files say the same as the pprof.
        pid = int(os.path.basename(self.alloc_file("sites")).split(".")[1])
        # Object counts are fixed-point until written; the two writers
        # may round each stack differently (at most 1 per stack).
        for i, t in enumerate(TYPES):
            folded = read_folded(self.profile("sites", pid, t + ".folded"))
            slack = len(samples) if t.endswith("objects") else 0
            self.assertLessEqual(abs(sum(folded.values()) - sum(v[i] for v, _ in samples)),
                                 slack, t)
        self.assertTrue(any(s.endswith("site_leak;churn") for s in
                            read_folded(self.profile("sites", pid, "inuse_space.folded"))))


API = ["api_malloc", "api_calloc", "api_realloc", "api_reallocarray", "api_posix_memalign",
       "api_aligned_alloc", "api_memalign", "api_valloc", "api_pvalloc"]


class EveryFunction(AllocTest):
    def runs(self, prog, args, rates, timeout=60):
        """Output without the shim, then with it at each rate: every run
        exits the same way and prints the same bytes; the shim is silent."""
        argv = [os.path.join(PROG, prog)] + args
        base = run_group(argv, clean_env(preload=False), timeout)
        self.assertEqual(base.rc, 0, base.out + base.err)
        for rate in rates:
            extra = {"PYROSCOPE_ALLOC_SAMPLE_BYTES": str(rate)} if rate else {}
            r = run_group(argv, self.env(prog, extra), timeout)
            self.assertEqual((r.rc, r.out, r.err), (base.rc, base.out, b""),
                             "rate %s differs from the run without the shim" % rate)
        return base.out.decode()

    def test_results_and_failures_identical_with_and_without_shim(self):
        out = self.runs("alloc_api", ["3"], [1, None])
        # The program's own checks ran: alignment, contents, usable size,
        # EINVAL/ENOMEM where required.
        self.assertIn("failures: 0", out)
        self.assertIn("calloc overflow: NULL errno=ENOMEM", out)
        self.assertIn("reallocarray overflow: NULL errno=ENOMEM", out)
        self.assertIn("malloc(SIZE_MAX/2): NULL errno=ENOMEM", out)
        self.assertIn("posix_memalign(align 3): EINVAL", out)
        self.assertIn("posix_memalign(align 24): EINVAL", out)

    @unittest.skipUnless(have_go(), "go tool pprof is not installed")
    def test_every_allocation_recorded_at_rate_1(self):
        out = self.runs("alloc_api", ["1"], [1])
        counts = {m.group(1): (int(m.group(2)), int(m.group(3)))
                  for m in re.finditer(r"^count (\w+) (\d+) (\d+)$", out, re.M)}
        self.assertEqual(sorted(counts), sorted(API))
        samples = self.decode(self.alloc_file("alloc_api"))
        _, objs = flat_and_cum(samples, A_OBJ)
        _, space = flat_and_cum(samples, A_SPACE)
        # A thread's first allocation after start only seeds its random
        # stream (alloc.c), so at most one allocation is missing overall.
        missing = 0
        for f in API:
            calls, nbytes = counts[f]
            self.assertGreater(calls, 0, f)
            self.assertIn(objs.get(f, 0), (calls - 1, calls), "%s: %s" % (f, sorted(objs)))
            if objs[f] == calls:
                self.assertEqual(space.get(f, 0), nbytes, f + " alloc_space")
            missing += calls - objs[f]
        self.assertLessEqual(missing, 1)
        # Every block was freed before exit.
        self.assertEqual(sum(v[I_SPACE] for v, fr in samples if set(fr) & set(API)), 0)

    def test_memory_from_before_the_shim_started_is_freed_correctly(self):
        # .preinit_array allocations run before the shim's constructor (the
        # hooks resolve on that first call); constructor(101), setenv,
        # strdup, stdio, qsort and opendir allocate inside libc.
        out = self.runs("alloc_early", [], [1, None])
        self.assertTrue(out.startswith("pre0 argv0 zeroed\n"), out[:200])
        self.assertIn("set in a constructor / duplicated in a constructor", out)

    def test_alloc_profiling_disabled_writes_no_alloc_profile(self):
        r = run_group([os.path.join(PROG, "alloc_api"), "1"],
                      self.env("off", {"PYROSCOPE_PROFILING_ALLOC_ENABLED": "false",
                                       "PYROSCOPE_ALLOC_SAMPLE_BYTES": "1"}), 60)
        self.assertEqual(r.rc, 0)
        self.assertFalse([f for f in self.files() if ".alloc" in f or "_space" in f], self.files())

    def test_a_series_with_no_sample_has_no_file(self):
        """alloc_freed allocates 8 MiB (sampled with p = 1 - e^-16) and
        frees it: its allocation series have a sample, its in-use series
        none, and a profile with no sample is not written (pyroshim(7)):
        no empty in-use folded files.  The pprof holds all four types."""
        r = run_group([os.path.join(PROG, "alloc_freed")], self.env("freed"), 60)
        self.assertEqual((r.rc, r.out, r.err), (0, b"", b""))
        kinds = sorted(f.split(".", 2)[2] for f in self.files())
        self.assertEqual(kinds, ["alloc.pb.gz", "alloc_objects.folded", "alloc_space.folded"])
        samples = self.decode(self.alloc_file("freed"))
        self.assertGreaterEqual(sum(v[A_SPACE] for v, _ in samples), 8 << 20)
        self.assertEqual(sum(v[I_SPACE] for v, _ in samples), 0)


@unittest.skipUnless(have_go(), "go tool pprof is not installed")
class ThreadsForkCxxSignals(AllocTest):
    def test_threads_free_across_threads_and_nothing_stays_in_use(self):
        rate = 4096
        r = run_group([os.path.join(PROG, "alloc_threads"), "100000"],
                      self.env("thr", {"PYROSCOPE_ALLOC_SAMPLE_BYTES": str(rate)}), timeout=90)
        self.assertEqual(r.rc, 0, r.out + r.err)
        self.assertEqual(r.err, b"")
        m = re.match(rb"ok (\d+) (\d+) \d+\n$", r.out)
        self.assertTrue(m, r.out)
        blocks, nbytes = int(m.group(1)), int(m.group(2))
        samples = self.decode(self.alloc_file("thr"))
        total = sum(v[A_SPACE] for v, _ in samples)
        inuse = sum(v[I_SPACE] for v, _ in samples)
        _, cum = flat_and_cum(samples, A_SPACE)
        # 1.6 GB at M = 4 KiB: sigma is about sqrt(M/T) = 0.16 %, so 5 %
        # leaves room for the 16-byte malloc before each realloc-grown
        # block (a quarter of the blocks, 0.2 % of the bytes).
        self.within(cum.get("thread_alloc", 0), nbytes, 0.05, "thread_alloc alloc_space")
        self.assertGreater(total, 0.95 * nbytes)
        # Everything was freed, most of it on other threads: what is left
        # live is at most a few stray libc buffers (stdout's), never the
        # workload's blocks.
        self.assertLess(inuse, 64 * rate, "inuse_space %d of %d allocated" % (inuse, total))
        self.assertEqual(sum(v[I_SPACE] for v, fr in samples if "thread_alloc" in fr), 0)
        self.assertGreater(blocks, 0)

    def test_fork_while_threads_allocate(self):
        # A fork lands while other threads are inside malloc, the sampling
        # slow path or libunwind.  Every child must finish and write its
        # own profile, whether it ends by exit() or by _exit() (its
        # uploader process makes the last pass either way).
        # Without quiescing libunwind at fork, about 1 fork in 100 hangs
        # here (a child inherits libunwind's cache lock held); 500 forks
        # make a miss unlikely.  A passing run takes about a second.
        env = self.env("fk", {"PYROSCOPE_ALLOC_SAMPLE_BYTES": "4096"}, cpu=True)
        attempts, exited, quick = 5, [], []
        for _ in range(attempts):
            r = run_group([os.path.join(PROG, "alloc_fork"), "100"], env, timeout=30)
            self.assertEqual(r.rc, 0, r.out + r.err)
            self.assertEqual(r.err, b"")
            lines = r.out.decode().split("\n")
            self.assertEqual(lines[-2:], ["ok", ""])
            e = [int(l.split()[1]) for l in lines if l.startswith("exit ")]
            q = [int(l.split()[1]) for l in lines if l.startswith("_exit ")]
            self.assertEqual((len(e), len(q)), (50, 50))
            exited += e
            quick += q
        for pid in exited + quick:
            types, samples = self.samples_of("fk", "alloc.pb.gz", pid)
            self.assertEqual(types, TYPES, pid)
            _, cum = flat_and_cum(samples, A_SPACE)
            # Each child allocates 256 blocks of 1-32 KiB, 4.2 MB: its
            # profile is its own, not the parent's threads'.
            self.assertGreater(cum.get("child_alloc", 0), 0, pid)
            self.assertEqual(cum.get("background_alloc", 0), 0, pid)
        # One file per attempt (the tree's one program name), named
        # after its parent, which leads the tree.
        parents = [int(f.split(".")[1]) for f in self.files() if f.endswith(".alloc.pb.gz")]
        self.assertEqual(len(parents), attempts, "one file per attempt: %s" % self.files())
        self.assertFalse(set(parents) & set(exited + quick))
        _, samples = self.samples_of("fk", "alloc.pb.gz", parents[0])
        _, cum = flat_and_cum(samples, A_SPACE)
        self.assertGreater(cum.get("background_alloc", 0), 0)

    def test_cxx_names_are_demangled_below_a_c_program(self):
        """A C++ program in a tree led by a C one (a shell): the tree's
        helper has no C++ runtime of the program's to demangle with (it
        is the shell's copy, or no copy at all); it loads one.  The names
        were left mangled ("_ZN5Cache4fillEi")."""
        r = run_group(["sh", "-c", '"$0" 2000; true', os.path.join(PROG, "new_cxx")],
                      self.env("cxx", {"PYROSCOPE_ALLOC_SAMPLE_BYTES": "65536"}), timeout=60)
        self.assertEqual((r.rc, r.out, r.err), (0, b"ok 10006000\n", b""))
        samples = self.decode(self.alloc_file("cxx"))
        total = sum(v[A_SPACE] for v, _ in samples)
        flat, cum = flat_and_cum(samples, A_SPACE)
        # The shell's own allocations are a few samples at most.
        self.assertGreater(flat.get("operator new(unsigned long)", 0), 0.9 * total, sorted(flat))
        self.assertGreater(cum.get("Cache::fill(int)", 0), 0.9 * total, sorted(cum))
        self.assertEqual([n for n in cum if n.startswith("_Z")], [])

    def test_cxx_new_shows_operator_new_under_the_method(self):
        r = run_group([os.path.join(PROG, "new_cxx"), "2000"],
                      self.env("cxx", {"PYROSCOPE_ALLOC_SAMPLE_BYTES": "65536"}), timeout=60)
        self.assertEqual((r.rc, r.out, r.err), (0, b"ok 10006000\n", b""))
        samples = self.decode(self.alloc_file("cxx"))
        total = sum(v[A_SPACE] for v, _ in samples)
        flat, cum = flat_and_cum(samples, A_SPACE)
        new = "operator new(unsigned long)"
        # All of it comes through libstdc++'s operator new (the shim's own
        # malloc frame is dropped), called from the demangled method.
        self.assertGreater(flat.get(new, 0), 0.99 * total, sorted(flat))
        self.assertGreater(cum.get("Cache::fill(int)", 0), 0.99 * total, sorted(cum))
        self.assertGreater(cum.get("Cache::Cache(int)", 0), 0.99 * total)
        direct = sum(v[A_SPACE] for v, fr in samples if fr[:2] == [new, "Cache::fill(int)"])
        self.assertGreater(direct, 0, "new[] directly in Cache::fill")
        grow = sum(v[A_SPACE] for v, fr in samples
                   if fr[0] == new and any(f.startswith("std::vector<long") and "push_back" in f
                                           for f in fr))
        self.assertGreater(grow, 0, "vector growth through operator new")

    def test_host_signal_handler_that_mallocs_does_not_deadlock(self):
        argv = [os.path.join(PROG, "signal_malloc"), "200000"]
        base = run_group(argv, clean_env(preload=False), 60)
        self.assertEqual(base.rc, 0)
        # About 1 s of 1 ms ticks each run at M = 1 KiB: the handler's own
        # 48-byte allocations are sampled (unwound through the signal
        # frame) a few percent of the time, and land on the main loop's
        # slow path now and then.
        for i in range(3):
            r = run_group(argv, self.env("sig%d" % i, {"PYROSCOPE_ALLOC_SAMPLE_BYTES": "1024"},
                                         cpu=True), timeout=60)
            self.assertEqual((r.rc, r.out, r.err), (0, base.out, b""))
        samples = self.decode(self.alloc_file("sig0"))
        _, cum = flat_and_cum(samples, A_SPACE)
        self.assertGreater(cum.get("main_alloc", 0), 0)


if __name__ == "__main__":
    unittest.main()
