"""What a refusal looks like to a user, checked: shared by the tests of every refusal
(tests/cli/test_refusals.py) and the algorithms' own (tests/algorithms/test_mpc.py)."""
from __future__ import annotations

from click.testing import CliRunner

from hpcrl.cli import main


def assert_refused(output: str, code: int, *needles: str) -> None:
    """A refusal: non-zero exit, at most two lines, no traceback, each needle said."""
    lines = [line for line in output.splitlines() if line.strip()]
    assert code != 0, output
    assert "Traceback" not in output, output
    assert 1 <= len(lines) <= 2, output
    for needle in needles:
        assert needle in output, (needle, output)


def refused_in_process(*args: str, needles: tuple[str, ...]) -> None:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        repr(result.exception)
    assert_refused(result.output, result.exit_code, *needles)
