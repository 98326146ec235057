"""The code-health gates as tests: ruff passes on ``hpcrl/``, ``tests/``, ``benchmarks/``,
``examples/`` and ``tools/`` and mypy on ``hpcrl/`` as ``pyproject.toml`` configures them, and
every public module, class and function of ``hpcrl/`` has a docstring.

They run with the rest of the suite (a worker of ``pytest -n 2`` takes them beside the
multi-rank tests), so the README's test command checks them and CI does not spend their
time after the tests: mypy alone takes about 40 s on a clean clone of this 2-core machine.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _gate(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def _tool(name: str) -> str:
    """The test extra's tool ``name`` beside this interpreter (else on PATH)."""
    beside = Path(sys.executable).with_name(name)
    found = str(beside) if beside.exists() else shutil.which(name)
    assert found, f"{name} is not installed: pip install -e '.[test]'"
    return found


@pytest.mark.timeout(60)
def test_ruff_finds_nothing_in_the_package_its_tests_benchmarks_examples_and_tools():
    done = _gate([_tool("ruff"), "check", "hpcrl", "tests", "benchmarks", "examples", "tools"],
                 timeout=50)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


@pytest.mark.timeout(240)
def test_mypy_finds_no_type_error_in_hpcrl():
    done = _gate([_tool("mypy")], timeout=230)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Success: no issues found" in done.stdout


@pytest.mark.timeout(60)
def test_every_public_name_of_hpcrl_has_a_docstring():
    done = _gate([sys.executable, "tools/docstring_share.py", "--list", "--min", "100"],
                 timeout=50)
    assert done.returncode == 0, done.stdout[-4000:]
