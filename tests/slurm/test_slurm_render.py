"""hpcrl slurm render: task counts agree with `hpcrl plan`, bad requests are refused, and the
output is a bash script whose variables say what the #SBATCH lines allocate."""
from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpcrl.cli import main
from hpcrl.config.loader import ConfigError
from hpcrl.slurm import RenderOptions, TemplateError, render
from hpcrl.slurm.templates import TEMPLATE_NAMES, template_path

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["env.num_envs=4", "algo.num_steps=16", "algo.ppo.minibatch_size=64"]


def invoke(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def sbatch_options(text: str) -> list[dict[str, str]]:
    """{key: value} of the #SBATCH lines of each hetjob component (a plain reading of sbatch's
    rule: directives end at the first line that is neither blank nor a comment)."""
    parts: list[dict[str, str]] = [{}]
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            break
        if re.match(r"#SBATCH\s+hetjob", line):
            parts.append({})
        elif line.startswith("#SBATCH"):
            for token in shlex.split(line[7:]):
                key, _, value = token[2:].partition("=")
                parts[-1][key] = value
    return parts


def script_variables(text: str, env: dict[str, str] | None = None) -> dict[str, list[str]]:
    """The values bash gives the script's variables (arrays as lists), job env ``env``."""
    body = text[text.index("\nCONFIG="):text.index("\n# step_command ARGS")]
    names = ["CONFIG", "RUN_DIR", "HPCRL_LAUNCH", "HPCRL_SCHEME", "HPCRL_RENDERED_SET"]
    dump = "".join(f'printf "{n}\\t%s\\n" "${{{n}[@]}}"\n' for n in names)
    done = subprocess.run(["bash", "-c", body + "\n" + dump], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", **(env or {})}, check=True)
    values: dict[str, list[str]] = {n: [] for n in names}
    for line in done.stdout.splitlines():
        name, _, value = line.partition("\t")
        values[name].append(value)
    return values


def plan_of(values: dict[str, list[str]]) -> dict:
    """`hpcrl plan --json` of the config and overrides the script passes to hpcrl train."""
    args = ["plan", "--json"] + ([values["CONFIG"][0]] if values["CONFIG"][0] else [])
    for item in values["HPCRL_RENDERED_SET"] + values["HPCRL_SCHEME"]:
        if item:
            args += ["--set", item]
    out = invoke(*args)
    assert out.exit_code == 0, out.output
    return json.loads(out.output)


def tasks(component: dict[str, str]) -> int:
    if "ntasks" in component:
        return int(component["ntasks"])
    return int(component["nodes"]) * int(component["ntasks-per-node"])


@pytest.mark.parametrize("template, nodes, gpus, extra", [
    ("sync", 2, 4, []), ("sync", 1, 2, []),
    ("sync", 3, 2, ["scheme.preset=ddppo", "algo.ppo.minibatch_size=96"]),
    ("central", 1, 4, []), ("central", 2, 2, []), ("async", 1, 4, []),
    ("async", 2, 1, ["scheme.collectors_per_worker=3", "algo.ppo.minibatch_size=96"]),
    ("async", 1, 3, ["scheme.update=central"]), ("async", 1, 1, ["scheme.preset=a2c"]),
    # 4 workers, one inference rank each on the CPU tasks
    ("async", 2, 2, ["scheme.inference_ranks=4", "scheme.inference_device=cpu"]),
    ("async", 1, 4, ["scheme.inference_ranks=2"]),  # 2 workers + 2 inference ranks on GPUs
    ("async", 2, 3, ["scheme.inference_ranks=4", "scheme.update=central",  # 1 + 1 + 4
                     "scheme.collectors_per_worker=4"]),
])
def test_task_counts_match_hpcrl_plan(template, nodes, gpus, extra):
    rendered = render(RenderOptions(template, sets=tuple(SMALL + extra), nodes=nodes,
                                    gpus_per_node=gpus))
    parts = sbatch_options(rendered.text)
    plan = plan_of(script_variables(rendered.text))
    inference = [r for r in plan["ranks"] if r["role"] == "inference"]
    on_gpus = [] if "scheme.inference_device=cpu" in extra else inference
    learners = [r for r in plan["ranks"] if r["role"] not in ("collector", "inference")]
    assert parts[0]["nodes"] == str(nodes) and parts[0]["ntasks-per-node"] == str(gpus)
    assert tasks(parts[0]) == len(learners) + len(on_gpus) == nodes * gpus
    # learners first, then the inference ranks that take a GPU each, then the CPU tasks
    assert [r["rank"] for r in learners + on_gpus] == list(range(nodes * gpus))
    if template == "async":
        assert len(parts) == 2 and parts[0]["gpus-per-task"] == "1"
        assert "gpus-per-node" not in parts[0] and not any("gpu" in k for k in parts[1])
        assert tasks(parts[1]) == plan["world_size"] - nodes * gpus > 0
        count = next((int(x.split("=")[1]) for x in extra if "inference_ranks" in x), 0)
        assert len(inference) == count
    else:
        assert len(parts) == 1 and parts[0]["gpus-per-node"] == str(gpus)
        assert plan["world_size"] == nodes * gpus
    assert sum(map(tasks, parts)) == plan["world_size"] == rendered.shape.world_size
    roles = {r["role"] for r in plan["ranks"]}
    assert ("updater" in roles) == (template == "central" or "scheme.update=central" in extra)


def test_sync_2x4_passes_eight_gradient_workers():
    rendered = render(RenderOptions("sync", nodes=2, gpus_per_node=4))
    values = script_variables(rendered.text)
    assert values["HPCRL_SCHEME"] == ["scheme.preset=ddppo", "scheme.gradient_workers=8",
                                      "scheme.collectors_per_worker=0"]
    assert tasks(sbatch_options(rendered.text)[0]) == 8


@pytest.mark.parametrize("name", TEMPLATE_NAMES)
def test_templates_as_they_are_size_the_scheme_from_the_allocation(name):
    """sbatch'ed unrendered, a template derives the scheme from Slurm's task counts; for its
    own #SBATCH defaults that is exactly what rendering with the defaults writes."""
    text = template_path(name).read_text()
    parts = sbatch_options(text)
    env = {"SLURM_NTASKS": str(tasks(parts[0]))}
    if len(parts) == 2:
        env = {"SLURM_NTASKS_HET_GROUP_0": str(tasks(parts[0])),
               "SLURM_NTASKS_HET_GROUP_1": str(tasks(parts[1]))}
    raw = script_variables(text, env)
    rendered = render(RenderOptions(name))
    assert raw["HPCRL_SCHEME"] == list(rendered.shape.scheme_sets)
    assert sum(map(tasks, parts)) == plan_of(raw)["world_size"]
    assert raw["CONFIG"] == [""]
    assert raw["HPCRL_LAUNCH"] == [""]  # asks `hpcrl slurm launcher` when the job starts
    assert raw["HPCRL_RENDERED_SET"] == [""]
    assert raw["RUN_DIR"] == ["runs/-"]  # runs/<job name>-<job id> inside a job
    # a bigger allocation: the scheme follows it
    env = {k: str(2 * int(v)) for k, v in env.items()}
    assert plan_of(script_variables(text, env))["world_size"] == 2 * sum(map(tasks, parts))


@pytest.mark.parametrize("name", TEMPLATE_NAMES)
def test_rendered_and_raw_templates_are_valid_bash(name, tmp_path):
    rendered = render(RenderOptions(name, sets=("actor.hidden_sizes=[32, 32]",)))
    for text in (rendered.text, template_path(name).read_text()):
        script = tmp_path / "job.sbatch"
        script.write_text(text)
        done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    assert script_variables(rendered.text)["HPCRL_RENDERED_SET"] == ["actor.hidden_sizes=[32, 32]"]


def test_every_template_has_the_same_lifecycle():
    blocks = set()
    for name in TEMPLATE_NAMES:
        text = template_path(name).read_text()
        blocks.add(text[text.index("# ---- lifecycle"):text.index("# ---- end lifecycle")])
    assert len(blocks) == 1
    assert "scontrol requeue" in blocks.pop()


def test_rendered_values_are_plain_and_site_options_pass_through(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("env:\n  num_envs: 4\n")
    rendered = render(RenderOptions(
        "async", config=str(config), sets=("seed=3",), nodes=1, gpus_per_node=2,
        time_minutes=120, signal_lead_s=300, run_dir=str(tmp_path / "run"),
        log=str(tmp_path / "logs/%j.out"), partition="gpu", collector_partition="cpu",
        account="proj", qos="high", launch="srun --mpi=pmi2", job_name="appo",
        cpus_per_task=3))
    first, second = sbatch_options(rendered.text)
    assert first["time"] == "120" and first["signal"] == "B:USR1@300" and "requeue" in first
    assert (first["partition"], first["account"], first["qos"]) == ("gpu", "proj", "high")
    assert first["output"] == str(tmp_path / "logs/%j.out") and first["job-name"] == "appo"
    assert second["partition"] == "cpu" and second["cpus-per-task"] == first["cpus-per-task"] == "3"
    values = script_variables(rendered.text, {"CONFIG": "other.yaml", "RUN_DIR": "elsewhere"})
    assert values["CONFIG"] == [str(config)] and values["RUN_DIR"] == [str(tmp_path / "run")]
    assert values["HPCRL_LAUNCH"] == ["srun --mpi=pmi2"]
    assert values["HPCRL_RENDERED_SET"] == ["seed=3"]
    assert "# rendered by `hpcrl slurm render`:" in rendered.text
    assert rendered.warnings and "train.device" in rendered.warnings[0]


def test_cpus_per_task_follow_the_config():
    sets = ("env.num_envs=4", "env.vectorization=async", "train.torch_threads=2")
    first, second = sbatch_options(render(RenderOptions("async", sets=sets, nodes=1,
                                                        gpus_per_node=1)).text)
    assert first["cpus-per-task"] == "2"    # the learner holds no envs
    assert second["cpus-per-task"] == "6"   # 2 threads + 4 env subprocesses


@pytest.mark.parametrize("opts, message", [
    (dict(template="sync", sets=("scheme.preset=a2c",)), "async template"),
    (dict(template="sync", sets=("scheme.preset=a3c",)), "central template"),
    (dict(template="central", sets=("scheme.preset=ddppo",)), "sync template"),
    (dict(template="async", sets=("scheme.preset=ddppo",)), "--set scheme.preset=async-ppo"),
    (dict(template="central", nodes=1, gpus_per_node=1), "at least 2 GPUs"),
    (dict(template="sync", sets=("scheme.gradient_workers=3",)), "conflicts with the job size"),
    (dict(template="async", launch="mpirun"), "srun --mpi=pmix"),
    (dict(template="sync", time_minutes=1, signal_lead_s=60), "lower --signal-lead"),
    (dict(template="sync", nodes=1, gpus_per_node=1,  # preemption asked for, one rank
          sets=("scheme.preset=ddppo", "scheme.preemption.fraction_workers=0.5")),
     "--nodes 1 x --gpus-per-node 1"),
    (dict(template="sync", sets=("algo.lrr=1",)), "did you mean 'algo.lr'"),
    (dict(template="ring"), "name one of sync, async, central"),
])
def test_impossible_requests_are_refused_with_the_fix(opts, message):
    with pytest.raises((ConfigError, TemplateError)) as err:
        render(RenderOptions(**opts))
    assert message in str(err.value)


def test_a_template_file_needs_its_kind_and_long_options(tmp_path):
    unmarked = tmp_path / "site.sbatch"
    unmarked.write_text("#!/bin/bash\n#SBATCH --nodes=1\necho hi\n")
    with pytest.raises(TemplateError, match="hpcrl-template"):
        render(RenderOptions(str(unmarked)))
    short = tmp_path / "short.sbatch"
    short.write_text(template_path("sync").read_text().replace("#SBATCH --time=60",
                                                               "#SBATCH -t 60"))
    with pytest.raises(TemplateError, match="--time="):
        render(RenderOptions(str(short)))
    site = tmp_path / "edited.sbatch"
    site.write_text(template_path("sync").read_text().replace(
        "#SBATCH --requeue", "#SBATCH --requeue --constraint=a100"))
    parts = sbatch_options(render(RenderOptions(str(site), nodes=4)).text)
    assert parts[0]["constraint"] == "a100" and parts[0]["nodes"] == "4"


def test_render_command_prints_or_writes_the_script(tmp_path):
    out = invoke("slurm", "render", "central", "--nodes", "1", "--gpus-per-node", "3",
                 *[x for s in SMALL for x in ("--set", s)])
    assert out.exit_code == 0
    assert out.stdout.startswith("#!/bin/bash\n# hpcrl-template: central\n"), out.stdout[:200]
    assert "1 updater + 2 gradient workers" in out.output  # the summary, on stderr
    target = tmp_path / "job.sbatch"
    done = invoke("slurm", "render", "sync", "-o", target, "--nodes", "1", "--gpus-per-node", "2")
    assert done.exit_code == 0 and "sbatch " + str(target) in done.output
    assert "gradient_workers=2" in target.read_text()
    bad = invoke("slurm", "render", "async", "--launch", "mpirun")
    assert bad.exit_code != 0 and "heterogeneous job" in bad.output


def test_gpus_that_inference_ranks_leave_no_learner_are_refused_with_the_fix():
    with pytest.raises(ConfigError) as err:
        render(RenderOptions("async", sets=tuple(SMALL + ["scheme.inference_ranks=2"]),
                             nodes=1, gpus_per_node=2))
    message = str(err.value)
    assert "2 GPUs leaves no gradient worker" in message
    assert "scheme.inference_ranks=2 inference ranks (a GPU each)" in message
    assert "scheme.inference_device=cpu" in message


def test_the_rendered_script_and_the_plan_say_what_a_lost_collector_does(monkeypatch):
    import sys

    render_module = sys.modules["hpcrl.slurm.render"]

    openmpi = "Open MPI v5.0.11, package: Open MPI user@localhost Distribution"
    monkeypatch.setattr(render_module, "mpi_library_version", lambda: (openmpi, ""))
    text = " ".join(render(RenderOptions("async", launch="srun --mpi=pmix",
                                         sets=("scheme.max_collector_restarts=1",))).text
                    .replace("#  ", "").split())
    assert ("if a collector rank dies, the job ends: srun ends the step when a task dies, and "
            "Open MPI v5.0.11's fault tolerance works only under its own `mpiexec --with-ft "
            "ulfm` (the async template's launch when --launch is left out) (the 1 spare rank "
            "of scheme.max_collector_restarts stays idle)") in text
    monkeypatch.setattr(render_module, "mpi_library_version", lambda: ("MPICH Version: 4.2", ""))
    sync = render(RenderOptions("sync")).text
    assert "the job ends: a synchronous scheme" not in sync  # its learners collect themselves
    import hpcrl.slurm.survival as survival  # where `hpcrl plan` asks for the library

    monkeypatch.setattr(survival, "mpi_library_version", lambda: (openmpi, ""))
    out = CliRunner().invoke(main, ["plan", "--set", "scheme.preset=async-ppo"])
    assert ("if a collector rank dies, under `mpiexec --with-ft ulfm` the job goes on: it runs "
            "down to scheme.min_collectors=1 live collectors; started any other way the job "
            "ends") in out.output
    out = CliRunner().invoke(main, ["plan", "--set", "scheme.preset=a2c"])
    assert ("if a collector rank dies, the job ends: a synchronous scheme waits for every "
            "collector") in out.output


def test_the_async_template_on_open_mpi_5_launches_so_that_it_survives(monkeypatch):
    """No --launch, mpi4py on Open MPI 5: the async template renders Open MPI's own `mpiexec
    --with-ft ulfm` and says the job goes on; the sync template keeps srun's PMIx plugin,
    Open MPI 4 (no ULFM launcher) keeps srun, and an mpiexec without fault tolerance is
    refused for the heterogeneous job."""
    import sys

    import hpcrl.slurm.mpi_plugin as plugin

    render_module = sys.modules["hpcrl.slurm.render"]  # (the package's name is the function)

    def on(version: str) -> None:
        monkeypatch.setattr(plugin, "mpi_library_version", lambda: (version, ""))
        monkeypatch.setattr(render_module, "mpi_library_version", lambda: (version, ""))

    on("Open MPI v5.0.11, package: Open MPI user@localhost Distribution")
    rendered = render(RenderOptions("async", sets=("scheme.max_collector_restarts=2",)))
    assert "\nHPCRL_LAUNCH='mpiexec --with-ft ulfm'  # render\n" in rendered.text
    header = " ".join(rendered.text[:rendered.text.index("\n#\n")].replace("#  ", "").split())
    assert "launch: mpiexec --with-ft ulfm (Open MPI v5.0.11, the MPI library" in header
    assert ("if a collector rank dies, the job goes on (`mpiexec --with-ft ulfm`): a spare "
            "rank takes its place, 2 times at most (scheme.max_collector_restarts), and it "
            "runs down to scheme.min_collectors=1 live collectors") in header
    assert "HPCRL_LAUNCH='srun --mpi=pmix'" in render(RenderOptions("sync")).text
    out = CliRunner().invoke(main, ["slurm", "launcher", "--template", "async"])
    assert out.exit_code == 0 and out.stdout == "mpiexec --with-ft ulfm\n", out.output
    with pytest.raises(ConfigError, match="Open MPI 5's 'mpiexec --with-ft ulfm'"):
        render(RenderOptions("async", launch="mpirun"))
    chosen = render(RenderOptions("async", launch="mpiexec --with-ft=ulfm"))
    assert "the job goes on (`mpiexec --with-ft ulfm`)" in " ".join(chosen.text.split())

    on("Open MPI v4.1.6, package: Open MPI x")
    old = render(RenderOptions("async"))
    assert "HPCRL_LAUNCH='srun --mpi=pmix'" in old.text
    assert "the job ends: Open MPI v4.1.6 ends the whole job" in " ".join(
        old.text.replace("#  ", "").split())


LEAGUE = {"env": {"id": "pettingzoo.classic.tictactoe_v3"}, "actor": {"action_mask": True},
          "policies": {"main": {}, "exploiter": {"role": "main_exploiter"}}}


@pytest.mark.parametrize("template, gpus, policies, message", [
    ("sync", 4, {}, None),
    ("central", 4, {}, None),
    ("sync", 3, {}, "ask for a multiple of 2 GPUs"),
    ("central", 2, {}, "(1 a policy) leaves no gradient worker next to the updater"),
    ("async", 4, {}, "runs on the sync or central template"),
    ("sync", 4, {"exploiter": {"ranks": 1}}, "drop its ranks and scheme keys"),
    ("sync", 4, {"exploiter": {"set": {"scheme.gradient_workers": 1}}},
     "drop its ranks and scheme keys (['scheme.gradient_workers'])"),
])
def test_a_league_job_shares_the_gpus_evenly_among_its_policies(tmp_path, template, gpus,
                                                                 policies, message):
    import yaml

    data = {**LEAGUE, "policies": {**LEAGUE["policies"], **policies}}
    config = tmp_path / "league.yaml"
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    opts = RenderOptions(template, config=str(config), nodes=1, gpus_per_node=gpus)
    if message is not None:
        with pytest.raises(ConfigError) as err:
            render(opts)
        assert message in str(err.value)
        return
    shape = render(opts).shape
    workers = 2 if template == "sync" else 1
    assert shape.world_size == 4 and shape.policies == 2
    assert f"scheme.gradient_workers={workers}" in shape.scheme_sets
    roles = ["gradient_worker"] * 2 if template == "sync" else ["updater", "gradient_worker"]
    assert [r.role for r in shape.table] == roles * 2
    assert [r.rank for r in shape.table] == [0, 1, 2, 3]
    assert "4 ranks: 2 policies, each" in shape.summary()
