"""An emulated DD-PPO job (benchmarks/emulation.py: sleeps for compute, the real job
machinery) across the 4 nodes of the Slurm test cluster, through the rendered ``sync``
template: the ranks form one world over all 4 nodes, the preemption notices and all-reduces
cross nodes, and the job trains to its end (benchmarks/slurm_emulation.py, which this
test drives at 8 ranks, gives docs/scaling.md its 16-rank figures).
"""
from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest
import slurmtools as st
from template_jobs import PROBE, ranks_seen, rows

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
from scaling import coordination, per_update, read_rows  # noqa: E402
from slurm_emulation import rank_environment, submit_job  # noqa: E402

pytestmark = pytest.mark.slurm
# this machine's calibration of the real Atari PPO agent, about (docs/scaling.md)
CALIBRATION = {"collect_s": 0.8, "gradient_step_s": 0.141, "compute_s": 2.26}


@pytest.mark.timeout(150)
def test_emulated_ddppo_trains_over_four_nodes(tmp_path: Path) -> None:
    env = {**rank_environment(CALIBRATION, 1.0, allocator=False),
           "HPCRL_PROBE_DIR": str(tmp_path / "probe")}
    job, run_dir = submit_job(tmp_path, 8, 4, 2, env, cmd=f"{sys.executable} {PROBE}")
    st.assert_completed(job, timeout=130)

    ranks = ranks_seen(tmp_path / "probe")
    assert [r["rank"] for r in ranks] == list(range(8)) and {r["size"] for r in ranks} == {8}
    assert sorted(Counter(r["node"] for r in ranks).values()) == [2, 2, 2, 2], ranks
    progress = rows(run_dir)
    assert len(progress) >= 3 and int(progress[-1]["env_steps"]) >= 3 * 8 * 128 * 8
    coord = coordination(per_update(read_rows(run_dir)), True)
    assert coord["exchange_s"] > 0.0 and coord["total_s"] > 0.0, coord
