"""The GPU paths of hpcrl, each run for real on one GPU, as one table.

Run it when a machine with a GPU is at hand (one GPU is enough; it finishes in a few
minutes). Each check is the command a user runs, in its own process:

- serial PPO on ``cuda`` reaches the weights of the same run on the CPU (float tolerance);
- ``ddppo`` on 2 ranks sharing the GPU, gradients all-reduced by gloo on CUDA tensors;
- ``ddppo`` on 2 ranks sharing the GPU with the MPI all-reducer (its pinned host stage);
- the NCCL all-reducer on a group of one rank, and its refusal of two ranks on one GPU;
- ``impala`` with its learner on the GPU and CPU collectors;
- ``async-ppo`` with its learner and an inference rank on the GPU, acting for 2 CPU
  collectors;
- ``a3c`` with its updater on the GPU;
- SAC with its learner on the GPU (replay on the host);
- recurrent PPO (a GRU through cuDNN, its collector's state on the GPU) serially, and an
  LSTM under ``impala`` (GPU learner recomputing the CPU collectors' sequences);
- an IMPALA ResNet on MinAtar frames computing in bfloat16 (``actor.compute_dtype``) with
  its learner on the GPU and CPU collectors;
- the components of the docs' own example (``examples/custom_components.py``: a loss, a network, a
  wrapper) on 2 ``ddppo`` ranks sharing the GPU;
- evaluation of a GPU-trained run with ``hpcrl eval --device cuda``.

    python benchmarks/gpu_check.py [--steps 4096] [--device cuda]

``--device cpu`` runs the same checks on the CPU (NCCL ones skipped), to try the script
itself on a machine without a GPU. Exit status 1 if any check failed.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from machine import machine_line

ROOT = Path(__file__).resolve().parents[1]
QUIET = ["train.tensorboard=false", "train.log_interval_s=600"]
TIMEOUT_S = 240


@dataclass
class Row:
    """One check: passed or not, its wall seconds and what it measured."""

    name: str
    ok: bool
    wall_s: float
    detail: str


def mpiexec() -> str:
    found = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which(
        "mpiexec")
    if not found:
        raise SystemExit("mpiexec not found: pip install -e '.[test]' (the MPICH wheel)")
    return found


def env() -> dict[str, str]:
    """The checks' environment: one thread a process, the example components importable."""
    path = os.pathsep.join([str(ROOT / "examples"), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}


OWN_COMPONENTS = ["algo.name=custom_components:KLPenaltyPPO", "algo.kwargs={target_kl: 0.02}",
                  "actor.network=custom_components:SquashEncoder", "actor.hidden_sizes=[64]",
                  "env.wrappers=[custom_components:TimePenalty]"]


def hpcrl_cmd(ranks: int, args: list[str], sets: list[str]) -> list[str]:
    """``[mpiexec -n N] python -m hpcrl.cli ARGS --set ...``."""
    cmd = [sys.executable, "-m", "hpcrl.cli", *args]
    for item in sets:
        cmd += ["--set", item]
    return [mpiexec(), "-n", str(ranks), *cmd] if ranks > 1 else cmd


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, env=env(), cwd=ROOT,
                          timeout=TIMEOUT_S)


def last_row(run_dir: Path) -> dict[str, str]:
    lines = (run_dir / "progress.csv").read_text().splitlines()
    return dict(zip(lines[0].split(","), lines[-1].split(","), strict=False))


def train_check(ranks: int, sets: list[str], run_dir: Path) -> str:
    """Train; the figures of the last progress row (raises with stderr on failure)."""
    done = run(hpcrl_cmd(ranks, ["train", "--run-dir", str(run_dir)], QUIET + sets))
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr.strip()
                           else f"exit {done.returncode}")
    row = last_row(run_dir)
    fps = float(row["env_steps"]) / max(float(row["wall_time_s"]), 1e-9)
    ret = row.get("episode_return_mean", "nan")
    return f"{int(float(row['env_steps']))} steps, {fps:.0f} steps/s, return {float(ret):.1f}"


