"""The base of errors that explain themselves.

An :class:`ExplainedError` carries a message that names what failed and what to do about it,
so it is shown to the user as that message alone: by the CLI, and by the MPI abort handler
(:mod:`hpcrl.comm.abort`), which prints a traceback for every other exception.
"""
from __future__ import annotations


class ExplainedError(RuntimeError):
    """An error whose message says what failed and the fix; reported without a traceback."""
