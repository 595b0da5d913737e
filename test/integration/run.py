#!/usr/bin/env python3
"""Runs every test/integration/test_*.py and ends with one line
"integration: N passed, N failed, N skipped"."""
import os
import sys
import unittest

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
pattern = sys.argv[1] if len(sys.argv) > 1 else "test_*.py"
suite = unittest.defaultTestLoader.discover(here, pattern=pattern)
result = unittest.TextTestRunner(verbosity=2).run(suite)
# A test marked as an expected failure that passes means the bug it
# documents is fixed: count it, so the mark gets removed.
failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
skipped = len(result.skipped)
passed = result.testsRun - failed - skipped
print("integration: %d passed, %d failed, %d skipped" % (passed, failed, skipped))
sys.exit(1 if failed or result.testsRun == 0 else 0)
