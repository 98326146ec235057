"""Atari 2600 games through the Arcade Learning Environment (``ale-py``).

``ALE/Pong-v5`` and ``PongNoFrameskip-v4`` are registered by ``ale_py``; their
preprocessing chain is ``env.preset: atari`` (:mod:`hpcrl.envs.atari_preprocessing`).
"""
from __future__ import annotations

import re

import gymnasium as gym

from hpcrl.envs.suites.suite import SUITES, Suite


def _register() -> None:
    import ale_py

    gym.register_envs(ale_py)


ATARI = Suite(
    name="Atari", extra="atari", packages=("gymnasium[atari]", "opencv-python-headless"),
    modules=("ale_py",),
    # ids that only ale-py registers: ALE/Game-v5, GameNoFrameskip-v4, GameDeterministic-v4
    ids=re.compile(r"^ALE/|^[A-Z]\w*(NoFrameskip|Deterministic)-v[04]$"),
    # plain Game-v0 / Game-v4 ids are ALE's too, but the pattern also fits unknown ids of
    # others: ale-py is tried for them only when it is installed
    maybe_ids=re.compile(r"^[A-Z]\w*-v[04]$"),
    register=_register, example="ALE/Pong-v5")
SUITES.add(ATARI)
