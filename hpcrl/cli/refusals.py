"""How every ``hpcrl`` command refuses: one line naming the problem and the fix, no traceback.

A command body raises an :class:`~hpcrl.errors.ExplainedError` (a config key, an option, a
plug-in, an env, a checkpoint, a device: whatever the user's input got wrong);
:func:`refusing` turns it into click's error, printed as ``Error: <message>`` with exit
status 1. Under ``mpiexec -n N`` every rank meets the same bad input, so only the
launcher's rank 0 prints it: N copies would say nothing more. Every other exception is a bug
and keeps its traceback.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

from hpcrl.errors import ExplainedError
from hpcrl.runtime.refused import mark_refused

Command = TypeVar("Command", bound=Callable[..., Any])


def refusal(err: Exception) -> click.ClickException | click.exceptions.Exit:
    """The error a command ends with for ``err``: its message on the launcher's rank 0, a
    silent exit 1 on the other ranks."""
    from hpcrl.placement.launch import launched_rank

    if launched_rank() != 0:
        return click.exceptions.Exit(1)
    return click.ClickException(str(err))


def refusing(command: Command) -> Command:
    """``command`` with its :class:`~hpcrl.errors.ExplainedError` shown as a refusal."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except ExplainedError as err:
            mark_refused()  # a batch script does not start a refused step again
            raise refusal(err) from None

    return run  # type: ignore[return-value]
