"""ViZDoom against Sample Factory: the same machine, scenario and wall-clock budget.

Per scenario (Basic and HealthGathering by default), one after the other, never two at once,
each for ``--seconds`` of wall-clock from its launch (start-up included):

* Sample Factory 2.1.1's APPO (``sf_examples.vizdoom.train_vizdoom``: its own scenario files,
  action sets and wrappers, 160x120 screens resized to 128x72 RGB) with its network set as
  close to hpcrl's showcase as its flags allow: ``--encoder_conv_architecture=resnet_impala``
  (16-32-32 residual stacks) with one linear layer of ``actor.features``, a GRU of
  ``actor.memory_size``, the recipe's rollout, epochs, learning rate, discount, GAE lambda,
  clip range, entropy (``--exploration_loss=entropy``), value and gradient-norm coefficients,
  frame skip, and the whole job's env count and gradient batch (``--batch_size`` = the
  minibatch of every gradient worker together, ``--num_batches_per_epoch`` so that one
  iteration trains on one rollout of every env), on ``--sf-workers`` rollout workers, CPU.
  What it cannot match: it stacks no frames (the GRU alone remembers), its scenarios feed no
  game variables to these two, it normalises inputs and returns (its Doom defaults), and its
  HealthGathering has 5 actions (hpcrl's Gymnasium id 4). Sample Factory's
  ``--train_for_seconds`` never fires in 2.1.1 (its runner never advances the clock it
  checks), so the script interrupts it when the budget is spent (SIGINT, and 15 s later
  SIGKILL: in a trial its runner had not stopped 30 s after SIGINT while its learner was in
  an update), its scores read from the TensorBoard events it flushed every 5 s;
* hpcrl's showcase (``examples/showcase-vizdoom.yaml``: PPO, IMPALA ResNet with Fixup, GRU
  256, 2 synchronous gradient workers each fed by 4 asynchronous collectors, 10 ranks) and
  other layouts of the same agent (``--layouts``; the default adds the two candidates for the
  fastest on a 2-core machine, 1 gradient worker + 2 collectors and one process, and the
  table names the faster), under ``mpiexec`` with ``train.total_env_steps`` out of reach,
  sent SIGUSR1 when the budget is spent (mpiexec forwards it, every rank checkpoints at the
  end of its update and stops); ``hpcrl eval`` then plays ``--eval-episodes`` deterministic
  games. Each rank runs one torch thread (``OMP_NUM_THREADS=1``), Sample Factory's too.

Figures, per job: env frames per second and agent steps per second (frames / frame skip;
both systems count frames after their start-up: Sample Factory from its second status line,
hpcrl from its first update), the final training score (the mean game score of the last 100
episodes, both systems' own window, in the scenario's raw reward: Sample Factory's
``true_objective`` before its shaping, mapped back to ViZDoom's own reward: see
``SCENARIOS``),
hpcrl's evaluation score, and the score per hour: the final score's gain over random play
(measured here, ``--random-episodes`` games) per hour of budget, with hpcrl's ratio to Sample
Factory's. A table, a JSON of everything (``--json``) and one PNG of the learning curves
(score against seconds since launch, one panel per scenario, ``--png``). Only figures of one
invocation compare: the machine line above the table says which CPU they come from.

Sample Factory needs gymnasium < 1.0, numpy < 2 and a ViZDoom of its time (1.2.4 works with
its ``sf_examples.vizdoom``), so it lives in its own virtual environment::

    python -m venv /tmp/sfvenv
    /tmp/sfvenv/bin/pip install torch sample-factory==2.1.1 'gymnasium<1.0' 'numpy<2' \\
        opencv-python-headless tensorboard vizdoom==1.2.4

(``tensorboard`` reads its event files; the venv of the first figures had the others from
``benchmarks/node_throughput.py``'s line and got ``pip install vizdoom==1.2.4`` on top, which
brings pygame). hpcrl's side: ``pip install -e '.[vizdoom,bench]'``.

    python benchmarks/vizdoom_vs_sample_factory.py --sf-python /tmp/sfvenv/bin/python \\
        --seconds 600 --scenarios basic health_gathering
    python benchmarks/vizdoom_vs_sample_factory.py --skip-sf --seconds 120 --scenarios basic
        # hpcrl's layouts alone (which is fastest here)
    python benchmarks/vizdoom_vs_sample_factory.py --sf-python /tmp/sfvenv/bin/python \\
        --seconds 80 --set actor.encoder=nature_cnn --set actor.encoder_init=default \\
        --set algo.num_steps=32 --set algo.ppo.minibatch_size=256 --set env.num_envs=4 \\
        --layouts showcase 1x2:scheme.gradient_workers=1,scheme.collectors_per_worker=2 \\
        --eval-episodes 2 --random-episodes 10   # a light smoke test of the whole benchmark
    python benchmarks/vizdoom_vs_sample_factory.py --from-json docs/figures/A.json \
        --merge B.json   # one table and plot of jobs of one budget run apart (the hour-long
                         # jobs: one machine could not spare their three hours at once)
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from gpu_pong import evaluate
from machine import machine_line
from mpi_scaling import as_args, environment, mpiexec, plan, progress_rows, steps_per_second
from node_throughput import SF_STATUS

from hpcrl.runtime.signals import EXIT_PREEMPTED

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "examples" / "showcase-vizdoom.yaml"
FIGURES = ROOT / "docs" / "figures"  # shown on docs/benchmarks.md (mkdocs serves docs/)


@dataclass(frozen=True)
class Scenario:
    """One ViZDoom scenario on both sides: hpcrl's Gymnasium id, Sample Factory's env name,
    and how Sample Factory's reported score maps back to the game's reward as ViZDoom's own
    scenario file counts it: ``game = sf_score_scale * sf + sf_score_offset``."""

    gym_id: str
    sf_env: str
    sf_score_scale: float = 1.0
    sf_score_offset: float = 0.0

    def game_score(self, sf_value: float) -> float:
        """Sample Factory's ``true_objective`` in the units of hpcrl's (ViZDoom's) reward."""
        return self.sf_score_scale * sf_value + self.sf_score_offset


# Sample Factory ships its own scenario files with rewards scaled by 0.01: on Basic every
# reward (so x100); on the two gathering scenarios its living reward is 0.01 a tic and dying
# costs nothing, where ViZDoom's own file gives 1 a tic and takes 100 off for dying. There
# SF's score x100 is the tics survived, and x100 - 100 the game's score of an episode that
# ended in death, which is every episode until an agent survives the 2,100-tic time limit
# (none in these budgets; one that does is undercounted by 100).
SCENARIOS = {
    "basic": Scenario("VizdoomBasic-v1", "doom_basic", 100.0),
    "health_gathering": Scenario("VizdoomHealthGathering-v1", "doom_health_gathering",
                                 100.0, -100.0),
    "health_gathering_supreme": Scenario("VizdoomHealthGatheringSupreme-v1",
                                         "doom_health_gathering_supreme", 100.0, -100.0),
}
# the layouts run by default: the showcase, and the two candidates for the fastest of the
# same agent on a 2-core machine, 1 gradient worker + 2 asynchronous collectors and one
# process (8 envs: half the minibatch); the table names the fastest of the run
DEFAULT_LAYOUTS = ("showcase",
                   "1x2:scheme.gradient_workers=1,scheme.collectors_per_worker=2",
                   "serial:scheme.gradient_workers=1,scheme.collectors_per_worker=0,"
                   "scheme.collection=sync,algo.ppo.minibatch_size=512")


@dataclass
class Job:
    """What one training job gave: throughput, scores and its learning curve."""

    system: str
    layout: str
    scenario: str
    budget_s: float
    wall_s: float = math.nan
    frames: float = math.nan
    agent_steps: float = math.nan
    frames_per_s: float = math.nan
    agent_steps_per_s: float = math.nan
    frame_skip: int = 1
    train_score: float = math.nan
    eval_score: float = math.nan
    eval_std: float = math.nan
    score_per_hour: float = math.nan
    curve: list[tuple[float, float]] = field(default_factory=list)  # (s since launch, score)
    note: str = ""
    # Sample Factory's scores: "game" once mapped to the game's reward (Scenario.game_score);
    # a JSON written before that mapping existed holds its raw true_objective ("raw")
    score_units: str = "game"


def run_for(cmd: list[str], seconds: float, log: Path, stop: signal.Signals, *,
            to_group: bool, env: dict[str, str], cwd: Path | None = None,
            watch: Path | None = None, grace_s: float = 180.0,
            tick: Callable[[int], None] | None = None) -> tuple[int, float, float]:
    """Run ``cmd`` in a session of its own, output to ``log``; after ``seconds`` send it
    ``stop`` (to its whole process group with ``to_group``), wait ``grace_s`` for it to
    finish, then kill the group. Returns its exit code, wall seconds and the seconds from
    launch to when the file ``watch`` first held a line after its header (polled every
    0.5 s; nan if never). ``tick(pid)`` is called at every poll while it runs (a sampler
    of its memory, say)."""
    start = time.monotonic()
    seen = math.nan
    with open(log, "w") as out:
        job = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                               start_new_session=True)
        try:
            stopped = False
            while job.poll() is None:
                now = time.monotonic() - start
                if watch is not None and math.isnan(seen) and has_row(watch):
                    seen = now
                if tick is not None:
                    tick(job.pid)
                if not stopped and now >= seconds:
                    (os.killpg if to_group else os.kill)(job.pid, stop)
                    stopped = True
                elif stopped and now >= seconds + grace_s:
                    break
                time.sleep(0.5)
        finally:
            try:  # what is left of the job, Sample Factory's workers included
                os.killpg(job.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            code = job.wait()
    return code, time.monotonic() - start, seen


@contextlib.contextmanager
def job_dir(keep: Path | None, name: str) -> Iterator[str]:
    """A folder for one job's run and log: under ``keep`` (kept, for a look afterwards) or a
    temporary one."""
    if keep is None:
        with tempfile.TemporaryDirectory() as tmp:
            yield tmp
    else:
        keep.mkdir(parents=True, exist_ok=True)
        yield tempfile.mkdtemp(prefix=f"{name}-", dir=keep)


def has_row(path: Path) -> bool:
    """Whether the CSV file ``path`` exists and holds a row after its header."""
    try:
        return path.read_text().count("\n") >= 2
    except OSError:
        return False


def tail(path: Path, chars: int = 2500) -> str:
    """The end of a log file."""
    return path.read_text(errors="replace")[-chars:]


# --- Sample Factory --------------------------------------------------------------------

# run with Sample Factory's python: its TensorBoard scalars of the given tags as JSON
READ_EVENTS = """import json, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
acc = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0})
acc.Reload()
have = set(acc.Tags()["scalars"])
print(json.dumps({t: [(e.wall_time, e.step, e.value) for e in acc.Scalars(t)]
                  for t in sys.argv[2:] if t in have}))
"""
SF_SCORE_TAG = "policy_stats/avg_true_objective"  # the game's score, before SF's shaping
# hpcrl's image encoders and Sample Factory's nearest: the same IMPALA stacks (16-32-32), and
# its convnet_atari, the Nature CNN's three convolutions
SF_ENCODERS = {"impala_resnet": "resnet_impala", "nature_cnn": "convnet_atari"}


def sample_factory_flags(config: dict[str, Any], total_envs: int, gradient_workers: int,
                         workers: int, frame_skip: int) -> list[str]:
    """Sample Factory's flags for the agent and batch of hpcrl's resolved ``config``: the
    whole job's ``total_envs`` over ``workers`` rollout workers, one iteration per rollout of
    every env, the minibatch of all ``gradient_workers`` together."""
    actor, algo = config["actor"], config["algo"]
    ppo = algo.get("ppo", algo)  # PPO's own keys (algo.ppo.*; flat in configs of old)
    rollout = int(algo["num_steps"])
    per_worker = max(1, total_envs // workers)
    batch = int(ppo["minibatch_size"]) * gradient_workers
    batches = max(1, rollout * per_worker * workers // batch)  # hpcrl's minibatches per epoch
    recurrence = int(algo.get("bptt_len") or 0) or max(1, rollout // batches)
    if rollout % recurrence or batch % recurrence:
        recurrence = rollout
    return [
        "--algo=APPO", "--async_rl=True", "--device=cpu", f"--num_workers={workers}",
        f"--num_envs_per_worker={per_worker}",
        f"--worker_num_splits={2 if per_worker % 2 == 0 else 1}",
        f"--env_frameskip={frame_skip}", "--res_w=128", "--res_h=72",
        f"--encoder_conv_architecture={SF_ENCODERS[actor.get('encoder', 'impala_resnet')]}",
        f"--encoder_conv_mlp_layers={int(actor['features'])}",
        f"--use_rnn={actor.get('memory', 'none') != 'none'}",
        f"--rnn_type={actor.get('memory') if actor.get('memory') in ('gru', 'lstm') else 'gru'}",
        f"--rnn_size={int(actor.get('memory_size', 256))}",
        f"--nonlinearity={actor.get('activation', 'relu')}",
        f"--rollout={rollout}", f"--recurrence={recurrence}", f"--batch_size={batch}",
        f"--num_batches_per_epoch={batches}", f"--num_epochs={int(ppo['num_epochs'])}",
        f"--learning_rate={float(algo['lr'])}", f"--gamma={float(algo['gamma'])}",
        f"--gae_lambda={float(algo['gae_lambda'])}",
        f"--ppo_clip_ratio={float(ppo['clip_range'])}",
        "--exploration_loss=entropy", f"--exploration_loss_coeff={float(algo['ent_coef'])}",
        f"--value_loss_coeff={float(algo['vf_coef'])}",
        f"--max_grad_norm={float(algo['max_grad_norm'])}",
        "--with_wandb=False", "--save_every_sec=100000", "--experiment_summaries_interval=5",
        "--flush_summaries_interval=5",
        "--decorrelate_envs_on_one_worker=False",
    ]


def sample_factory_job(python: str, scenario: str, flags: list[str], seconds: float,
                       frame_skip: int, keep: Path | None = None) -> Job:
    """Sample Factory's APPO on ``scenario`` for ``seconds`` of wall-clock (its folder kept
    under ``keep`` if given)."""
    spec = SCENARIOS[scenario]
    job = Job("sample-factory", "APPO", scenario, seconds, frame_skip=frame_skip)
    with job_dir(keep, f"sf-{scenario}") as tmp:
        log = Path(tmp) / "stdout.txt"
        cmd = [python, "-m", "sf_examples.vizdoom.train_vizdoom", f"--env={spec.sf_env}",
               "--experiment=run", f"--train_dir={tmp}", *flags]
        launched = time.time()
        code, job.wall_s, _ = run_for(cmd, seconds, log, signal.SIGINT, to_group=True,
                                      env=environment(), cwd=Path(tmp), grace_s=15.0)
        text = log.read_text(errors="replace")
        if "Traceback" in text and not SF_STATUS.search(text):
            raise SystemExit(f"Sample Factory failed ({code}):\n{tail(log)}")
        status = [(datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp(),
                   int(m.group(2))) for m in SF_STATUS.finditer(text)]
        status = [(t, f) for t, f in status if t - launched <= seconds]
        moving = [(t, f) for t, f in status if f > 0]
        if status:
            job.frames = float(status[-1][1])
            job.agent_steps = job.frames / frame_skip
        if len(moving) > 2 and moving[-1][1] > moving[1][1]:
            (t0, f0), (t1, f1) = moving[1], moving[-1]
            job.frames_per_s = (f1 - f0) / (t1 - t0)
        elif status and job.frames > 0:  # its counter moved once (one learner iteration in
            # the budget): no rate after start-up to read, so frames over the time from launch
            job.frames_per_s = job.frames / (status[-1][0] - launched)
        job.agent_steps_per_s = job.frames_per_s / frame_skip
        events = subprocess.run([python, "-c", READ_EVENTS,
                                 str(Path(tmp) / "run" / ".summary" / "0"), SF_SCORE_TAG],
                                capture_output=True, text=True)
        scalars = json.loads(events.stdout or "{}").get(SF_SCORE_TAG, [])
    job.curve = [(wall - launched, spec.game_score(value))
                 for wall, _, value in scalars if wall - launched <= seconds]
    if job.curve:
        job.train_score = job.curve[-1][1]
    else:
        job.note = "no finished episodes reported"
    return job


# --- hpcrl -----------------------------------------------------------------------------

def parse_layout(spec: str) -> tuple[str, list[str]]:
    """``NAME`` or ``NAME:key=value,key=value``: a layout's name and its ``--set`` keys over
    the recipe's."""
    name, _, sets = spec.partition(":")
    return name, [item for item in sets.split(",") if item]


def hpcrl_sets(scenario: str, sets: list[str]) -> list[str]:
    """The ``--set`` keys of every hpcrl job: the scenario, no end in sight, no evaluation
    during training (the budget is the same wall-clock for everyone)."""
    return [f"env.id={SCENARIOS[scenario].gym_id}", "train.total_env_steps=1000000000",
            "train.eval_episodes=0", "train.tensorboard=false", "train.log_interval_s=5",
            *sets]


def resolved_config(recipe: Path, sets: list[str]) -> dict[str, Any]:
    """The recipe with ``sets`` applied (the keys Sample Factory's flags are read from)."""
    config = yaml.safe_load(recipe.read_text())
    for item in sets:
        key, _, value = item.partition("=")
        *path, last = key.split(".")
        node = config
        for part in path:
            node = node.setdefault(part, {})
        node[last] = yaml.safe_load(value)
    return config


def hpcrl_job(recipe: Path, scenario: str, layout: str, sets: list[str], seconds: float,
              eval_episodes: int, keep: Path | None = None) -> Job:
    """hpcrl's ``layout`` of the recipe on ``scenario`` for ``seconds`` of wall-clock (its
    run kept under ``keep`` if given)."""
    sets = hpcrl_sets(scenario, sets)
    ranks = int(plan(recipe, sets)["world_size"])
    skip = int(resolved_config(recipe, sets)["env"].get("vizdoom", {}).get("frame_skip", 4))
    job = Job("hpcrl", f"{layout} ({ranks} ranks)", scenario, seconds, frame_skip=skip)
    with job_dir(keep, f"hpcrl-{layout}-{scenario}") as tmp:
        run = Path(tmp) / "run"
        cmd = [mpiexec(), "-n", str(ranks), sys.executable, "-m", "hpcrl.cli", "train",
               str(recipe), "--run-dir", str(run), *as_args(sets)]
        code, job.wall_s, seen = run_for(cmd, seconds, Path(tmp) / "log.txt", signal.SIGUSR1,
                                         to_group=False, env=environment(),
                                         watch=run / "progress.csv")
        if not has_row(run / "progress.csv"):
            if code not in (0, EXIT_PREEMPTED):
                raise SystemExit(f"hpcrl {layout} failed ({code}):\n"
                                 f"{tail(Path(tmp) / 'log.txt')}")
            job.note = "no update within the budget"
            return job
        rows = progress_rows(run)
        # progress.csv's clock starts with training: shift it to the launch, by when its
        # first row appeared
        offset = seen - float(rows[0]["wall_time_s"]) if not math.isnan(seen) else 0.0
        inside = [r for r in rows if float(r["wall_time_s"]) + offset <= seconds] or rows[:1]
        job.agent_steps = float(inside[-1]["env_steps"])
        job.frames = job.agent_steps * skip
        # after the first update (start-up excluded); with one row, that update's own rate
        job.agent_steps_per_s = (steps_per_second(inside) if len(inside) > 1 else
                                 job.agent_steps / float(inside[0]["wall_time_s"]))
        job.frames_per_s = job.agent_steps_per_s * skip
        job.curve = [(float(r["wall_time_s"]) + offset, float(r["episode_return_mean"]))
                     for r in inside if r.get("episode_return_mean", "") not in ("", "nan")]
        if job.curve:
            job.train_score = job.curve[-1][1]
        if eval_episodes > 0 and (run / "checkpoints").is_dir():
            score = evaluate(run, eval_episodes, "cpu")
            job.eval_score, job.eval_std = score["mean_return"], score["std_return"]
    return job


# --- random play, the table, the figure --------------------------------------------------

def random_score(scenario: str, episodes: int, frame_skip: int) -> float:
    """The mean game score of uniformly random actions over ``episodes`` games (hpcrl's
    Gymnasium id, the same frame skip): the floor every learner starts from."""
    import gymnasium as gym

    importlib.import_module("vizdoom.gymnasium_wrapper")  # registers the ids

    env = gym.make(SCENARIOS[scenario].gym_id, frame_skip=frame_skip)
    env.action_space.seed(0)
    total = 0.0
    for episode in range(episodes):
        env.reset(seed=episode)
        done = False
        while not done:
            _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            total += float(reward)
            done = terminated or truncated
    env.close()
    return total / episodes


def plain(value: Any) -> Any:
    """``value`` with every nan made None, for strict JSON."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def ratio(a: float, b: float) -> str:
    """``a / b`` as text, or why there is none."""
    if math.isnan(a) or math.isnan(b) or b <= 0:
        return "n/a"
    return f"{a / b:.2f}x"


def print_table(jobs: list[Job], floors: dict[str, float]) -> None:
    """One markdown table of every job, then hpcrl's ratios to Sample Factory."""
    print("| scenario | system | layout | frames/s | agent steps/s | agent steps | "
          "training score | eval score | score/h over random |")
    print("|---|---|---|---|---|---|---|---|---|")
    for j in jobs:
        ev = "-" if math.isnan(j.eval_score) else f"{j.eval_score:.1f} +- {j.eval_std:.1f}"
        print(f"| {j.scenario} (random {floors[j.scenario]:.1f}) | {j.system} | {j.layout} | "
              f"{j.frames_per_s:,.1f} | {j.agent_steps_per_s:,.1f} | {j.agent_steps:,.0f} | "
              f"{j.train_score:.1f} | {ev} | {j.score_per_hour:,.1f} |")
    for scenario in dict.fromkeys(j.scenario for j in jobs):
        mine = [j for j in jobs if j.scenario == scenario]
        sf = next((j for j in mine if j.system == "sample-factory"), None)
        if sf is None:
            continue
        ours = [j for j in mine if j.system == "hpcrl" and not math.isnan(j.frames_per_s)]
        fastest = max(ours, key=lambda j: j.frames_per_s, default=None)
        for j in mine:
            if j.system == "hpcrl":
                mark = " (the fastest layout)" if j is fastest else ""
                print(f"{scenario}: hpcrl {j.layout}{mark} / Sample Factory: frames/s "
                      f"{ratio(j.frames_per_s, sf.frames_per_s)}, score per hour "
                      f"{ratio(j.score_per_hour, sf.score_per_hour)}")


def plot(jobs: list[Job], floors: dict[str, float], png: Path, seconds: float,
         machine: str) -> None:
    """The learning curves, score against seconds since launch, one panel per scenario."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scenarios = list(dict.fromkeys(j.scenario for j in jobs))
    labels = list(dict.fromkeys(f"{j.system} {j.layout}" for j in jobs))
    colours = {label: f"C{i}" for i, label in enumerate(labels)}  # one per job, every panel
    fig, axes = plt.subplots(1, len(scenarios), figsize=(5.5 * len(scenarios), 3.8), dpi=120,
                             squeeze=False)
    for ax, scenario in zip(axes[0], scenarios, strict=False):
        for j in (j for j in jobs if j.scenario == scenario):
            if j.curve:
                xs, ys = zip(*j.curve, strict=False)
                label = f"{j.system} {j.layout}"
                ax.plot(xs, ys, lw=1.3, label=label, color=colours[label])
        ax.axhline(floors[scenario], color="grey", ls="--", lw=0.8, label="random play")
        ax.set_xlim(0, seconds)
        ax.set_title(f"{SCENARIOS[scenario].gym_id}, {seconds:.0f} s each")
        ax.set_xlabel("wall-clock seconds since launch")
        ax.set_ylabel("game score (mean of last 100 episodes)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(machine[:110], fontsize=7)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png)


# what the first version of this script multiplied Sample Factory's scores by, before it
# recorded score_units: Basic x100, the rest left raw
LEGACY_SF_SCALE = {"basic": 100.0}


def load_jobs(path: Path) -> tuple[dict[str, Any], list[Job]]:
    """A JSON this script wrote, and its jobs; Sample Factory's raw scores of an older JSON
    (no ``score_units``) are mapped to the game's reward, and every score per hour is
    computed again from the scores and the random floor."""
    data = json.loads(path.read_text())
    jobs = []
    for raw in data["jobs"]:
        raw = {k: (math.nan if v is None else v) for k, v in raw.items()}
        job = Job(**{**raw, "curve": [tuple(point) for point in raw.get("curve", [])]})
        if job.system == "sample-factory" and raw.get("score_units", "raw") == "raw":
            spec, had = SCENARIOS[job.scenario], LEGACY_SF_SCALE.get(job.scenario, 1.0)
            job.curve = [(t, spec.game_score(v / had)) for t, v in job.curve]
            job.train_score = spec.game_score(job.train_score / had)
        job.score_units = "game"
        job.score_per_hour = ((job.train_score - data["random"][job.scenario])
                              / (job.budget_s / 3600))
        jobs.append(job)
    return data, jobs


def report(data: dict[str, Any], jobs: list[Job], json_path: Path, png: Path) -> None:
    """The table and ratios on standard output, the JSON and the PNG of the curves."""
    print(f"\nViZDoom, {data['seconds']:.0f} s of wall-clock per job, one job at a time; "
          f"scores in the game's reward, training score = mean of the last 100 episodes")
    print_table(jobs, data["random"])
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(plain({**data, "jobs": [asdict(j) for j in jobs]}),
                                    indent=1))
    plot(jobs, data["random"], png, data["seconds"], data["machine"])
    print(f"results: {json_path}\ncurves: {png}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from-json", type=Path, default=None,
                        help="no jobs: print the table and draw the curves of a JSON this "
                             "script wrote (rewritten in place unless --json/--png say "
                             "otherwise)")
    parser.add_argument("--merge", type=Path, nargs="+", default=[],
                        help="with --from-json: add the jobs of these JSONs (runs of the same "
                             "budget on the same machine, taken apart; each job keeps its "
                             "own run's machine line and random-play floor in the JSON)")
    parser.add_argument("--sf-python", help="the python of Sample Factory's venv")
    parser.add_argument("--skip-sf", action="store_true", help="hpcrl's layouts only")
    parser.add_argument("--seconds", type=float, default=600.0,
                        help="wall-clock budget of every job, start-up included")
    parser.add_argument("--scenarios", nargs="+", default=["basic", "health_gathering"],
                        choices=sorted(SCENARIOS))
    parser.add_argument("--layouts", nargs="+", default=list(DEFAULT_LAYOUTS),
                        help="hpcrl layouts, NAME or NAME:key=value,key=value over the recipe")
    parser.add_argument("--recipe", type=Path, default=RECIPE)
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="a key over the recipe for every job (repeatable); Sample "
                             "Factory's flags follow, e.g. algo.num_steps=32")
    parser.add_argument("--sf-workers", type=int, default=2,
                        help="Sample Factory's rollout workers (the job's envs spread over them)")
    parser.add_argument("--sf-frameskip", type=int, default=0,
                        help="Sample Factory's frame skip (0: the recipe's)")
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep every job's run and log in a folder under this one")
    parser.add_argument("--random-episodes", type=int, default=30)
    parser.add_argument("--json", type=Path, default=FIGURES / "vizdoom_vs_sample_factory.json")
    parser.add_argument("--png", type=Path, default=FIGURES / "vizdoom_vs_sample_factory.png")
    args = parser.parse_args()
    if args.merge and args.from_json is None:
        parser.error("--merge adds to the JSON that --from-json names")
    if args.from_json is not None:
        data, jobs = load_jobs(args.from_json)
        for path in args.merge:
            more, added = load_jobs(path)
            if more["seconds"] != data["seconds"]:
                parser.error(f"{path} ran {more['seconds']:.0f} s a job, "
                             f"{args.from_json} {data['seconds']:.0f} s")
            data.setdefault("merged", []).append(
                {"json": path.name, "machine": more["machine"], "random": more["random"],
                 "jobs": [f"{j.system} {j.layout} {j.scenario}" for j in added]})
            for job in added:  # one random-play floor per scenario in the table
                floor = data["random"].setdefault(job.scenario, more["random"][job.scenario])
                job.score_per_hour = (job.train_score - floor) / (job.budget_s / 3600)
            jobs += added
        explicit = {a.split("=")[0] for a in sys.argv[1:]}
        report(data, jobs, args.json if "--json" in explicit else args.from_json,
               args.png if "--png" in explicit else args.from_json.with_suffix(".png"))
        return 0
    if not args.skip_sf and not args.sf_python:
        parser.error("--sf-python is needed (or --skip-sf)")
    print(machine_line(), flush=True)
    layouts = [(name, args.sets + sets) for name, sets in map(parse_layout, args.layouts)]
    showcase = resolved_config(args.recipe, args.sets)
    skip = int(showcase["env"].get("vizdoom", {}).get("frame_skip", 4))
    sf_skip = args.sf_frameskip or skip
    scheme = plan(args.recipe, args.sets)
    sf_flags = sample_factory_flags(showcase, int(scheme["total_envs"]),
                                    int(showcase["scheme"].get("gradient_workers", 1)),
                                    args.sf_workers, sf_skip)
    if not args.skip_sf:
        print("Sample Factory:", " ".join(sf_flags), flush=True)
    jobs: list[Job] = []
    floors: dict[str, float] = {}
    for scenario in args.scenarios:
        floors[scenario] = random_score(scenario, args.random_episodes, skip)
        print(f"{scenario}: random play {floors[scenario]:.1f} over {args.random_episodes} "
              f"games", flush=True)
        if not args.skip_sf:
            jobs.append(sample_factory_job(args.sf_python, scenario, sf_flags, args.seconds,
                                           sf_skip, args.keep))
            print(f"  {jobs[-1].system} {jobs[-1].layout}: {jobs[-1].frames_per_s:,.1f} "
                  f"frames/s, score {jobs[-1].train_score:.1f}", flush=True)
        for name, sets in layouts:
            jobs.append(hpcrl_job(args.recipe, scenario, name, sets, args.seconds,
                                  args.eval_episodes, args.keep))
            print(f"  {jobs[-1].system} {jobs[-1].layout}: {jobs[-1].frames_per_s:,.1f} "
                  f"frames/s, score {jobs[-1].train_score:.1f}", flush=True)
    for j in jobs:
        j.score_per_hour = (j.train_score - floors[j.scenario]) / (j.budget_s / 3600)
    report({"machine": machine_line(), "seconds": args.seconds, "random": floors,
            "sample_factory_flags": sf_flags}, jobs, args.json, args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