SERIAL_WEIGHTS = textwrap.dedent("""
    import sys, torch
    from pathlib import Path
    from hpcrl.config import from_dict
    from hpcrl.numerics.flat import params_to_flat
    from hpcrl.runtime.run_dir import RunDir
    from hpcrl.placement.serial_run import Trainer
    device, steps, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    flats = []
    for dev in ("cpu", device):
        sets = ["train.tensorboard=false", "train.eval_episodes=0", f"train.device={dev}",
                f"train.total_env_steps={steps}"]
        trainer = Trainer(from_dict({}, sets), RunDir(Path(out) / dev), console=None)
        trainer.train()
        flats.append(params_to_flat(trainer.placement.master_actor).cpu())
    diff = float((flats[0] - flats[1]).abs().max())
    scale = float(flats[0].abs().max())
    print(f"max |cpu - {device}| {diff:.2e} (weights up to {scale:.2f})")
    sys.exit(0 if torch.allclose(flats[0], flats[1], rtol=1e-3, atol=1e-4) else 1)
""")

NCCL_ONE_RANK = textwrap.dedent("""
    import torch
    from hpcrl.comm import TorchDistAllreducer, world_comm
    from hpcrl.comm.rendezvous import init_gradient_group
    comm = world_comm()
    group = init_gradient_group(comm, "nccl", "cuda:0")
    reducer = TorchDistAllreducer(group, "nccl", owns_group=True)
    t = torch.arange(1 << 20, dtype=torch.float32, device="cuda:0")
    want = t.clone()
    reducer.average_(t)
    moments = torch.tensor([3.0, 6.0, 14.0], dtype=torch.float64, device="cuda:0")
    reducer.sum_(moments)
    reducer.close()
    assert torch.equal(t, want) and moments.tolist() == [3.0, 6.0, 14.0]
    print("1 rank: float32 gradient and float64 moments all-reduced in place on cuda:0")
""")


