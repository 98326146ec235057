"""Batch jobs from hpcrl's templates on the local Slurm test cluster, as a user submits them:
a tiny config, the script rendered as the README says, hpcrl run through the rank probe
(rank_probe.py), and what the job's ranks, log and run directory show afterwards.
"""
from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from hpcrl.cli import main
from hpcrl.slurm import Rendered, RenderOptions, render

HERE = Path(__file__).resolve().parent
PROBE = HERE / "rank_probe.py"
PACE = "first_run_pace:FirstRunPace"  # an env wrapper in this directory
HPCRL = str(Path(sys.executable).with_name("hpcrl"))
TINY: dict[str, Any] = {
    "env": {"num_envs": 2},
    "algo": {"num_steps": 16, "ppo": {"minibatch_size": 32, "num_epochs": 1}},
    "train": {"total_env_steps": 1024, "eval_episodes": 0, "tensorboard": False,
              "device": "cpu", "log_interval_s": 60, "checkpoint_every": 4},
}


def write_config(tmp_path: Path, extra: dict[str, Any] | None = None,
                 name: str = "tiny.yaml") -> Path:
    data = json.loads(json.dumps(TINY))
    for section, keys in (extra or {}).items():
        data.setdefault(section, {}).update(keys)
    if data.get("scheme", {}).get("preset") in ("impala", "apex", "async-sac"):
        del data["algo"]["ppo"]  # these presets train algorithms of their own, not PPO
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def job_env(probe_dir: Path) -> dict[str, str]:
    """Run hpcrl in the job with this interpreter's environment, through the rank probe."""
    bin_dir = Path(sys.executable).parent
    activate = bin_dir / "activate"
    setup = f"source {activate}" if activate.is_file() else f"export PATH={bin_dir}:$PATH"
    return {"HPCRL_SETUP": setup, "HPCRL_CMD": f"{sys.executable} {PROBE}",
            "HPCRL_PROBE_DIR": str(probe_dir), "OMP_NUM_THREADS": "1"}


def render_job(tmp_path: Path, template: str, name: str, **kw: Any) -> tuple[Rendered, Path]:
    """`hpcrl slurm render TEMPLATE ... -o NAME.sbatch` as the README has it: no --launch (the
    srun plugin follows mpi4py's MPI library; the cluster's MpiDefault is none)."""
    opts = RenderOptions(template, time_minutes=10,
                         run_dir=str(tmp_path / name), log=str(tmp_path / f"{name}-%j.out"),
                         job_name=f"t-{name}", **kw)
    rendered = render(opts)
    script = tmp_path / f"{name}.sbatch"
    script.write_text(rendered.text)
    return rendered, script


def plan_of(config: Path, rendered: Rendered) -> dict[str, Any]:
    args = ["plan", "--json", str(config)]
    for item in rendered.shape.scheme_sets:
        args += ["--set", item]
    out = CliRunner().invoke(main, args, catch_exceptions=False)
    assert out.exit_code == 0, out.output
    return json.loads(out.output)


def ranks_seen(probe_dir: Path, start: int = 0) -> list[dict[str, Any]]:
    ranks = [json.loads(p.read_text()) for p in probe_dir.glob(f"start{start}-rank*.json")]
    return sorted(ranks, key=lambda r: r["rank"])


def gpus_of(rank: dict[str, Any]) -> list[str]:
    return [g for g in (rank["cuda"] or "").split(",") if g]


def rows(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "progress.csv") as f:
        return list(csv.DictReader(f))


def log_text(tmp_path: Path, name: str, job: str) -> str:
    return (tmp_path / f"{name}-{job}.out").read_text()


def check_world(probe: Path, plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Every rank of the plan ran, all in one MPI world of the plan's size."""
    ranks = ranks_seen(probe)
    n = plan["world_size"]
    assert [r["rank"] for r in ranks] == list(range(n)), "a rank is missing or doubled"
    assert {r["size"] for r in ranks} == {n}, f"ranks are not one world of {n}: {ranks}"
    assert {r["rank_sum"] for r in ranks} == {n * (n - 1) // 2}
    assert [r["procid"] for r in ranks] == [str(i) for i in range(n)]
    return ranks


def check_trained(tmp_path: Path, name: str, job: str, world: int) -> None:
    progress = rows(tmp_path / name)
    assert progress and int(progress[-1]["env_steps"]) >= TINY["train"]["total_env_steps"]
    assert f"hpcrl: rank 0 of {world}:" in log_text(tmp_path, name, job)
