"""What hpcrl knows of one env suite: a :class:`Suite` record.

A suite is a family of envs that a package registers with Gymnasium when it is imported (or
when it is told to): its ids then work as ``env.id`` with no module prefix, in every process
that makes envs. The record says how its ids are recognised, how they are registered, what
a user installs to get them (an extra of hpcrl's, named in the refusal of an id whose package
is missing) and what hpcrl does to each env of the suite before the user's wrappers.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym

from hpcrl.envs.registry import Registry


def install_line(extra: str, packages: tuple[str, ...]) -> str:
    """The install command of an extra, with the packages it stands for:
    ``pip install "hpcrl[minigrid]"  (or "minigrid")``."""
    alternatives = " and ".join(f'"{package}"' for package in packages)
    return f'pip install "hpcrl[{extra}]"  (or {alternatives})'


@dataclass(frozen=True)
class Suite:
    """One env suite of :data:`SUITES`.

    ``ids`` matches the ids only this suite registers (the id without a ``module:`` prefix);
    ``maybe_ids`` those it may own among others' (Atari's plain ``Game-v0``), tried only when
    its package is installed and no suite claims the id surely. ``register`` imports the
    package and registers the ids, raising ImportError when the package is missing.
    ``extra`` is hpcrl's extra that installs ``packages``; ``modules`` are the top-level
    modules the suite imports (a registered id whose entry point lives in one of them and
    cannot be imported is refused with this suite's install line). ``adapt``, when given,
    wraps every env of the suite that no preprocessing chain (``env.preset``) makes, before
    ``env.wrappers``. ``example`` is one of its ids, for messages and tests.
    """

    name: str
    extra: str
    packages: tuple[str, ...]
    modules: tuple[str, ...]
    ids: re.Pattern[str]
    register: Callable[[], None]
    example: str
    maybe_ids: re.Pattern[str] | None = None
    adapt: Callable[[gym.Env], gym.Env] | None = None

    @property
    def install(self) -> str:
        """The command that installs the suite (see :func:`install_line`)."""
        return install_line(self.extra, self.packages)

    def owns(self, env_id: str) -> bool:
        """Whether ``env_id`` (a ``module:`` prefix left out) is surely one of this suite's."""
        return bool(self.ids.search(env_id.rpartition(":")[2]))

    def may_own(self, env_id: str) -> bool:
        """Whether ``env_id`` may be one of this suite's ids, among other suites' ones."""
        return self.maybe_ids is not None and bool(
            self.maybe_ids.search(env_id.rpartition(":")[2]))

    def missing(self, env_id: str, err: ImportError) -> str:
        """The one-line refusal of ``env_id`` when the suite's package is not installed."""
        return (f"config key 'env.id': '{env_id}' is a {self.name} id, and the {self.name} "
                f"package is not installed ({err}); fix: {self.install}")


#: Every suite, registered by its own module of :mod:`hpcrl.envs.suites` (an id is
#: claimed by the first, in name order, whose ``ids`` match it).
SUITES: Registry[Suite] = Registry("env suite", "hpcrl.envs.suites")
