"""What a user with one policy sees did not change in issue 52's restructuring: ``hpcrl plan``
of the default config and of the presets, and ``hpcrl config show`` of every example config,
print what they printed before it (a9c702e), byte for byte. The files under
``before_issue_52/`` are those outputs, with the keys added since, which a full
``config show`` lists (issue 51's ``train.deterministic: auto``, issue 54's
``scheme.evaluators: 0`` and its ``pbt`` section, issue 53's ``env.multiagent``,
``env.agents``, ``env.league`` (with ``frozen``, then ``player``, ``versus`` and
``reset_fraction`` later), ``actor.action_mask`` and the ``policies`` section; its example
``spread-shared-ppo``'s file is its output when it was added); a change meant to alter one
updates its file in the same commit, saying why."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from hpcrl.cli import main

BEFORE = Path(__file__).parent / "before_issue_52"
EXAMPLES = Path(__file__).parents[2] / "examples"
PRESETS = ["default", "ddppo", "impala", "apex", "async-ppo", "a3c"]
# every example but dmc-sac, whose suite (dm-control) the test tools do not install
CONFIGS = sorted(p.stem for p in EXAMPLES.glob("*.yaml") if p.stem != "dmc-sac")


def _output(args: list[str]) -> str:
    done = CliRunner().invoke(main, args, catch_exceptions=False)
    assert done.exit_code == 0, done.output
    return done.output


@pytest.mark.parametrize("preset", PRESETS)
def test_the_plan_prints_what_it_printed(preset):
    args = ["plan"] + ([] if preset == "default" else ["--set", f"scheme.preset={preset}"])
    assert _output(args) == (BEFORE / f"plan-{preset}.txt").read_text()


@pytest.mark.parametrize("example", CONFIGS)
def test_every_example_config_loads_as_it_did(example, monkeypatch):
    monkeypatch.chdir(EXAMPLES.parent)  # (the outputs name the file as given)
    monkeypatch.syspath_prepend(str(EXAMPLES))  # the plug-ins' modules
    shown = _output(["config", "show", f"examples/{example}.yaml"])
    assert shown == (BEFORE / f"config-{example}.txt").read_text()
