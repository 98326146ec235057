"""Memory cores: a GRU or LSTM between an agent's encoder and its MLP trunk.

A core's recurrent state travels as one flat float32 row per env, ``[B, state_size]``
(an LSTM's ``h`` then ``c``, layer by layer), so collectors, rollouts, messages and
checkpoints carry it as one more array. A zero row is the state at an episode's start.

:meth:`MemoryCore.step` advances one time step (collection, evaluation);
:meth:`MemoryCore.sequence` recomputes ``[T, B]`` sequences from their stored start states
for the loss, setting the state of an env to zero where an episode starts inside the
sequence. All segments between episode starts run side by side through one call of the
fused recurrent kernel (cuDNN, oneDNN), which gives the numbers of stepping through time
(to float rounding) whatever the episodes' lengths.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from hpcrl.sections.schema import ActorConfig

if TYPE_CHECKING:  # actor.py imports this module
    from hpcrl.models.actor import ActorCritic, ActorOutputs

MEMORY_KINDS = ("none", "gru", "lstm")


def core_state_size(kind: str, size: int, layers: int) -> int:
    """Floats of one env's flat state in one core (an LSTM keeps ``h`` and ``c``)."""
    return layers * size * (2 if kind == "lstm" else 1)


def memory_state_size(config: ActorConfig) -> int:
    """Floats of one env's flat state in an actor built from ``config`` (0 without memory;
    two cores, policy and value, unless the trunk is shared)."""
    if config.memory == "none":
        return 0
    cores = 1 if config.shared_trunk else 2
    return cores * core_state_size(config.memory, config.memory_size, config.memory_layers)


