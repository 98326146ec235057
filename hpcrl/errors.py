"""The bases of errors that explain themselves.

An :class:`ExplainedError` carries a message that names what failed and what to do about it,
so it is shown to the user as that message alone: by every CLI command (one line, a non-zero
exit, no traceback), and by the MPI abort handler (:mod:`hpcrl.comm.abort`), which prints a
traceback for every other exception. Anything a user's input (a config, an option, a plug-in,
an env) can make hpcrl refuse is raised as one of them; what is left to tracebacks are bugs.

:class:`ConfigError` lives here, not in :mod:`hpcrl.config`, so that ``core`` can refuse a
config without importing the config loader.
"""
from __future__ import annotations


class ExplainedError(RuntimeError):
    """An error whose message says what failed and the fix; reported without a traceback."""


class ConfigError(ExplainedError, ValueError):
    """A config key, type or value that cannot be used; the message says how to fix it."""


class NonFiniteError(ExplainedError):
    """A NaN or infinite value in env data, a loss, a gradient or a state to checkpoint (its
    message names where, so the CLI and the MPI abort report show it without a traceback)."""
