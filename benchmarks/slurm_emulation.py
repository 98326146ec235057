"""One emulated DD-PPO job across nodes of the local Slurm test cluster, started as a user
starts one: the ``sync`` template rendered by :func:`hpcrl.slurm.render` (as ``hpcrl slurm
render sync CONFIG --nodes N --gpus-per-node G`` does) and submitted with ``sbatch``. Its
compute is the emulation's sleeps (benchmarks/emulation.py, calibrated as
benchmarks/scaling.py does), so what it measures is the job machinery across Slurm's nodes:
srun's PMI start-up, the MPI world over the nodes, the all-reduces, the preemption notices,
rank 0's reports and checkpoints. It prints the same per-update figures as scaling.py, for
docs/scaling.md to set beside the ``mpiexec`` emulation's.

At 16 ranks too slow for a test (69-98 s here); tests/slurm/test_emulated_ddppo.py runs it at
8 ranks. Needs ``bash tests/slurm/cluster.sh start``.

    python benchmarks/slurm_emulation.py --nodes 4 --gpus-per-node 4 --updates 3 \\
        --calibration RUN_DIR --json docs/figures/scaling-slurm.jsonl
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from machine import machine_line
from scaling import (
    ENVS,
    LIGHT,
    MALLOC_ENV,
    ROW_KEYS,
    STEPS,
    calibrate,
    config,
    coordination,
    gradient_step_seconds,
    in_use_gb,
    per_update,
    read_rows,
)

from hpcrl.slurm import RenderOptions, render

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "slurm"))
import slurmtools as st  # noqa: E402  (the test cluster's client commands)


def rank_environment(cal: dict[str, float], dilation: float, allocator: bool
                     ) -> dict[str, str]:
    """What every rank of the emulated job needs beside hpcrl: the emulation's sleeps, its
    plug-ins on the path, one thread a rank and, with ``allocator``, scaling.py's allocator
    settings."""
    return {"HPCRL_EMU_STEP_S": f"{dilation * cal['collect_s'] / (STEPS * ENVS):.6f}",
            "HPCRL_EMU_LOSS_S": f"{dilation * gradient_step_seconds('ddppo', cal):.6f}",
            "OMP_NUM_THREADS": "1",
            "PYTHONPATH": os.pathsep.join([str(HERE.parent), str(HERE)]),
            **(MALLOC_ENV if allocator else {})}


def submit_job(tmp: Path, ranks: int, nodes: int, updates: int, env: dict[str, str],
               cmd: str = f"{sys.executable} -m hpcrl.cli") -> tuple[str, Path]:
    """Render the sync template for ``nodes`` x ``ranks / nodes`` tasks over the emulated
    DD-PPO config and submit it, each task running ``cmd`` (HPCRL_CMD: hpcrl's command line)
    with ``env`` exported; its job id and run directory."""
    cfg = config("ddppo", ranks, updates)
    cfg["train"]["device"] = "cpu"  # the cluster's GPUs are fake: Slurm's bookkeeping only
    (tmp / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    run_dir = tmp / "run"
    rendered = render(RenderOptions("sync", config=str(tmp / "cfg.yaml"), nodes=nodes,
                                    gpus_per_node=ranks // nodes, time_minutes=15,
                                    run_dir=str(run_dir), log=str(tmp / "job-%j.out"),
                                    job_name="emulated-ddppo"))
    script = tmp / "job.sbatch"
    script.write_text(rendered.text)
    setup = "; ".join(f"export {k}={v}" for k, v in env.items())
    job = st.submit(script, env={"HPCRL_SETUP": setup, "HPCRL_CMD": cmd})
    return job, run_dir


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Submit the job, wait for it, and return its record (the same fields as scaling.py's,
    plus the nodes and the job's Slurm id)."""
    cal = calibrate(args.calibration)
    tmp = Path(tempfile.mkdtemp(prefix="hpcrl-slurm-emulation-"))
    before = in_use_gb()
    started = time.time()
    job, run_dir = submit_job(tmp, args.ranks, args.nodes, args.updates,
                              rank_environment(cal, args.dilation, args.allocator))
    peak = before
    while st.job_state(job) not in st.TERMINAL_STATES | {"UNKNOWN"}:
        if time.time() - started > args.timeout:
            st.cancel(job)
            raise SystemExit(f"job {job} still running after {args.timeout:.0f} s: cancelled")
        peak = max(peak, in_use_gb())
        time.sleep(1.0)
    state = st.job_state(job)
    if state != "COMPLETED":
        log = "".join(p.read_text()[-3000:] for p in tmp.glob("job-*.out"))
        raise SystemExit(f"job {job} ended {state}:\n{log}")
    rows = read_rows(run_dir)
    fig = per_update(rows)
    return {"preset": "ddppo", "ranks": args.ranks, "nodes": args.nodes, "slurm_job": job,
            "dilation": args.dilation, "calibration": cal, "figures": fig,
            "coordination": coordination(fig, True),
            "rows": [{k: r.get(k) for k in ROW_KEYS} for r in rows],
            "memory_gb": peak - before, "job_s": time.time() - started,
            "checkpoint_every": LIGHT["train"]["checkpoint_every"],
            "machine": machine_line(), "load": os.getloadavg()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=16)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--updates", type=int, default=3)
    parser.add_argument("--dilation", type=float, default=1.0)
    parser.add_argument("--calibration", type=Path, default=None,
                        help="A run directory of the real agent (else a short run here).")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--allocator", action="store_true",
                        help="Give the ranks scaling.py's MALLOC_ENV (glibc's defaults else).")
    parser.add_argument("--json", type=Path, default=None, help="Append the record here.")
    args = parser.parse_args()
    ok, why = st.cluster_available()
    if not ok:
        raise SystemExit(f"no Slurm test cluster: {why}")
    print(machine_line())
    rec = run(args)
    fig, coord = rec["figures"], rec["coordination"]
    print(f"ddppo {args.ranks} ranks on {args.nodes} Slurm nodes (job {rec['slurm_job']}): "
          f"update {fig['update_s']:.3f} s, collect {fig['collect_s']:.3f}, compute "
          f"{fig['compute_s']:.3f}; coordination {coord['total_s'] * 1e3:.0f} ms (wait "
          f"{coord['wait_s'] * 1e3:.0f}, exchange {coord['exchange_s'] * 1e3:.0f}, rest "
          f"{coord['rest_s'] * 1e3:.0f}); memory in use +{rec['memory_gb']:.1f} GB; "
          f"job {rec['job_s']:.0f} s", flush=True)
    if args.json is not None:
        with open(args.json, "a") as f:
            f.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