def script_check(ranks: int, source: str, args: list[str]) -> str:
    """Run ``source`` as a script (under ``mpiexec -n ranks`` when > 1); its last line."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(source)
    try:
        cmd = [sys.executable, f.name, *args]
        done = run([mpiexec(), "-n", str(ranks), *cmd] if ranks > 1 or "nccl" in source
                   else cmd)
    finally:
        os.unlink(f.name)
    lines = (done.stdout + done.stderr).strip().splitlines()
    if done.returncode != 0:
        raise RuntimeError(lines[-1] if lines else f"exit {done.returncode}")
    return lines[-1] if lines else ""


def nccl_refusal(steps: int, device: str) -> str:
    """Two ranks on one GPU with NCCL: refused before training, naming the fix."""
    with tempfile.TemporaryDirectory() as tmp:
        done = run(hpcrl_cmd(2, ["train", "--run-dir", f"{tmp}/run"],
                             QUIET + ["scheme.preset=ddppo", f"train.device={device}",
                                      "scheme.allreduce=nccl",
                                      f"train.total_env_steps={steps}"]))
    if done.returncode == 0:
        raise RuntimeError("two ranks sharing a GPU trained with NCCL instead of a refusal")
    if "share" not in done.stderr or "scheme.allreduce=gloo" not in done.stderr:
        raise RuntimeError(f"refused without the reason: {done.stderr.strip()[-300:]}")
    return "refused before training: ranks share the GPU; fix: gloo or fewer ranks"


def eval_check(steps: int, device: str, run_dir: Path) -> str:
    """Train serially on the GPU, then ``hpcrl eval RUN --device DEVICE``."""
    train_check(1, [f"train.device={device}", f"train.total_env_steps={steps}",
                    "train.eval_episodes=0"], run_dir)
    done = run([sys.executable, "-m", "hpcrl.cli", "eval", str(run_dir), "--episodes", "3",
                "--device", device])
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1])
    return done.stdout.strip().splitlines()[-1]


def checks(steps: int, device: str, tmp: Path) -> list[tuple[str, Callable[[], str]]]:
    """(name, check) in the order of the table; a check returns its detail or raises."""
    on = [f"train.device={device}", f"train.total_env_steps={steps}"]
    cpu_only = device == "cpu"
    table: list[tuple[str, Callable[[], str]]] = [
        ("serial PPO: cuda weights = cpu weights",
         lambda: script_check(1, SERIAL_WEIGHTS, [device, str(steps), str(tmp / "weights")])),
        ("ddppo, 2 ranks on one GPU, gloo",
         lambda: train_check(2, on + ["scheme.preset=ddppo", "scheme.allreduce=gloo"],
                             tmp / "ddppo-gloo")),
        ("ddppo, 2 ranks on one GPU, mpi (host stage)",
         lambda: train_check(2, on + ["scheme.preset=ddppo", "scheme.allreduce=mpi"],
                             tmp / "ddppo-mpi")),
        ("impala: GPU learner, 2 CPU collectors",
         lambda: train_check(3, on + ["scheme.preset=impala"], tmp / "impala")),
        ("async-ppo: GPU learner + GPU inference rank",
         lambda: train_check(4, on + ["scheme.preset=async-ppo", "scheme.inference_ranks=1",
                                      f"scheme.inference_device={device}"],
                             tmp / "inference")),
        ("a3c: updater on the GPU, 2 workers",
         lambda: train_check(3, on + ["scheme.preset=a3c"], tmp / "a3c")),
        ("SAC: GPU learner, host replay (Pendulum)",
         lambda: train_check(1, [f"train.device={device}", "algo.name=sac",
                                 "env.id=Pendulum-v1", "train.total_env_steps=3000"],
                             tmp / "sac")),
        ("recurrent PPO (GRU), serial",
         lambda: train_check(1, on + ["actor.memory=gru"], tmp / "gru")),
        ("impala + LSTM: GPU learner, CPU collectors",
         lambda: train_check(3, on + ["scheme.preset=impala", "actor.memory=lstm"],
                             tmp / "impala-lstm")),
        ("bfloat16 ResNet (MinAtar): GPU learner, impala",
         lambda: train_check(3, on + ["scheme.preset=impala", "env.id=MinAtar/Breakout-v1",
                                      "actor.encoder=impala_resnet", "actor.hidden_sizes=[]",
                                      "actor.compute_dtype=bfloat16"], tmp / "bf16")),
        ("own loss, network, wrapper: ddppo 2 ranks",
         lambda: train_check(2, on + ["scheme.preset=ddppo", "scheme.allreduce=gloo",
                                      "env.num_envs=4"] + OWN_COMPONENTS, tmp / "own")),
        ("hpcrl eval --device of a GPU run",
         lambda: eval_check(steps, device, tmp / "eval")),
        # issue 43: two env groups taking turns with a GPU inference rank, a GPU learner
        # training from rollouts where they landed, and train.compile (CUDA graphs)
        ("env groups 2 + GPU inference rank, MinAtar ResNet",
         lambda: train_check(4, on + ["scheme.preset=async-ppo", "scheme.inference_ranks=1",
                                      f"scheme.inference_device={device}",
                                      "scheme.env_groups=2", "env.id=MinAtar/Breakout-v1",
                                      "actor.encoder=impala_resnet", "actor.hidden_sizes=[]"],
                             tmp / "groups")),
        ("train.compile: serial PPO (GPU learner, CUDA graphs)",
         lambda: train_check(1, on + ["train.compile=true"], tmp / "compile")),
        ("train.compile: GPU inference rank, impala",
         lambda: train_check(4, on + ["scheme.preset=impala", "scheme.inference_ranks=1",
                                      f"scheme.inference_device={device}",
                                      "train.compile=true", "env.id=MinAtar/Breakout-v1",
                                      "actor.encoder=nature_cnn", "actor.hidden_sizes=[]"],
                             tmp / "compile-inference")),
    ]
    if not cpu_only:
        table[3:3] = [
            ("NCCL all-reducer, group of 1 rank",
             lambda: script_check(1, NCCL_ONE_RANK, [])),
            ("NCCL, 2 ranks on one GPU: refused", lambda: nccl_refusal(steps, device)),
        ]
    return table


def environment_line(device: str) -> str:
    import torch

    gpu = (torch.cuda.get_device_name(0) if device != "cpu" and torch.cuda.is_available()
           else "none")
    return (f"{time.strftime('%Y-%m-%d')}  torch {torch.__version__}  CUDA "
            f"{torch.version.cuda}  GPU: {gpu}  CPUs: {os.cpu_count()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4096,
                        help="env steps of each on-policy training check")
    parser.add_argument("--device", default="cuda", help="'cuda' (default) or 'cpu'")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    print(machine_line(), flush=True)
    print(environment_line(args.device), flush=True)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, check in checks(args.steps, args.device, Path(tmp)):
            start = time.monotonic()
            try:
                detail, ok = check(), True
            except (RuntimeError, AssertionError, subprocess.TimeoutExpired) as err:
                detail, ok = str(err)[-160:], False
            rows.append(Row(name, ok, time.monotonic() - start, detail))
            print(f"{'PASS' if ok else 'FAIL'}  {name:<44} {rows[-1].wall_s:6.1f} s  {detail}",
                  flush=True)
    print("\n| check | result | wall s | figures |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r.name} | {'pass' if r.ok else 'FAIL'} | {r.wall_s:.0f} | {r.detail} |")
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in rows], indent=1))
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
