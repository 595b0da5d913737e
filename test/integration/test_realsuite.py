"""A real program's own test suite under the shim (issue 7): CPython's
regression tests from Debian (libpython3.11-testsuite), modules that use
threads, signals, fork, exec and subprocess pipes, with children that
inherit the shim and read each other's output.  The result must be the same
with and without the shim.  (This suite found two bugs: libunwind's pipe
showing up as two extra descriptors in every process, and the uploader
thread keeping a process alive after its last thread's pthread_exit.)"""
import os
import re
import shutil
import unittest

from common import ShimTest, clean_env, run

PY = "/usr/bin/python3"
MODULES = ["test_threading", "test_subprocess", "test_signal", "test_os", "test_fork1",
           "test_wait4", "test_popen"]


def summary(r):
    """(exit status, sorted names of the tests that did not pass)."""
    text = r.out.decode(errors="replace") + r.err.decode(errors="replace")
    bad = set()
    for m in re.finditer(r"^test (\S+) failed", text, re.M):
        bad.add(m.group(1))
    for m in re.finditer(r"^\d+ tests? failed:\n((?:    .*\n)+)", text, re.M):
        bad.update(m.group(1).split())
    return r.rc, sorted(bad), "Tests result: SUCCESS" in text


@unittest.skipUnless(os.path.exists("/usr/lib/python3.11/test/test_threading.py") and
                     os.path.exists(PY),
                     "Debian's python3 regression tests are not installed "
                     "(apt-get install libpython3.11-testsuite)")
class CPythonSuite(ShimTest):
    def test_same_results_with_and_without_the_shim(self):
        argv = [PY, "-m", "test", "-q"] + MODULES
        env_base = clean_env(preload=False)
        base = summary(run(argv, env_base, timeout=900, cwd=self.tmp))
        # At the highest rate, so that samples land inside every signal,
        # fork and wait corner these modules test.
        shim = summary(run(argv, clean_env({"PYROSCOPE_OUTPUT_DIR": self.out,
                                            "PYROSCOPE_SAMPLE_RATE": "1000"}), timeout=900,
                           cwd=self.tmp))
        self.assertEqual(base, shim)
        self.assertTrue(shim[2], "the suite itself should pass here: %s" % (shim,))


if __name__ == "__main__":
    unittest.main()
