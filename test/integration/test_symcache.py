"""The symbol cache (issue 22, part 2): source lines kept per build ID in
$XDG_CACHE_HOME/pyroshim, so that a second run reads them instead of DWARF.

The workload is test/prog/lines (see test_lines.py): its second run must
answer its source look-ups from the cache, with the same hot lines and
inlined frames that DWARF gives (read with `go tool pprof`); a corrupt
file, a directory that is a symbolic link or another user's, and
PYROSCOPE_SYMBOL_CACHE_SIZE=0 leave the profiles as they are without the
cache.

The seed's command line (`examples/generator 50000 out.json`) opens no
DWARF at all from its second run on: its first run looks every function
of the objects it maps up (symbolizer.c, whole_object()) and marks them
complete.

How many look-ups the second run of `lines` may still send to DWARF: the first run
completes every function it looked up (symbolizer.c, complete()), so only a
function that the first run never sampled is new.  The four phases run
600 ms each at 250 Hz (about 600 samples in the same few loops), so such
a function is one of the few samples of start-up or exit; a tenth of the
look-ups is far above that and far below the first run's (all of them)."""
import os
import re
import shutil
import stat
import struct
import tempfile
import unittest

import subprocess

from common import EXAMPLES, PROG, ShimTest, clean_env, have_go, helper_log, run
from test_lines import assert_hot_lines, build_id

LOOKUPS = re.compile(r"source lines: (\d+) looked up in DWARF \(libdw (?:not )?loaded, \d+ objects "
                     r"without debug information, \d+ opened by this process\), (\d+) "
                     r"answered by the symbol cache \((\d+) files read, \d+ already open, "
                     r"(\d+) not used")


