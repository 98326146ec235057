"""MiniGrid's grid worlds (``minigrid``): ``MiniGrid-DoorKey-5x5-v0``, ``BabyAI-...`` ids.

A MiniGrid env observes a ``Dict``: ``image``, the 7x7 cells in front of the agent, each
three small integers (object, colour, state), declared as a ``Box`` of uint8 pixels;
``direction``, the way the agent faces (``Discrete(4)``); and ``mission``, a sentence.
:class:`GridSymbols` declares the image for what it is, a grid of symbols (a
``MultiDiscrete`` of the object, colour and state counts), so the networks one-hot encode
each cell instead of reading object 10 as a pixel ten times brighter than object 1, and
drops a mission that never changes (DoorKey's, Empty's: it carries nothing). A mission that
changes between episodes (GoToDoor's "go to the red door") is kept, and hpcrl's networks
take no text: such an env is refused, naming the fix (a wrapper that encodes the sentence,
such as ``minigrid.wrappers:FlatObsWrapper``). The saved policy takes the env's raw
observation, mission and all: the cells' integers are the same.
"""
from __future__ import annotations

import re
from typing import Any

import gymnasium as gym
import numpy as np

from hpcrl.envs.suites.suite import SUITES, Suite

IMAGE, MISSION = "image", "mission"


def _register() -> None:
    import minigrid  # noqa: F401  (registers the MiniGrid-... and BabyAI-... ids)


def _symbol_counts() -> tuple[int, int, int]:
    """How many objects, colours and states a cell's three integers take."""
    from minigrid.core.constants import COLOR_TO_IDX, OBJECT_TO_IDX, STATE_TO_IDX

    return len(OBJECT_TO_IDX), len(COLOR_TO_IDX), len(STATE_TO_IDX)


def _fixed_mission(space: gym.Space) -> bool:
    """Whether a mission space holds one sentence: MiniGrid's ``MissionSpace`` whose
    function takes no placeholders (any other text may change)."""
    from minigrid.core.mission import MissionSpace

    return isinstance(space, MissionSpace) and space.ordered_placeholders is None


class GridSymbols(gym.ObservationWrapper):
    """A MiniGrid env whose ``image`` is a ``MultiDiscrete`` grid of (object, colour, state)
    symbols and whose fixed mission is left out (see the module docstring)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        space = env.observation_space
        assert isinstance(space, gym.spaces.Dict), space
        spaces = dict(space.spaces)
        shape = _cells_shape(space)
        assert shape is not None, space  # (see grid_symbols)
        counts = np.broadcast_to(np.array(_symbol_counts()), shape)
        spaces[IMAGE] = gym.spaces.MultiDiscrete(counts.copy())
        self.drop_mission = MISSION in spaces and _fixed_mission(spaces[MISSION])
        if self.drop_mission:
            del spaces[MISSION]
        self.observation_space = gym.spaces.Dict(spaces)

    def observation(self, observation: dict[str, Any]) -> dict[str, Any]:
        """The env's observation with the cells as int64 symbols, less a fixed mission."""
        out = {key: value for key, value in observation.items()
               if not (key == MISSION and self.drop_mission)}
        out[IMAGE] = np.asarray(observation[IMAGE], np.int64)
        return out


def _cells_shape(space: gym.Space) -> tuple[int, ...] | None:
    """The shape of MiniGrid's ``image`` of (object, colour, state) cells in an observation
    space, or None when the space has no such key."""
    image = space.spaces.get(IMAGE) if isinstance(space, gym.spaces.Dict) else None
    if isinstance(image, gym.spaces.Box) and image.shape[-1:] == (3,):
        return tuple(image.shape)
    return None


def grid_symbols(env: gym.Env) -> gym.Env:
    """``env`` in :class:`GridSymbols` when it observes MiniGrid's ``Dict`` with an image of
    (object, colour, state) cells; as it is otherwise (a user's variant of its own)."""
    return env if _cells_shape(env.observation_space) is None else GridSymbols(env)


MINIGRID = Suite(
    name="MiniGrid", extra="minigrid", packages=("minigrid",), modules=("minigrid",),
    ids=re.compile(r"^(MiniGrid|BabyAI)-"), register=_register, adapt=grid_symbols,
    example="MiniGrid-DoorKey-5x5-v0")
SUITES.add(MINIGRID)
