"""The ``hpcrl`` command line: the ``hpcrl`` group, with train, eval, plan and config here.

Every command is a layer over the Python API, :mod:`hpcrl.experiments` and
:mod:`hpcrl.slurm`; nothing else in hpcrl imports this package. The other commands live in
its modules: ``hpcrl runs`` and ``hpcrl plot`` in :mod:`hpcrl.cli.runs` (printing tables
through :mod:`hpcrl.cli.text_table`), ``hpcrl sweep`` in :mod:`hpcrl.cli.sweep`, ``hpcrl
slurm`` in :mod:`hpcrl.cli.slurm`, and the way each of them refuses bad input in
:mod:`hpcrl.cli.refusals`. ``python -m hpcrl.cli`` runs the same group as ``hpcrl``.
"""
from __future__ import annotations

import atexit
import gc
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from hpcrl.cli.predict import prediction_options
from hpcrl.cli.refusals import refusing
from hpcrl.config.loader import load_config

SET_HELP = "Override a config key, e.g. --set algo.lr=3e-4 (repeatable)."

# A command ends its process. Freezing the heap last thing (after every other exit handler:
# they run last-registered first) spares the interpreter's final full collection over the
# ~200k objects torch leaves, about 0.5 s of every run; the OS takes the memory back anyway.
atexit.register(gc.freeze)


class _Main(click.Group):
    """The ``hpcrl`` group, noting the status it exits with (a rank of a job that went on
    without lost collectors leaves with it, past MPI's finalisation)."""

    def main(self, *args: Any, **kwargs: Any) -> Any:  # noqa: D102 (click's)
        from hpcrl.comm.faults import record_exit

        try:
            return super().main(*args, **kwargs)
        except SystemExit as exc:
            record_exit(exc.code)
            raise


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="hpcrl")
def main() -> None:
    """Reinforcement learning on HPC clusters: the same agent on 1 process or N MPI ranks."""


@main.command()
@click.argument("config", required=False, type=click.Path(dir_okay=False))
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help=SET_HELP)
@click.option("--run-dir", type=click.Path(file_okay=False), help="Where to write the run "
              "(default: runs/<algo>-<env>-<time>).")
@click.option("--resume", "resume_dir", type=click.Path(file_okay=False, exists=True),
              help="Continue the run in this directory from its last checkpoint.")
@refusing
def train(config: str | None, overrides: tuple[str, ...], run_dir: str | None,
          resume_dir: str | None) -> None:
    """Train an agent. Without CONFIG, trains PPO on CartPole-v1 (the embedded default)."""
    from hpcrl import api

    try:
        if resume_dir is not None:
            if config is not None or run_dir is not None:
                raise click.UsageError("--resume takes the config and run directory of the run "
                                       "it resumes; drop CONFIG/--run-dir")
            result = api.resume(resume_dir, sets=overrides)
        else:
            result = api.train(config, sets=overrides, run_dir=run_dir)
    except api.RunDirTaken as err:
        raise click.UsageError(str(err)) from None
    if result.preempted:
        _exit_preempted(result.run_dir, world_size=result.world_size,
                        tell=result.is_leader and not result.stop_told,
                        env_failed=result.env_failed)


def _exit_preempted(run_dir: Path, world_size: int, tell: bool = True,
                    env_failed: bool = False) -> None:
    """Stopped early after a checkpoint: exit so a batch script knows what to do (status 3
    requeues; 4, an env that failed for good, requeues only while the job makes progress).
    ``tell`` (rank 0 only, under MPI) prints how the run continues: the requeue of a Slurm
    job, or the resume command with the launcher and rank count of this one."""
    from hpcrl.placement.launch import stop_message
    from hpcrl.runtime.signals import EXIT_ENV_FAILED, EXIT_PREEMPTED, STOP_REQUEST

    if tell:
        click.echo(stop_message(run_dir, world_size, STOP_REQUEST.signum), err=True)
    sys.exit(EXIT_ENV_FAILED if env_failed else EXIT_PREEMPTED)


@main.command("eval")
@click.argument("run_dir", type=click.Path(exists=True))
@click.option("--episodes", "-n", type=click.IntRange(min=1), default=None,
              help="Episodes to run (default: the run's train.eval_episodes, at least 1).")