class MemoryCore(nn.Module):
    """``layers`` stacked GRU or LSTM layers of ``size`` units over ``features`` inputs."""

    def __init__(self, kind: str, features: int, size: int, layers: int) -> None:
        super().__init__()
        if kind not in ("gru", "lstm"):
            raise ValueError(f"memory kind must be 'gru' or 'lstm', not {kind!r}")
        self.kind, self.size, self.layers = kind, size, layers
        cls = nn.GRU if kind == "gru" else nn.LSTM
        self.rnn = cls(features, size, num_layers=layers)
        for name, param in self.rnn.named_parameters():  # the usual RL initialisation
            if name.startswith("weight"):
                nn.init.orthogonal_(param, 1.0)
            else:
                nn.init.zeros_(param)

    @property
    def features(self) -> int:
        """Width of the core's output."""
        return self.size

    @property
    def state_size(self) -> int:
        """Floats of one env's flat state."""
        return core_state_size(self.kind, self.size, self.layers)

    def _unpack(self, flat: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Flat rows ``[B, state_size]`` as the ``nn.GRU``/``nn.LSTM`` state."""
        b = flat.shape[0]
        per_layer = flat.reshape(b, -1, self.size).transpose(0, 1)  # [layers(*2), B, size]
        if self.kind == "gru":
            return per_layer.contiguous()
        return per_layer[:self.layers].contiguous(), per_layer[self.layers:].contiguous()

    def _pack(self, state: torch.Tensor | tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        if isinstance(state, tuple):  # an LSTM's (h, c)
            state = torch.cat(state, dim=0)
        return state.transpose(0, 1).reshape(state.shape[1], -1)

    def step(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Outputs ``[B, size]`` and the next flat state for inputs ``[B, features]``."""
        out, new = self.rnn(x.unsqueeze(0), self._unpack(state))
        return out[0], self._pack(new)

    def sequence(self, x: torch.Tensor, state: torch.Tensor, starts: torch.Tensor
                 ) -> torch.Tensor:
        """Outputs ``[T, B, size]`` for inputs ``[T, B, features]`` from start states
        ``[B, state_size]``; ``starts [T, B]`` (bool) marks the steps that begin an episode,
        where the state is zeroed before the step (``starts[0]`` is ignored: the stored
        start state is already that of an episode's start where one began).

        Each column is split at its episode starts into segments; the segments, padded to
        the longest, run through the recurrent kernel side by side in one call (the first
        of each column from its stored state, the others from zeros), and the outputs are
        put back in place. The padding comes after a segment's steps, so it changes none of
        them; one call costs far less than stepping through time where episodes are short.
        """
        steps, batch = starts.shape
        first = starts.clone()
        first[0] = True  # every column's first segment starts at its first step
        time = torch.arange(steps, device=x.device).unsqueeze(1)
        seg_start = torch.where(first, time, torch.zeros_like(time)).cummax(dim=0).values
        position = time - seg_start  # [T, B] step within its segment
        per_column = first.sum(dim=0)  # segments of each column
        column_first = per_column.cumsum(0) - per_column  # index of each column's first one
        segment = column_first.unsqueeze(0) + first.cumsum(dim=0) - 1  # [T, B]
        segments = int(per_column.sum())
        longest = int(position.max()) + 1
        padded = x.new_zeros((longest, segments, x.shape[-1]))
        padded = padded.index_put((position, segment), x)
        start = state.new_zeros((segments, state.shape[-1]))
        start = start.index_copy(0, column_first, state)
        out, _ = self.rnn(padded, self._unpack(start))
        return out[position, segment]


def to_sequences(x: torch.Tensor, length: int) -> torch.Tensor:
    """``[T, N, ...]`` cut into ``T / length`` sequences per env: ``[length, (T/length) x N,
    ...]``, sequence ``c x N + n`` being steps ``[c x length, (c+1) x length)`` of env ``n``."""
    steps, envs = x.shape[:2]
    chunks = steps // length
    return x.reshape((chunks, length, envs) + x.shape[2:]).transpose(0, 1).reshape(
        (length, chunks * envs) + x.shape[2:])


def from_sequences(x: torch.Tensor, envs: int) -> torch.Tensor:
    """The inverse of :func:`to_sequences`: ``[L, C x N, ...]`` back to ``[C x L, N, ...]``."""
    length, count = x.shape[:2]
    chunks = count // envs
    return x.reshape((length, chunks, envs) + x.shape[2:]).transpose(0, 1).reshape(
        (chunks * length, envs) + x.shape[2:])


def evaluate_rollouts(actor: ActorCritic, obs: torch.Tensor, actions: torch.Tensor,
                      memory: torch.Tensor, starts: torch.Tensor, length: int
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Log-probs, entropies and values ``[T, N]`` of side-by-side rollouts ``[T, N, ...]``,
    recomputed sequence by sequence from the states ``memory [C, N, state_size]`` stored at
    the start of each sequence of ``length`` steps. ``T`` may fall short of ``C`` whole
    sequences (rollouts cut to the shortest): the last one is padded and the padding
    dropped, which changes nothing before it."""
    out = rollout_outputs(actor, obs, actions, memory, starts, length, predict=False)
    return out.log_probs, out.entropy, out.values


def rollout_outputs(actor: ActorCritic, obs: torch.Tensor, actions: torch.Tensor,
                    memory: torch.Tensor, starts: torch.Tensor, length: int,
                    predict: bool = True) -> ActorOutputs:
    """:func:`evaluate_rollouts` with the distribution parameters and (``predict``) the
    predictor heads' outputs, every field ``[T, N, ...]``."""
    steps, envs = starts.shape
    chunks = -(-steps // length)
    padded = chunks * length

    def cut(x: torch.Tensor) -> torch.Tensor:
        if padded > steps:
            x = torch.cat([x, x.new_zeros((padded - steps,) + x.shape[1:])])
        return to_sequences(x, length)

    out = actor.evaluate_sequence_outputs(cut(obs), cut(actions),
                                          memory[:chunks].reshape(chunks * envs, -1),
                                          cut(starts), predict)
    return out.map(lambda x: from_sequences(x, envs)[:steps])
