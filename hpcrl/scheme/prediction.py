"""``hpcrl plan --predict``'s figures as text for people and JSON for scripts, each marked
measured or modelled (what the model reads of a config: :mod:`hpcrl.cli.model_inputs`)."""
from __future__ import annotations

from typing import Any

from hpcrl.scheme.cost_model import Calibration, Prediction
from hpcrl.scheme.links import Network


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