@unittest.skipUnless(have_go(), "go tool pprof is not installed")
class SymbolCache(ShimTest):
    def setUp(self):
        super().setUp()
        self.xdg = os.path.join(self.tmp, "xdg")
        self.cache = os.path.join(self.xdg, "pyroshim")
        self.runs = 0

    def lines(self, extra=None):
        """Run the workload; wait for its helper's last log line (the
        cache is written after the program's profiles, once the program
        no longer waits).  Returns (cpu profile, log text)."""
        self.runs += 1
        out = os.path.join(self.tmp, "p%d" % self.runs)
        log = os.path.join(self.tmp, "log%d" % self.runs)
        env = clean_env({"PYROSCOPE_OUTPUT_DIR": out, "PYROSCOPE_SAMPLE_RATE": "250",
                         "PYROSCOPE_APPLICATION_NAME": "lines", "PYROSCOPE_LOG_LEVEL": "debug",
                         "PYROSCOPE_LOG_FILE": log, "XDG_CACHE_HOME": self.xdg})
        env.update(extra or {})
        r = run([os.path.join(PROG, "lines"), "600"], env, timeout=120)
        self.assertEqual((r.rc, r.out, r.err), (0, b"done\n", b""))
        text = helper_log(self, log)
        (cpu,) = [os.path.join(out, f) for f in os.listdir(out) if f.endswith(".cpu.pb.gz")]
        return cpu, text

    def counts(self, text):
        m = LOOKUPS.search(text)
        self.assertTrue(m, text[-2000:])
        return tuple(int(g) for g in m.groups())

    def assert_hot_lines(self, cpu):
        rows = assert_hot_lines(self, cpu)
        self.assertTrue([k for k in rows if k[1].endswith("stdlib/msort.c") and k[2] > 0],
                        "no libc line: %s" % sorted(rows)[:30])

    def cache_files(self):
        return sorted(f for f in os.listdir(self.cache) if re.fullmatch(r"[0-9a-f]{16,128}", f))

    def test_second_run_reads_the_cache_instead_of_dwarf(self):
        cpu1, log1 = self.lines()
        dwarf1, cached1, read1, _ = self.counts(log1)
        self.assertGreater(dwarf1, 20, log1[-1500:])
        self.assertEqual(read1, 0)
        # Per user, private: the directory 0700, one file per object.
        self.assertEqual(stat.S_IMODE(os.stat(self.cache).st_mode), 0o700)
        files = self.cache_files()
        self.assertGreaterEqual(len(files), 3, files)   # lines, liblines.so, libc
        for f in files:
            self.assertEqual(stat.S_IMODE(os.stat(os.path.join(self.cache, f)).st_mode), 0o600)

        cpu2, log2 = self.lines()
        dwarf2, cached2, read2, bad2 = self.counts(log2)
        self.assertGreaterEqual(read2, 3, log2[-1500:])
        self.assertEqual(bad2, 0)
        self.assertLessEqual(dwarf2 * 10, dwarf2 + cached2,
                             "second run: %d DWARF look-ups, %d from the cache" % (dwarf2, cached2))
        self.assert_hot_lines(cpu1)
        self.assert_hot_lines(cpu2)

    def test_the_seeds_second_run_opens_no_dwarf(self):
        """Before whole objects were kept, 5 warm runs in 7 opened libc's
        DWARF for a function no run had sampled; now no run after the
        first opens any, and the lines (libc's and the program's, from
        the cache) are still there for `go tool pprof`."""
        gen = os.path.join(EXAMPLES, "generator")
        if not os.access(gen, os.X_OK):
            self.skipTest("examples/generator not built")
        for i in range(3):
            out = os.path.join(self.tmp, "g%d" % i)
            log = os.path.join(self.tmp, "glog%d" % i)
            env = clean_env({"PYROSCOPE_OUTPUT_DIR": out, "PYROSCOPE_LOG_LEVEL": "debug",
                             "PYROSCOPE_LOG_FILE": log, "XDG_CACHE_HOME": self.xdg})
            r = run([gen, "50000", os.path.join(self.tmp, "out.json")], env, timeout=120)
            self.assertEqual((r.rc, r.err), (0, b""))
            text = helper_log(self, log)
            dwarf, cached, read, bad = self.counts(text)
            if i == 0:
                self.assertGreater(dwarf, 20, text[-1500:])
                continue
            self.assertEqual(dwarf, 0, "run %d: %s" % (i + 1, text[-1500:]))
            self.assertIn("(libdw not loaded, 0 objects without debug information, "
                          "0 opened by this process)", text)
            self.assertGreater(cached, 20)
            self.assertGreaterEqual(read, 2)
            self.assertEqual(bad, 0)
            (cpu,) = [os.path.join(out, f) for f in os.listdir(out) if f.endswith(".cpu.pb.gz")]
            top = subprocess.run(["go", "tool", "pprof", "-symbolize=none", "-lines", "-top",
                                  "-nodecount=1000", cpu], capture_output=True, text=True,
                                 env=dict(os.environ, HOME=self.tmp), timeout=120).stdout
            self.assertRegex(top, r"examples/generator\.c:\d+", top[-3000:])
            self.assertRegex(top, r"(libio|stdio-common|malloc|string|sysdeps)/\S+:\d+",
                             top[-3000:])

    def flags(self, obj):
        """The flags word of obj's cache file (symcache.c, struct head:
        magic, byte order, build ID length, 64 bytes of build ID, three
        counts, flags), or None when there is no file."""
        path = os.path.join(self.cache, build_id(obj))
        if not os.path.exists(path):
            return None
        with open(path, "rb") as f:
            head = f.read(96)
        self.assertEqual(head[:8], b"PYROSYM\003")
        self.assertEqual(struct.unpack_from("=I", head, 8)[0], 0x01020304)
        return struct.unpack_from("=I", head, 92)[0]

    def test_a_trees_members_complete_the_objects_they_asked_dwarf_about(self):
        """Whole objects in a tree (symbolizer.c, walk()).  The `lines`
        processes below bash ask DWARF, bash does not.  Before, what a
        member offered to be looked up whole went with its session, and
        bash's last save, the one that may take the time, came while the
        tree still counted its members: no run of a tree ever marked an
        object complete.  Each later run then asked DWARF again about any
        function no earlier sample had met; in a 400 x /bin/true loop that
        was libc, 100-170 ms of inflating in the helper, run after run.
        Now the helper looks the offered objects up once its last program
        is gone, and `lines` (offered first, and small) is marked complete
        (PS_SYMCACHE_COMPLETE, 2) by the first run."""
        lines = os.path.join(PROG, "lines")
        log = os.path.join(self.tmp, "tree-log")
        env = clean_env({"PYROSCOPE_OUTPUT_DIR": os.path.join(self.tmp, "tree"),
                         "PYROSCOPE_SAMPLE_RATE": "250", "PYROSCOPE_LOG_LEVEL": "debug",
                         "PYROSCOPE_LOG_FILE": log, "XDG_CACHE_HOME": self.xdg})
        r = run(["bash", "-c", "for i in 1 2; do %s 100; done" % lines], env, timeout=120)
        self.assertEqual((r.rc, r.out, r.err), (0, b"done\n" * 2, b""))
        text = helper_log(self, log)
        self.assertEqual(len(re.findall(r"helper process started", text)), 1, text[-2000:])
        self.assertGreater(sum(int(n) for n in re.findall(r"(\d+) looked up in DWARF", text)), 0)
        self.assertIsNotNone(self.flags(lines), os.listdir(self.cache))
        self.assertTrue(self.flags(lines) & 2, text[-2000:])

    def test_corrupt_files_are_ignored_and_replaced(self):
        self.lines()
        for f in self.cache_files():
            with open(os.path.join(self.cache, f), "r+b") as fh:
                data = bytearray(fh.read())
                for i in range(100, len(data), 97):
                    data[i] ^= 0xff
                fh.seek(0)
                fh.write(data)
        cpu, log = self.lines()
        self.assertIn("symbol cache: the file for", log)
        dwarf, _, read, bad = self.counts(log)
        self.assertEqual(read, 0)
        self.assertGreaterEqual(bad, 3)
        self.assertGreater(dwarf, 20)
        self.assert_hot_lines(cpu)
        # Rewritten whole: the next run reads every file.
        _, log = self.lines()
        _, _, read, bad = self.counts(log)
        self.assertGreaterEqual(read, 3)
        self.assertEqual(bad, 0)

    def test_untrusted_directories_are_not_used(self):
        elsewhere = os.path.join(self.tmp, "elsewhere")
        os.makedirs(elsewhere, mode=0o700)
        os.makedirs(self.xdg)
        os.symlink(elsewhere, self.cache)
        cpu, log = self.lines()
        self.assertIn("symbol cache %s not used: a symbolic link" % self.cache, log)
        self.assertEqual(os.listdir(elsewhere), [])
        self.assert_hot_lines(cpu)
        os.unlink(self.cache)
        os.makedirs(self.cache, mode=0o700)
        os.chmod(self.cache, 0o755)
        _, log = self.lines()
        self.assertIn("not used: open to other users", log)
        self.assertEqual(os.listdir(self.cache), [])
        if os.geteuid() == 0:
            os.chmod(self.cache, 0o700)
            os.chown(self.cache, 65534, 65534)
            _, log = self.lines()
            self.assertIn("not used: owned by another user", log)
            self.assertEqual(os.listdir(self.cache), [])

    def test_size_zero_turns_it_off(self):
        cpu, log = self.lines({"PYROSCOPE_SYMBOL_CACHE_SIZE": "0"})
        self.assertFalse(os.path.exists(self.xdg))
        dwarf, cached, _, _ = self.counts(log)
        self.assertGreater(dwarf, 20)
        self.assertEqual(cached, 0)
        self.assert_hot_lines(cpu)

    def test_bound_keeps_the_directory_small(self):
        # 12 KiB: room for the program's own objects' answers (under 8
        # KiB together), not for libc's (about 27 KiB): those are used in
        # this run and not written.
        cpu, log = self.lines({"PYROSCOPE_SYMBOL_CACHE_SIZE": "12KiB"})
        self.assertIn(", full)", log)
        sizes = [os.path.getsize(os.path.join(self.cache, f)) for f in os.listdir(self.cache)]
        self.assertGreaterEqual(len(sizes), 2, sizes)
        self.assertLessEqual(sum(sizes), 12 * 1024)
        self.assert_hot_lines(cpu)


if __name__ == "__main__":
    unittest.main()