@click.option("--seed", type=int, default=None, help="Seed of the eval episodes.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (for scripts).")
@click.option("--device", default="cpu", show_default=True,
              help="Where the policy runs: 'cpu', 'cuda', 'cuda:N', or 'auto' (a GPU when "
                   "there is one).")
@click.option("--video", type=click.Path(dir_okay=False), default=None,
              help="Also record the episodes, one after the other, to this .mp4 or .gif "
                   "(pip install \"hpcrl[video]\").")
@click.option("--record", "record_path", type=click.Path(dir_okay=False), default=None,
              help="Also write the episodes, one row per step, to this demonstration file "
                   "(.npz: obs, actions, rewards, terminated, truncated; docs/evaluation.md: "
                   "Demonstration files).")
@click.option("--best", is_flag=True, help="The policy that scored best in the evaluations "
              "during training (checkpoints/best.pt; train.eval_every), not the last.")
@click.option("--opponent", default=None,
              help="A self-play run's opponent in every match: 'random', a scripted bot "
                   "'module:Class', or a snapshot's name from hpcrl league (default: the run's "
                   "env.league.eval_opponent); wins, draws and losses are printed.")
@click.option("--max-episode-steps", type=click.IntRange(min=1), default=None,
              help="Cut each episode after this many steps and count it as truncated "
                   "(default: the run's train.eval_max_episode_steps: the env's own time "
                   "limit, or 27,000 steps for an env without one).")
@refusing
def eval_command(run_dir: str, episodes: int | None, seed: int | None,
                 as_json: bool, device: str, video: str | None, record_path: str | None,
                 best: bool, opponent: str | None, max_episode_steps: int | None) -> None:
    """Run the trained policy of RUN_DIR (or a checkpoint file) deterministically."""
    from hpcrl.buffers.demos.files import DemoRecorder
    from hpcrl.cli.league import against, outcome_line
    from hpcrl.envs.multiagent.play_modes import plays_league
    from hpcrl.experiments.video import record
    from hpcrl.learning.evaluation import evaluate, success_note, truncation_note
    from hpcrl.runtime.devices import node_local_rank, pick_device
    from hpcrl.trained.loading import load_policy_and_config

    if record_path is not None and not record_path.endswith(".npz"):
        raise click.UsageError(f"--record '{record_path}': a demonstration file ends in .npz")
    policies = Path(run_dir) / "policies"
    if policies.is_dir() and not (Path(run_dir) / "checkpoints").exists():
        names = ", ".join(sorted(p.name for p in policies.iterdir() if p.is_dir()))
        raise click.UsageError(f"'{run_dir}' is a league job of several policies ({names}), "
                               f"each a run of its own: evaluate one, e.g. hpcrl eval "
                               f"{policies / (names.split(', ')[0] or 'NAME')}")
    where = pick_device(device, node_local_rank(), key="--device")
    actor, cfg = load_policy_and_config(run_dir, where, best)
    if max_episode_steps is not None:
        cfg = replace(cfg, train=replace(cfg.train, eval_max_episode_steps=max_episode_steps))
    if opponent is not None or plays_league(cfg.env):
        cfg = replace(cfg, env=against(cfg.env, Path(run_dir), opponent))
    n = episodes or max(cfg.train.eval_episodes, 1)
    demos = DemoRecorder(n) if record_path is not None else None
    on_step = demos.step if demos is not None else None
    base, cap = cfg.seed if seed is None else seed, cfg.train.eval_max_episode_steps
    result = (record(actor, cfg.env, n, video, base, cap, console=sys.stderr, on_step=on_step)
              if video is not None
              else evaluate(actor, cfg.env, n, base, cap, console=sys.stderr, on_step=on_step))
    if demos is not None and record_path is not None:
        result = {**result, "record": record_path, "record_steps": demos.write(record_path)}
    if as_json:
        click.echo(json.dumps({"env_id": cfg.env.id, **result}))
    else:
        click.echo(f"{cfg.env.id}: mean return {result['mean_return']:.2f} +- "
                   f"{result['std_return']:.2f} over {n} episodes{success_note(result)}"
                   f"{truncation_note(result, '--max-episode-steps')}")
        if plays_league(cfg.env):
            click.echo(outcome_line(result["returns"], cfg.env))
        if video is not None:
            click.echo(f"{video}: {result['frames']} frames")
        if record_path is not None:
            click.echo(f"{record_path}: {result['record_steps']:,} steps of {n} episodes")


