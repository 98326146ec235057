"""The gradient worker's rollout storage: GAE targets and a layout-independent batch order.

Rollouts are trained on where they landed: a rollout of a feedforward actor is held as views
of its own buffers (a collector's slot of the node's window, the buffer its message arrived
in, the worker's own rollout), one copy made only to a GPU learner's device; the first copy
of its samples on a CPU is the minibatch gathered from them. :attr:`RolloutStorage.copied_bytes`
counts what :meth:`RolloutStorage.load` copied (a recurrent actor's sequences and rollouts
of unequal lengths are still joined into one batch there).

Minibatches are stratified by env: every minibatch holds the same number of time steps
from every env, and which steps is decided by a generator seeded with the update and epoch
over the *global* env columns. A process that holds envs ``[a, b)`` of the job therefore
takes exactly its share of the minibatch that a single process holding all envs would
build, which is what makes N gradient ranks reach the weights of one.

A recurrent actor's rollouts are cut into sequences of ``sequence_length`` steps, each with
the state the collector stored at its start (:class:`RecurrentBatch`); a minibatch then
holds the same number of whole sequences of every env, drawn the same layout-independent
way over ``(sequence, global env)``.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from operator import itemgetter
from typing import NamedTuple

import numpy as np
import torch

from hpcrl.buffers.intrinsic import IntrinsicPart
from hpcrl.buffers.returns import gae
from hpcrl.buffers.rollout import Rollout
from hpcrl.models.memory import to_sequences


class RolloutBatch(NamedTuple):
    """Training samples, flattened to ``[B, ...]`` (or ``[T, N, ...]`` before flattening).

    With RND (:mod:`hpcrl.buffers.intrinsic`) ``values`` and ``returns`` are ``[..., 2]``
    (extrinsic, intrinsic), ``advantages`` their weighted sum, and ``rnd_mask`` marks the
    samples that train the predictor; without it ``rnd_mask`` is None. ``rewards`` (the
    steps' rewards as the rollout stores them) is there for a reward predictor
    (``algo.addons.reward_predictor_coef``), None otherwise.
    """

    obs: torch.Tensor
    actions: torch.Tensor
    log_probs: torch.Tensor
    values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    rnd_mask: torch.Tensor | None = None
    rewards: torch.Tensor | None = None

    def map(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> RolloutBatch:
        """``fn`` applied to every field that is there."""
        return RolloutBatch(fn(self.obs), fn(self.actions), fn(self.log_probs), fn(self.values),
                            fn(self.advantages), fn(self.returns),
                            None if self.rnd_mask is None else fn(self.rnd_mask),
                            None if self.rewards is None else fn(self.rewards))

    @staticmethod
    def joined(parts: Sequence[RolloutBatch], join: Callable[[list[torch.Tensor]],
                                                                 torch.Tensor]) -> RolloutBatch:
        """One batch of ``parts``, each field ``join``-ed (a field none has stays None)."""
        masks = [p.rnd_mask for p in parts if p.rnd_mask is not None]  # all parts or none
        rewards = [p.rewards for p in parts if p.rewards is not None]  # all parts or none
        return RolloutBatch(join([p.obs for p in parts]), join([p.actions for p in parts]),
                            join([p.log_probs for p in parts]), join([p.values for p in parts]),
                            join([p.advantages for p in parts]), join([p.returns for p in parts]),
                            None if parts[0].rnd_mask is None else join(masks),
                            None if parts[0].rewards is None else join(rewards))

    def flatten(self) -> RolloutBatch:
        """Every field ``[T, N, ...]`` reshaped to ``[T x N, ...]``."""
        return self.map(lambda t: t.reshape((-1,) + t.shape[2:]))

    def gather(self, time_index: torch.Tensor, env_index: torch.Tensor) -> RolloutBatch:
        """Samples at ``[time_index[i, j], env_index[i, j]]``, flattened."""
        return self.map(lambda t: t[time_index, env_index]).flatten()

    @property
    def num_samples(self) -> int:
        """The number of samples (steps x envs)."""
        return self.log_probs.numel()


class RecurrentBatch(NamedTuple):
    """Sequences of a recurrent actor: steps ``[L, B, ...]``, the state each sequence starts
    from ``[B, state_size]``, ``starts [L, B]`` (an episode begins at that step: the state is
    zeroed before it) and ``valid [L, B]`` (None when every step is a real one; padding
    fills the sequences of rollouts cut short)."""

    steps: RolloutBatch
    memory: torch.Tensor
    starts: torch.Tensor
    valid: torch.Tensor | None

    def select(self, index: torch.Tensor) -> RecurrentBatch:
        """The sequences ``index``."""
        return RecurrentBatch(self.steps.map(lambda t: t[:, index]),
                              self.memory[index], self.starts[:, index],
                              None if self.valid is None else self.valid[:, index])

    @property
    def num_samples(self) -> int:
        """Real steps (padding excluded)."""
        if self.valid is None:
            return self.steps.log_probs.numel()
        return int(self.valid.sum())

    def samples(self) -> RolloutBatch:
        """The real steps, flattened ``[samples, ...]`` in the order of
        :meth:`~hpcrl.models.actor.ActorCritic.evaluate_sequences`'s flattened outputs."""
        if self.valid is None:
            return self.steps.flatten()
        return self.steps.map(lambda t: t[self.valid])

    def real(self, x: torch.Tensor) -> torch.Tensor:
        """``x [L, B, ...]`` (an output of the sequences) at the real steps, flattened to
        ``[samples, ...]``."""
        return x.flatten(0, 1) if self.valid is None else x[self.valid]


def _side_by_side(rollouts: Sequence[Rollout]) -> bool:
    """Whole rollouts of adjacent env slices (a preempted, shorter one is not)."""
    full = all(r.valid_steps == r.layout.num_steps for r in rollouts)
    ends = [r.env_offset + r.layout.num_envs for r in rollouts[:-1]]
    return full and ends == [r.env_offset for r in rollouts[1:]]


def _padded(x: torch.Tensor, steps: int) -> torch.Tensor:
    """``x [t, ...]`` with zeros after its ``t`` steps, to ``steps``."""
    if x.shape[0] == steps:
        return x
    out = x.new_zeros((steps,) + x.shape[1:])
    out[:x.shape[0]] = x
    return out


def _tensor(array: np.ndarray, device: torch.device) -> torch.Tensor:
    """``array`` as a tensor on ``device``: a view of its memory on the CPU (a step field
    of a rollout is contiguous), a copy on an accelerator."""
    return torch.from_numpy(np.ascontiguousarray(array)).to(device)


def batch_bytes(batch: RolloutBatch) -> int:
    """Bytes of a batch's fields."""
    return sum(t.numel() * t.element_size() for t in batch if t is not None)


def gather_rows(sources: Sequence[torch.Tensor], indices: Sequence[torch.Tensor]
                ) -> torch.Tensor:
    """Rows ``indices[k]`` of each ``sources[k]`` (flat ``[rows, ...]``, alike but for their
    row count), one after the other, copied once straight into the result."""
    first = sources[0]
    total = sum(int(i.numel()) for i in indices)
    out = first.new_empty((total,) + tuple(first.shape[1:]))
    start = 0
    for source, index in zip(sources, indices, strict=True):
        end = start + int(index.numel())
        torch.index_select(source, 0, index, out=out[start:end])
        start = end
    return out


# What a GAE algorithm trains on: flat samples, or a recurrent actor's sequences
GaeBatch = RolloutBatch | RecurrentBatch


class RolloutStorage:
    """Holds the rollouts of one update as ``[T, N, ...]`` tensors with GAE targets: side by
    side in place (:attr:`parts`, one per rollout), or joined (:attr:`batch` for a recurrent
    actor's sequences, :attr:`flat` for rollouts of unequal lengths)."""

    def __init__(self, gamma: float, gae_lambda: float, device: torch.device | str = "cpu",
                 discrete_actions: bool = True, keep_rewards: bool = False) -> None:
        self.gamma, self.gae_lambda = gamma, gae_lambda
        self.device = torch.device(device)
        self.discrete_actions = discrete_actions
        self.keep_rewards = keep_rewards  # batches carry the rewards (a reward predictor)
        self.parts: list[RolloutBatch] | None = None  # side by side, where they landed
        self.batch: RolloutBatch | None = None
        self.flat: RolloutBatch | None = None
        self.sequences: RecurrentBatch | None = None  # a recurrent actor's rollouts
        self._flattened: RolloutBatch | None = None  # the batch as one minibatch, per load
        self.env_offset = 0
        self.copied_bytes = 0  # what the last load copied of its rollouts' step fields

    def load(self, rollouts: Sequence[Rollout],
             intrinsic: Sequence[IntrinsicPart] | None = None) -> None:
        """Take the rollouts of this update (with RND, ``intrinsic``: their
        :class:`~hpcrl.buffers.intrinsic.IntrinsicPart` each, in the same order).

        Rollouts of distinct, adjacent env slices with equal lengths sit side by side as
        ``[T, N]`` and get the layout-independent batch order. Anything else (rollouts cut
        short by preemption, several rollouts of one collector under asynchronous
        collection) is flattened into one pool of samples drawn in a seeded random order.
        """
        if min(r.valid_steps for r in rollouts) <= 0:
            raise ValueError("a rollout with no collected steps cannot be trained on")
        extra = list(intrinsic) if intrinsic is not None else [None] * len(rollouts)
        order = sorted(range(len(rollouts)), key=lambda i: rollouts[i].env_offset)
        rollouts = [rollouts[i] for i in order]
        parts = [self._targets(rollouts[k], extra[i]) for k, i in enumerate(order)]
        self.env_offset = rollouts[0].env_offset
        self._flattened = None
        self.parts = self.batch = self.flat = None
        moved = self.device.type != "cpu"  # each step field copied to the device once
        self.copied_bytes = sum(self._copied(r) for r in rollouts) if moved else 0
        recurrent = rollouts[0].layout.state_size > 0
        if _side_by_side(rollouts) and not recurrent:
            self.parts = parts  # read in place
        elif _side_by_side(rollouts):
            self.batch = RolloutBatch.joined(parts, lambda ts: torch.cat(ts, dim=1))
            self.copied_bytes += batch_bytes(self.batch)
        else:
            self.flat = RolloutBatch.joined([p.flatten() for p in parts],
                                            lambda ts: torch.cat(ts, dim=0))
            self.copied_bytes += batch_bytes(self.flat)
        self.sequences = self._load_sequences(rollouts, parts) if recurrent else None

    @staticmethod
    def _copied(r: Rollout) -> int:
        """Bytes of the step fields :meth:`_targets` takes of ``r`` (to a device)."""
        t = r.valid_steps
        return sum(x[:t].nbytes for x in (r.obs, r.actions, r.log_probs, r.values, r.rewards,
                                          r.terminated, r.truncated, r.next_values))

    def _load_sequences(self, rollouts: Sequence[Rollout], parts: list[RolloutBatch]
                        ) -> RecurrentBatch:
        """The rollouts cut into sequences with their stored start states. Side by side
        (``self.batch``) they are cut as one ``[T, N]`` batch (sequence ``c x N + n``, the
        order the minibatches draw from); a pool is cut rollout by rollout, and a rollout cut
        short (preemption) ends in a padded sequence whose padding ``valid`` masks."""
        layout = rollouts[0].layout
        length = layout.sequence_length or layout.num_steps
        if self.batch is not None:
            groups = [(self.batch, np.concatenate([r.memory for r in rollouts], axis=1),
                       np.concatenate([(r.terminated + r.truncated) > 0 for r in rollouts],
                                      axis=1), layout.num_steps)]
        else:
            groups = [(part, r.memory, (r.terminated + r.truncated) > 0, r.valid_steps)
                      for r, part in zip(rollouts, parts, strict=True)]
        cut = [self._cut(*group, length) for group in groups]
        pieces = [piece for piece, _ in cut]
        steps = RolloutBatch.joined([p.steps for p in pieces], lambda ts: torch.cat(ts, dim=1))
        valid = torch.cat([piece_valid for _, piece_valid in cut], dim=1)
        return RecurrentBatch(steps, torch.cat([p.memory for p in pieces]),
                              torch.cat([p.starts for p in pieces], dim=1),
                              None if bool(valid.all()) else valid)

    def _cut(self, part: RolloutBatch, memory: np.ndarray, done: np.ndarray, steps: int,
             length: int) -> tuple[RecurrentBatch, torch.Tensor]:
        """``steps`` valid steps ``[T, N]`` as sequences of ``length`` (padded at the end),
        and their ``valid`` mask (also the batch's, typed as always set)."""
        chunks = -(-steps // length)
        padded = chunks * length
        envs = done.shape[1]
        starts = torch.zeros((padded, envs), dtype=torch.bool)
        starts[1:steps] = torch.from_numpy(done[:steps - 1])
        valid = torch.zeros_like(starts)
        valid[:steps] = True
        valid = to_sequences(valid, length).to(self.device)
        return RecurrentBatch(
            part.map(lambda x: to_sequences(_padded(x, padded), length)),
            _tensor(memory[:chunks], self.device).reshape(chunks * envs, -1),
            to_sequences(starts, length).to(self.device), valid), valid

    def _targets(self, r: Rollout, intrinsic: IntrinsicPart | None = None) -> RolloutBatch:
        """GAE targets of ``r`` (with RND: beside its intrinsic ones, advantages summed)."""
        t, dev = r.valid_steps, self.device
        values = _tensor(r.values[:t], dev)
        rewards = _tensor(r.rewards[:t], dev)
        advantages, returns = gae(rewards, values, _tensor(r.terminated[:t], dev),
                                  _tensor(r.truncated[:t], dev), _tensor(r.next_values[:t], dev),
                                  self.gamma, self.gae_lambda)
        actions = _tensor(r.actions[:t], dev)
        if self.discrete_actions:
            actions = actions.long()
        mask = None
        if intrinsic is not None:
            advantages = intrinsic.ext_coef * advantages + intrinsic.advantages
            values = torch.stack([values, intrinsic.values.to(values)], dim=-1)
            returns = torch.stack([returns, intrinsic.returns.to(returns)], dim=-1)
            mask = intrinsic.mask
        return RolloutBatch(_tensor(r.obs[:t], dev), actions, _tensor(r.log_probs[:t], dev),
                            values, advantages, returns, mask,
                            rewards if self.keep_rewards else None)

    @property
    def num_steps(self) -> int:
        """Steps ``T`` of the loaded rollouts side by side (0 before any, or in a pool)."""
        if self.parts is not None:
            return self.parts[0].log_probs.shape[0]
        return 0 if self.batch is None else self.batch.log_probs.shape[0]

    @property
    def num_envs(self) -> int:
        """Env columns ``N`` of the loaded rollouts side by side (0 before any, or in a
        pool)."""
        if self.parts is not None:
            return sum(p.log_probs.shape[1] for p in self.parts)
        return 0 if self.batch is None else self.batch.log_probs.shape[1]

    @property
    def num_samples(self) -> int:
        """Samples held (steps x envs, or the size of the flattened pool)."""
        if self.flat is not None:
            return self.flat.log_probs.shape[0]
        return self.num_steps * self.num_envs

    def release(self) -> None:
        """Let go of the update's samples once its gradients are done (what is held between
        updates is then the same whichever way the rollouts arrived; rollouts held in place
        may be written again)."""
        self.parts = self.batch = self.flat = self._flattened = self.sequences = None

    def full_batch(self) -> RolloutBatch | RecurrentBatch:
        """Every sample of the update, flattened (every sequence, for a recurrent actor):
        rollouts held in place are joined here, once for every epoch, side by side and then
        time-major, the order of one rollout of every env whichever rollouts hold them."""
        if self.sequences is not None:
            return self.sequences
        if self.flat is not None:
            return self.flat
        if self._flattened is None:
            if self.parts is not None:  # side by side, then time-major: the job's order
                self._flattened = RolloutBatch.joined(
                    self.parts, lambda ts: torch.cat(ts, dim=1)).flatten()
            else:
                assert self.batch is not None, "load() a rollout first"
                self._flattened = self.batch.flatten()  # views of the joined batch
        return self._flattened

    def minibatches(self, num_minibatches: int, seed: int, total_envs: int
                    ) -> Iterator[GaeBatch]:
        """``num_minibatches`` disjoint minibatches covering the batch once, for one epoch.

        ``seed`` must be the same on every process of the job for the same epoch;
        ``total_envs`` is the number of envs of the whole job. Rows lie in an order that
        does not depend on which rollouts hold them (:meth:`full_batch`, :meth:`_gather`): a
        loss is a mean, and a sum's rounding follows the order of its terms.
        """
        if num_minibatches == 1:
            yield self.full_batch()
            return
        if self.sequences is not None:
            yield from self._sequence_minibatches(num_minibatches, seed, total_envs)
            return
        if self.flat is not None:
            gen = torch.Generator().manual_seed(seed)
            order = torch.randperm(self.num_samples, generator=gen).to(self.device)
            for index in torch.tensor_split(order, num_minibatches):
                yield self.flat.map(itemgetter(index))
            return
        assert self.parts is not None, "load() a rollout first"
        steps, envs = self.num_steps, self.num_envs
        if steps % num_minibatches:
            raise ValueError(f"{steps} steps per env cannot be split into {num_minibatches} "
                             f"equal minibatches")
        gen = torch.Generator().manual_seed(seed)
        keys = torch.rand(steps, total_envs, generator=gen)
        order = keys.argsort(dim=0)[:, self.env_offset:self.env_offset + envs].to(self.device)
        per = steps // num_minibatches
        for j in range(num_minibatches):
            yield self._gather(order[j * per:(j + 1) * per])

    def _gather(self, times: torch.Tensor) -> RolloutBatch:
        """The samples at steps ``times[i, j]`` of env column ``j`` (of the rollouts side by
        side), env-major: env by env in the job's order, each env's steps as ``times`` lists
        them. Rollouts hold consecutive envs, so taking them rollout by rollout keeps that
        order, and the rows lie alike whether one rollout or several hold the envs; each
        field is copied once from where it lies."""
        assert self.parts is not None
        indices, first = [], 0
        for part in self.parts:
            width = part.log_probs.shape[1]
            columns = torch.arange(width, device=times.device)
            rows = times[:, first:first + width] * width + columns  # [steps, envs]
            indices.append(rows.t().flatten())
            first += width
        flat = [p.flatten() for p in self.parts]  # views: each part is contiguous

        def field(pick: Callable[[RolloutBatch], torch.Tensor | None]) -> torch.Tensor:
            sources = [pick(f) for f in flat]
            return gather_rows([x for x in sources if x is not None], indices)

        masks, rewards = flat[0].rnd_mask is not None, flat[0].rewards is not None
        return RolloutBatch(field(lambda b: b.obs), field(lambda b: b.actions),
                            field(lambda b: b.log_probs), field(lambda b: b.values),
                            field(lambda b: b.advantages), field(lambda b: b.returns),
                            field(lambda b: b.rnd_mask) if masks else None,
                            field(lambda b: b.rewards) if rewards else None)

    def _sequence_minibatches(self, num_minibatches: int, seed: int, total_envs: int
                              ) -> Iterator[RecurrentBatch]:
        """Minibatches of whole sequences: side by side, the same number of sequences of
        every env, chosen by keys drawn over ``(sequence, global env)``; a pool of cut
        rollouts in a seeded random order."""
        assert self.sequences is not None
        count = self.sequences.memory.shape[0]
        gen = torch.Generator().manual_seed(seed)
        if self.batch is None:  # a pool
            order = torch.randperm(count, generator=gen).to(self.device)
            if count < num_minibatches:  # rollouts cut very short: every step still needs one
                order = order.repeat(-(-num_minibatches // count))[:num_minibatches]
            for index in torch.tensor_split(order, num_minibatches):
                yield self.sequences.select(index)
            return
        envs = self.num_envs
        chunks = count // envs
        if chunks % num_minibatches:
            raise ValueError(f"{chunks} sequences per env cannot be split into "
                             f"{num_minibatches} equal minibatches")
        keys = torch.rand(chunks, total_envs, generator=gen)
        order = keys.argsort(dim=0)[:, self.env_offset:self.env_offset + envs]
        per = chunks // num_minibatches
        env_index = torch.arange(envs).expand(per, envs)
        for j in range(num_minibatches):
            index = (order[j * per:(j + 1) * per] * envs + env_index).flatten()
            yield self.sequences.select(index.to(self.device))

