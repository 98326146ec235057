"""The quick lane names tests that exist (see tests/quick_lane.py)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from quick_lane import QUICK_MODULES, QUICK_TESTS

ROOT = Path(__file__).resolve().parents[1]


def test_every_module_of_the_quick_lane_exists():
    assert [m for m in sorted(QUICK_MODULES) if not (ROOT / m).is_file()] == []


def test_every_test_of_the_quick_lane_is_collected():
    listed = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0",
                             "-p", "no:cacheprovider", *sorted(QUICK_TESTS)], cwd=ROOT,
                            capture_output=True, text=True)
    collected = {line for line in listed.stdout.splitlines() if "::" in line}
    assert sorted(QUICK_TESTS - collected) == [], listed.stdout[-2000:]
