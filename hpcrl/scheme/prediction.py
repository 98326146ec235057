"""``hpcrl plan --predict``: a config's scheme at N nodes of G GPUs, as the cost model sees it.

A config's inputs to the model (:func:`config_inputs`: its scheme's shape, the steps a
collecting rank fills, a gradient worker's gradient steps and samples per update) and the
text and JSON the plan prints (:func:`prediction_text`, :func:`prediction_json`). The model
scales weakly: one gradient worker per GPU, each with the config's collector ranks, envs and
batch, and the config's gradient steps per update on each (a job of N workers keeps each
worker's minibatches only where its ``algo.ppo.minibatch_size`` grows with N).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hpcrl.algorithms import algorithm_capabilities
from hpcrl.algorithms.own_section import own_section
from hpcrl.scheme.cost_model import Calibration, Prediction, Shape, shape_of
from hpcrl.scheme.links import Network

if TYPE_CHECKING:  # annotations only
    from hpcrl.config.schema import Config


@dataclass(frozen=True)
class ConfigInputs:
    """What the model reads of a config: its scheme's shape, a collecting rank's env steps
    per rollout, a gradient worker's gradient steps and samples (over all epochs) per
    update, and the collecting ranks of the config's own layout."""

    shape: Shape
    steps_per_collection: int
    gradient_steps: int
    samples_per_update: int
    collecting_ranks: int


def gradient_steps_per_update(config: Config) -> tuple[int, int]:
    """A gradient worker's gradient steps per update and the samples they go over: PPO's
    epochs x minibatches; one step on the whole batch (A2C, IMPALA); a replay agent's
    training rounds in one chunk of ``algo.num_steps`` x its gradient steps."""
    from hpcrl.config.validate import minibatches_per_epoch

    s, algo = config.scheme, config.algo
    per_worker = max(s.collectors_per_worker, 1)
    samples = algo.num_steps * config.env.num_envs * per_worker
    caps = algorithm_capabilities(algo.name)
    if caps.learns_from == "replay":
        r = config.replay
        rounds = max(algo.num_steps // max(r.train_freq, 1), 1)
        per_round = r.gradient_steps if r.gradient_steps > 0 else r.train_freq
        steps = rounds * per_round
        return steps, steps * r.batch_size
    if caps.minibatched_epochs:
        epochs = int(getattr(own_section(algo), "num_epochs", 1))
        return epochs * minibatches_per_epoch(config), epochs * samples
    return 1, samples


def config_inputs(config: Config) -> ConfigInputs:
    """The model's inputs from ``config`` (see :class:`ConfigInputs`)."""
    from hpcrl.scheme.topology import collecting_ranks

    steps, samples = gradient_steps_per_update(config)
    return ConfigInputs(shape_of(config.scheme), config.algo.num_steps * config.env.num_envs,
                        steps, samples, collecting_ranks(config.scheme))


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms" if seconds < 1 else f"{seconds:,.2f} s"


def scaling_loss(p: Prediction) -> str:
    """What costs the layout most of its efficiency, in words."""
    lost = {"stragglers (waiting for the slowest collecting rank)": p.straggler_s,
            "steps stragglers did not collect (preemption)": (1 - p.collected) * p.update_s,
            "the gradient all-reduce": p.allreduce_s,
            "hpcrl's own coordination (reports, decisions, per-peer and per-collector "
            "messages)": p.coordination_s}
    name = max(lost, key=lambda key: lost[key])
    return f"{name}, {_ms(lost[name])} an update" if lost[name] > 0 else "nothing: one GPU"


def prediction_text(p: Prediction, cal: Calibration, net: Network, gpus_per_node: int
                    ) -> str:
    """The prediction as lines for people, each figure marked measured or modelled."""
    def kind(*names: str) -> str:
        return "measured" if all(n in cal.measured for n in names) else "modelled"

    collect_kind = kind("collect_s")
    lines = [f"prediction: {p.nodes} node{'s' if p.nodes != 1 else ''} x {gpus_per_node} "
             f"GPU{'s' if gpus_per_node != 1 else ''} = {p.gpus} gradient worker"
             f"{'s' if p.gpus != 1 else ''} (one a GPU), network {net.name}: {net.summary}",
             f"  env steps/s        {p.frames_per_s:>14,.0f}   modelled",
             f"  update             {_ms(p.update_s):>14}   modelled, of which",
             f"    collection       {_ms(p.collect_s):>14}   {collect_kind}",
             f"    straggler wait   {_ms(p.straggler_s):>14}   modelled (spread "
             f"{cal.collect_cv:.3f}, {kind('collect_cv')})",
             f"    compute          {_ms(p.compute_s):>14}   {kind('compute_s')}",
             f"    communication    {_ms(p.communicate_s):>14}   modelled: all-reduce "
             f"{_ms(p.allreduce_s)} ({cal.allreduces} x {cal.grad_bytes / 1e6:.1f} MB), hpcrl "
             f"coordination {_ms(p.coordination_s)}",
             f"  steps collected    {p.collected:>14.1%}   modelled",
             f"  efficiency         {p.efficiency:>14.3f}   modelled, against one GPU "
             f"({p.node_efficiency:.3f} against one node)",
             f"  limiting           {p.limiting}; scaling costs most: {scaling_loss(p)}",
             f"  calibration: {cal.source}"]
    return "\n".join(lines)


def prediction_json(p: Prediction, cal: Calibration, net: Network, gpus_per_node: int
                    ) -> dict[str, Any]:
    """The prediction as JSON-ready data, with the names of the measured inputs."""
    return {"nodes": p.nodes, "gpus_per_node": gpus_per_node, "gpus": p.gpus,
            "network": net.name, "frames_per_s": p.frames_per_s, "update_s": p.update_s,
            "split_s": p.split, "allreduce_s": p.allreduce_s,
            "coordination_s": p.coordination_s, "collected": p.collected,
            "efficiency": p.efficiency, "node_efficiency": p.node_efficiency,
            "limiting": p.limiting, "calibration": cal.source,
            "measured": sorted(cal.measured),
            "modelled": sorted({"collect_s", "collect_cv", "compute_s"} - cal.measured)
            + ["all-reduce", "coordination", "stragglers"]}
