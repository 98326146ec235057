"""``hpcrl plan --predict``: the cost model's figures for a config at N nodes of G GPUs.

The calibration is a run directory's own timings (``--calibration RUN_DIR``), a short run
of the config made here first (``--calibrate``: one process, the same agent, a few
updates), or, without either, per-step costs modelled from published figures
(:mod:`hpcrl.scheme.calibration`).
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import click

from hpcrl.cli.model_inputs import actor_sizes, config_inputs
from hpcrl.scheme.calibration import (
    measured_calibration,
    modelled_calibration,
    read_progress,
)
from hpcrl.scheme.cost_model import Calibration, Prediction, predict
from hpcrl.scheme.links import Network, network
from hpcrl.sections.schema import Config

CALIBRATION_UPDATES = 4
# one process of the same agent: the calibration measures one rank's costs
ONE_PROCESS = ("scheme.gradient_workers=1", "scheme.collectors_per_worker=0",
               "scheme.collection=sync", "scheme.inference_ranks=0",
               "scheme.max_collector_restarts=0", "scheme.min_collectors=1",
               "scheme.preemption.fraction_workers=1.0",
               "scheme.preemption.fraction_samples=1.0")


def calibration_run(config_path: str | None, overrides: tuple[str, ...]) -> Path:
    """A short one-process run of the config (``CALIBRATION_UPDATES`` updates) in a fresh
    temporary directory; returns the run directory."""
    from hpcrl import api
    from hpcrl.config.loader import load_config

    sets = (*overrides, *ONE_PROCESS, "train.tensorboard=false", "train.eval_episodes=0")
    steps = config_inputs(load_config(config_path, sets)).steps_per_collection
    steps *= CALIBRATION_UPDATES
    run_dir = Path(tempfile.mkdtemp(prefix="hpcrl-calibration-")) / "run"
    api.train(config_path, sets=(*sets, f"train.total_env_steps={steps}"), run_dir=run_dir)
    return run_dir


def calibration_for(config: Config, run_dir: Path | None) -> Calibration:
    """The calibration of ``config``'s agent: from ``run_dir`` (whose own config gives its
    collecting ranks) or modelled."""
    from hpcrl.config.loader import load_config

    params, rollout_bytes = actor_sizes(config)
    inputs, env = config_inputs(config), config.env
    if run_dir is None:
        return modelled_calibration(env.preset, inputs.steps_per_collection,
                                    inputs.samples_per_update, inputs.gradient_steps, params,
                                    rollout_bytes, inputs.vector_steps)
    ran = load_config(str(run_dir / "config.yaml"), ())
    return measured_calibration(read_progress(run_dir), inputs.steps_per_collection,
                                config_inputs(ran).collecting_ranks, params,
                                inputs.gradient_steps, rollout_bytes,
                                f"measured in {run_dir}", inputs.vector_steps)


def prediction(config: Config, nodes: int, gpus_per_node: int, network_name: str,
               run_dir: Path | None) -> tuple[Prediction, Calibration, Network]:
    """The model's figures for ``config`` on ``nodes`` x ``gpus_per_node`` GPUs."""
    try:
        net = network(network_name)
    except ValueError as err:
        raise click.UsageError(str(err)) from None
    if run_dir is not None and not (run_dir / "progress.csv").exists():
        raise click.UsageError(f"--calibration {run_dir}: no progress.csv there (a run "
                               f"directory of hpcrl train)")
    cal = calibration_for(config, run_dir)
    shape = config_inputs(config).shape
    return predict(shape, cal, nodes * gpus_per_node, gpus_per_node, net), cal, net


def prediction_options(function: Any) -> Any:
    """The options of ``hpcrl plan`` that ask for a prediction."""
    from hpcrl.scheme.links import DEFAULT_NETWORK, NETWORKS

    options = [
        click.option("--predict", is_flag=True, help="Also print the cost model's figures "
                     "for one gradient worker a GPU on --nodes x --gpus-per-node GPUs "
                     "(docs/scaling.md)."),
        click.option("--nodes", type=click.IntRange(min=1), default=1, show_default=True,
                     help="Nodes of the predicted layout."),
        click.option("--gpus-per-node", type=click.IntRange(min=1), default=8,
                     show_default=True, help="GPUs a node of the predicted layout."),
        click.option("--network", "network_name", type=click.Choice(list(NETWORKS)),
                     default=DEFAULT_NETWORK, show_default=True,
                     help="Nodes and network of the predicted layout."),
        click.option("--calibration", "calibration_dir",
                     type=click.Path(file_okay=False, exists=True), default=None,
                     help="A run directory whose progress.csv gives the per-rank times "
                          "(else modelled from published figures)."),
        click.option("--calibrate", is_flag=True, help="Make a short one-process run of "
                     "the config first and calibrate on it."),
    ]
    for option in reversed(options):
        function = option(function)
    return function
