"""A script that defines its own components trains once, and is never run again to find them:
``python myapi.py`` (the README's script, guarded or not, with sync or async envs) makes
exactly one run; a later ``hpcrl eval`` or ``hpcrl.load_policy`` evaluates a guarded
script's run and refuses an unguarded one in one line, training nothing."""
from __future__ import annotations

import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
from user_script import GUARD, TINY, run_script, runs, user_env, write_script

import hpcrl
from hpcrl.components.import_paths import PluginError, load, path_of
from hpcrl.components.scripts import training_call

ASYNC = ["env.vectorization=async", "env.num_envs=2"]


def hpcrl_eval(directory: Path, run: Path) -> subprocess.CompletedProcess:
    """``PYTHONPATH=. hpcrl eval RUN`` in ``directory``, as a user types it."""
    program = shutil.which("hpcrl", path=str(Path(sys.executable).parent)) or "hpcrl"
    return subprocess.run([program, "eval", str(run.relative_to(directory))], cwd=directory,
                          capture_output=True, text=True, timeout=120,
                          env=user_env(PYTHONPATH="."))


@pytest.mark.timeout(240)
@pytest.mark.parametrize("envs", [[], ASYNC], ids=["sync", "async"])
def test_an_unguarded_script_trains_once_and_eval_refuses_in_one_line(tmp_path, envs):
    script = write_script(tmp_path, guarded=False, sets=TINY + envs)
    done = run_script(tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = runs(tmp_path)  # one run, not one more per import of the script
    assert done.stderr.count("hpcrl: training myapi:KLPenaltyPPO") == 1, done.stderr
    assert "'mean_return'" in done.stdout

    out = hpcrl_eval(tmp_path, run)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("Error: config key ") and "not import module 'myapi'" in line
    assert f"myapi.py line {train_line(script)} calls hpcrl.train at its top level; put the " \
           f"script's training under `{GUARD}`, or move the classes to a module file" in line
    assert runs(tmp_path) == [run] and "mean return" not in out.stdout


def train_line(script: Path) -> int:
    """The line of ``script`` that calls hpcrl.train."""
    (line,) = [n for n, text in enumerate(script.read_text().splitlines(), 1)
               if "hpcrl.train(" in text]
    return line


def test_load_policy_refuses_an_unguarded_scripts_run_without_running_it(tmp_path,
                                                                          monkeypatch):
    run = tmp_path / "runs" / "kl"
    write_script(tmp_path, guarded=True)
    monkeypatch.syspath_prepend(str(tmp_path))
    import myapi  # the guarded script imports without training: its classes, by hand

    try:
        hpcrl.train({"algo": {"name": myapi.KLPenaltyPPO},
                     "actor": {"network": myapi.SquashEncoder, "hidden_sizes": [16]},
                     "env": {"wrappers": [myapi.TimePenalty]}},
                    sets=TINY, run_dir=run, console=None)
    finally:
        del sys.modules["myapi"]
    script = write_script(tmp_path, guarded=False)  # its training now at the top level
    refusal = (rf"hpcrl will not import module 'myapi', which would train: .*myapi.py line "
               rf"{train_line(script)} calls hpcrl.train")
    with pytest.raises(PluginError, match=refusal):
        hpcrl.load_policy(run)
    assert "myapi" not in sys.modules and runs(tmp_path) == [run]


@pytest.mark.timeout(240)
def test_the_readme_script_trains_once_and_evaluates_later(tmp_path):
    write_script(tmp_path, guarded=True)
    done = run_script(tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = runs(tmp_path)
    out = hpcrl_eval(tmp_path, run)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("CartPole-v1: mean return ")
    assert runs(tmp_path) == [run]


@pytest.mark.parametrize("source,found", [
    ("import hpcrl\nclass A: pass\nresult = hpcrl.train(None)\n", (3, "hpcrl.train")),
    (f"import hpcrl\n{GUARD}\n    hpcrl.train(None)\n", None),
    ("import hpcrl\nif '__main__' == __name__:\n    hpcrl.train(None)\n", None),
    (f"import hpcrl\n{GUARD}\n    pass\nelse:\n    hpcrl.resume('r')\n", (5, "hpcrl.resume")),
    ("import hpcrl\ndef run(c):\n    return hpcrl.train(c)\ndef main():\n    run(1)\nmain()\n",
     (6, "main(), which calls hpcrl.train")),
    (f"import hpcrl\ndef main():\n    hpcrl.train(1)\n{GUARD}\n    main()\n", None),
    ("from hpcrl import train as fit\nfit(1)\n", (2, "hpcrl.train")),
    ("from hpcrl.api import resume\nresume('r')\n", (2, "hpcrl.resume")),
    ("import hpcrl.api as api\napi.train(1)\n", (2, "hpcrl.train")),
    ("import hpcrl.config\nhpcrl.api.train(1)\n", (2, "hpcrl.train")),
    ("import hpcrl\nclass A:\n    def fit(self):\n        hpcrl.train(1)\n"
     "f = lambda: hpcrl.train(1)\n", None),
    ("import hpcrl\nclass A:\n    run = hpcrl.train(1)\n", (3, "hpcrl.train")),
    ("import hpcrl\nconfig = hpcrl.make_config(None)\ndef train():\n    pass\ntrain()\n",
     None),
], ids=["top-level", "guarded", "guard-reversed", "else-branch", "through-functions",
        "main-guarded", "alias", "from-api", "api-alias", "dotted", "bodies", "class-body",
        "own-train"])
def test_a_file_trains_at_import_when_its_top_level_calls_train(tmp_path, source, found):
    path = tmp_path / "lab.py"
    path.write_text(source)
    assert training_call(path) == found


def fake_main(monkeypatch, tmp_path: Path, spec_name: str | None = None) -> types.ModuleType:
    """A running script ``tmp_path/labscript.py`` as ``__main__``, defining ``Net``; the file
    itself fails if anything imports it."""
    script = tmp_path / "labscript.py"
    script.write_text("raise SystemExit('the script was imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    main = types.ModuleType("__main__")
    main.__file__ = str(script)
    main.__spec__ = types.SimpleNamespace(name=spec_name) if spec_name else None
    main.Net = type("Net", (), {"__module__": "__main__"})
    monkeypatch.setitem(sys.modules, "__main__", main)
    return main


def test_a_class_of_the_running_script_is_named_by_it_and_found_without_importing_it(
        monkeypatch, tmp_path):
    main = fake_main(monkeypatch, tmp_path)
    assert path_of(main.Net) == "labscript:Net"
    assert load("labscript:Net", "actor.network") is main.Net
    assert "labscript" not in sys.modules
    with pytest.raises(PluginError, match=r"module 'labscript' \(the script being run\) has "
                                          r"no attribute 'Missing'"):
        load("labscript:Missing", "actor.network")


def test_a_script_run_with_dash_m_is_named_by_its_module_name(monkeypatch, tmp_path):
    main = fake_main(monkeypatch, tmp_path, spec_name="mylab.labscript")
    assert path_of(main.Net) == "mylab.labscript:Net"
    assert load("mylab.labscript:Net", "actor.network") is main.Net


def test_training_started_while_a_component_module_imports_is_stopped(monkeypatch, tmp_path):
    (tmp_path / "lab_helper.py").write_text(
        "import hpcrl\n\ndef experiment(**components):\n    hpcrl.train(components)\n")
    (tmp_path / "lab_indirect.py").write_text(
        "from lab_helper import experiment\n\nclass Net:\n    pass\n\nexperiment(net=Net)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PluginError, match=r"config key 'actor.network' \('lab_indirect:Net'"
                                          r"\): importing module 'lab_indirect' started "
                                          r"training \(hpcrl.train\), which hpcrl stopped; "
                                          r"put the"):
        load("lab_indirect:Net", "actor.network")
    assert "lab_indirect" not in sys.modules and not (tmp_path / "runs").exists()
    sys.modules.pop("lab_helper", None)