@main.command()
@click.argument("config_path", required=False, type=click.Path(dir_okay=False))
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help=SET_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (for scripts).")
@prediction_options
@refusing
def plan(config_path: str | None, overrides: tuple[str, ...], as_json: bool, predict: bool,
         nodes: int, gpus_per_node: int, network_name: str, calibration_dir: str | None,
         calibrate: bool) -> None:
    """Print the rank table of the config's scheme and the world size it needs; with
    --predict, also the cost model's figures at --nodes x --gpus-per-node GPUs."""
    from hpcrl.scheme.plan import plan_json, plan_text
    from hpcrl.slurm.survival import lost_collector_notes

    if not predict and (calibrate or calibration_dir is not None):
        raise click.UsageError("--calibration and --calibrate go with --predict")
    if config_path is None and calibration_dir is not None:
        config_path = str(Path(calibration_dir) / "config.yaml")  # the run's own agent
    cfg = load_config(config_path, overrides)
    if cfg.policies:  # a league job: each policy's plan on its ranks
        if predict:
            raise click.UsageError("--predict models one policy's job: run hpcrl plan "
                                   "--predict on a policy's config (RUN/policies/<name>/"
                                   "config.yaml)")
        from hpcrl.cli.league import league_job_plan

        text, info = league_job_plan(cfg, lost_collector_notes(cfg.scheme))
        click.echo(json.dumps(info) if as_json else text)
        return
    if not predict:
        click.echo(json.dumps(plan_json(cfg)) if as_json
                   else plan_text(cfg, lost_collector_notes(cfg.scheme)))
        return
    from hpcrl.cli.predict import calibration_run, prediction
    from hpcrl.scheme.prediction import prediction_json, prediction_text

    run_dir = (calibration_run(config_path, overrides) if calibrate
               else Path(calibration_dir) if calibration_dir is not None else None)
    figures, cal, net = prediction(cfg, nodes, gpus_per_node, network_name, run_dir)
    if as_json:
        click.echo(json.dumps({**plan_json(cfg), "prediction": prediction_json(
            figures, cal, net, gpus_per_node)}))
    else:
        click.echo(plan_text(cfg, lost_collector_notes(cfg.scheme)) + "\n\n"
                   + prediction_text(figures, cal, net, gpus_per_node))


@main.group()
def config() -> None:
    """Inspect configs."""


@config.command("show")
@click.argument("config_path", required=False, type=click.Path(dir_okay=False))
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help=SET_HELP)
@click.option("--docs", is_flag=True, help="Print every key with its documentation instead.")
@refusing
def config_show(config_path: str | None, overrides: tuple[str, ...], docs: bool) -> None:
    """Print the resolved config (defaults < CONFIG_PATH < --set) as YAML; keys that take
    the chosen algorithm's defaults, or a preset's agent, are marked."""
    from hpcrl.config.docs import annotated_yaml, describe
    from hpcrl.config.loader import load_config_sources

    cfg, sources = load_config_sources(config_path, overrides)
    if docs:
        click.echo(describe(cfg, sources))
    else:
        click.echo(annotated_yaml(cfg, sources), nl=False)


from hpcrl.cli.slurm import slurm as slurm_group  # noqa: E402 (hpcrl slurm render|submit)

main.add_command(slurm_group)
from hpcrl.cli.runs import plot_command, runs_command  # noqa: E402 (hpcrl runs, hpcrl plot)

main.add_command(runs_command)
main.add_command(plot_command)
from hpcrl.cli.sweep import sweep_command  # noqa: E402 (hpcrl sweep)

main.add_command(sweep_command)
from hpcrl.cli.pbt import pbt_command  # noqa: E402 (hpcrl pbt)

main.add_command(pbt_command)
from hpcrl.cli.league import league_command  # noqa: E402 (hpcrl league)

main.add_command(league_command)
