"""The population's settings checked before any member starts: :func:`check_settings`.

The settings are the config's ``pbt`` section (:class:`~hpcrl.sections.pbt_section.PbtConfig`,
data below every layer); this is where their problems become one error that names each key
and its fix.
"""
from __future__ import annotations

from hpcrl.errors import ConfigError
from hpcrl.sections.pbt_section import PbtConfig

__all__ = ["check_settings"]


def check_settings(settings: PbtConfig) -> PbtConfig:
    """``settings``, or a :class:`~hpcrl.errors.ConfigError` listing every problem."""
    found = settings.problems()
    if found:
        raise ConfigError("invalid pbt settings:\n  " + "\n  ".join(found))
    return settings
