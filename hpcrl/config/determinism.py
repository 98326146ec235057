"""``train.deterministic``: what a deterministic job promises, which layouts cannot keep the
promise, and whether a job runs deterministically.

A deterministic job's weights depend on its config and seed alone, to the bit: every run
repeats them, and every layout of the same envs whose gradients one learner computes
reaches them (one process; collector ranks feeding one gradient worker, their rollouts
through shared memory or as messages, lz4 or not; acting on the collectors or on
inference ranks, in any env groups). Two things make it so:

- the learner's minibatches hold their rows in one order, whichever rollouts hold them
  (always: :class:`~hpcrl.buffers.rollout_storage.RolloutStorage`);
- every acting forward computes each row on its own where its engine can (the numpy
  engine of an MLP actor on the CPU), so an env's actions, log-probs and values do not
  depend on the envs beside it; under ``true`` an inference rank runs any other engine
  (torch's: memory cores, image encoders) over one request at a time, so its forwards do
  not depend on which requests happened to be ready.

What cannot keep it is timing or a GPU: asynchronous collection or gradients, and DD-PPO
preemption, decide by the clock what an update holds; GPU kernels are chosen by shape and
some add in an order of their own. Several gradient workers repeat their own weights run
to run but not one learner's: their all-reduce sums the gradients of half batches, which
rounds otherwise than one learner summing the whole batch. ``true`` refuses all of these
before any rank starts; ``auto`` (the default) runs deterministically where neither timing
nor a GPU stands in the way, and as fast as it can elsewhere, but leaves an inference rank
serving a torch engine to batch whatever is ready (unbatched, a Nature CNN's forwards take
1.5x the time); ``false`` never pays for any of it.
"""
from __future__ import annotations

import torch

from hpcrl.scheme.topology import collecting_ranks
from hpcrl.sections.schema import Config

KEY = "config key 'train.deterministic' (true)"
FALLBACK = "or set train.deterministic=auto to run it without the promise"


def _on_gpu(device: str, cuda: bool) -> bool:
    """Whether a role given ``device`` runs on a GPU (``auto`` where ``cuda`` is there)."""
    device = device.strip().lower()
    return device.startswith("cuda") or (device == "auto" and cuda)


def timing_problem(c: Config, cuda: bool | None = None) -> str | None:
    """What makes ``c``'s weights depend on timing or on a GPU's kernels, worded for the
    refusal of ``train.deterministic=true``; None when nothing does. ``cuda``: whether a GPU
    is there (default: asked of torch)."""
    s, p = c.scheme, c.scheme.preemption
    if s.collection == "async":
        return (f"{KEY}: asynchronous collection (scheme.collection=async) trains on the "
                f"rollouts that arrived first, so an update depends on timing; use "
                f"scheme.collection=sync (scheme.preset=a2c), {FALLBACK}")
    if s.gradients == "async":
        return (f"{KEY}: asynchronous gradients (scheme.gradients=async) are applied in the "
                f"order they arrive; use scheme.gradients=sync, {FALLBACK}")
    if (p.fraction_workers < 1.0 or p.fraction_samples < 1.0) and collecting_ranks(s) > 1:
        return (f"{KEY}: straggler preemption (scheme.preemption.fraction_workers="
                f"{p.fraction_workers}, fraction_samples={p.fraction_samples}) ends a "
                f"collection when the slowest ranks are late, so a batch depends on timing; "
                f"set both to 1, {FALLBACK}")
    cuda = torch.cuda.is_available() if cuda is None else cuda
    devices = [("train.device", c.train.device)]
    if s.inference_ranks > 0:
        devices.append(("scheme.inference_device", s.inference_device))
    elif s.collectors_per_worker > 0:
        devices.append(("scheme.collector_device", s.collector_device))
    for key, device in devices:
        if _on_gpu(device, cuda):
            return (f"{KEY}: {key}={device} puts a role on a GPU, whose kernels are chosen "
                    f"by the batch's shape and some add in an order of their own; set "
                    f"{key}=cpu, {FALLBACK}")
    return None


def layout_problem(c: Config) -> str | None:
    """What keeps ``c``'s weights from one learner's though each run repeats its own
    (several gradient workers), worded for the refusal; None when nothing does."""
    workers = c.scheme.gradient_workers
    if workers > 1:
        return (f"{KEY}: scheme.gradient_workers={workers} sum their gradients (all-reduce) "
                f"in another order than one learner sums the whole batch, so the weights "
                f"differ from one learner's in their last bits (each run repeats its own); "
                f"use scheme.gradient_workers=1 with collector ranks (scheme.preset=a2c), "
                f"{FALLBACK}")
    return None


def check_deterministic(c: Config) -> str | None:
    """``train.deterministic=true`` only where the layout keeps its promise."""
    if c.train.deterministic is not True:
        return None
    return timing_problem(c) or layout_problem(c)


def runs_deterministically(c: Config, cuda: bool | None = None) -> bool:
    """Whether a job of ``c`` takes the deterministic paths: ``true``, or ``auto`` where
    neither timing nor a GPU decides its weights (:func:`timing_problem`; several gradient
    workers then repeat their own weights run to run). Inference ranks that serve a torch
    engine run one request at a time under ``true`` alone."""
    mode = c.train.deterministic
    if mode == "auto":
        return timing_problem(c, cuda) is None
    return bool(mode)
