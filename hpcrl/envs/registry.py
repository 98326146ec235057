"""Registries of the env layer: the suites (:mod:`hpcrl.envs.suites`) and the vector-env
backends (:mod:`hpcrl.envs.backends`), each filled by its own modules.

A :class:`Registry` holds named records. Every module of its package registers its record
when it is imported (``SUITES.add(ATARI)`` at the end of the module), and the registry
imports the whole package before it is first read, so adding a suite or a backend is one
module in that package and nothing else. A plug-in registers its own record the same way,
from anywhere, before the run reads the registry. Asking for a name no record has is
refused naming the known ones.
"""
from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from typing import Generic, Protocol, TypeVar

from hpcrl.errors import ConfigError


class Named(Protocol):
    """What a registry holds: a record with a name."""

    @property
    def name(self) -> str:
        """The record's name, the key it is found by."""


T = TypeVar("T", bound=Named)


class UnknownName(ConfigError):
    """A name that no record of a registry has; the message names the known ones."""


class Registry(Generic[T]):
    """Named records of one kind (``what``: "env suite"), registered by the modules of
    ``package`` (all imported before the registry is first read) or by plug-ins, read in
    name order (whichever module was imported first). ``key`` is the config key that names a
    record, for the refusal of an unknown name (empty: none does)."""

    def __init__(self, what: str, package: str, key: str = "") -> None:
        self.what, self.package, self.key = what, package, key
        self._records: dict[str, T] = {}
        self._loaded = False

    def add(self, record: T) -> T:
        """Register ``record`` under its name (again the same record: nothing happens);
        another record under a taken name is refused."""
        known = self._records.get(record.name)
        if known is not None and known is not record:
            raise ValueError(f"{self.what} '{record.name}' is registered already "
                             f"({known!r}); pick another name")
        self._records[record.name] = record
        return record

    def _load(self) -> None:
        """Import every module of the package once (each registers its record)."""
        if self._loaded:
            return
        self._loaded = True
        root = importlib.import_module(self.package)
        for module in sorted(pkgutil.iter_modules(root.__path__), key=lambda m: m.name):
            importlib.import_module(f"{self.package}.{module.name}")

    def get(self, name: str) -> T:
        """The record named ``name``; an unknown name is refused naming the known ones."""
        self._load()
        record = self._records.get(name)
        if record is None:
            where = f"config key '{self.key}': " if self.key else ""
            raise UnknownName(f"{where}unknown {self.what} '{name}'; known: "
                              f"{', '.join(self.names())} (a plug-in registers its own "
                              f"record as the modules of {self.package} do)")
        return record

    def names(self) -> list[str]:
        """The registered names, in name order."""
        self._load()
        return sorted(self._records)

    def __iter__(self) -> Iterator[T]:
        self._load()
        return iter([self._records[name] for name in sorted(self._records)])

    def __len__(self) -> int:
        self._load()
        return len(self._records)
