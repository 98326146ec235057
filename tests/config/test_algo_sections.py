"""Each algorithm's own config section (algo.ppo, algo.dqn, algo.td3, ...): the run reads its
algorithm's, refuses another's, and configs and runs written before sections still load."""
from __future__ import annotations

import warnings

import pytest
import yaml

from hpcrl.algorithms import algorithm_kind, builtin_sections
from hpcrl.algorithms.own_section import own_section
from hpcrl.config import ConfigError, dump_yaml, from_dict, load_config
from hpcrl.config.algo_sections import FLAT_NAMES
from hpcrl.config.docs import annotated_yaml
from hpcrl.config.loader import all_keys, resolve
from hpcrl.placement.serial_run import Trainer, resume_config
from hpcrl.runtime.run_dir import RunDir

PENDULUM = ["env.id=Pendulum-v1"]
# the built-ins' own sections, as their classes declare them
SECTIONS = builtin_sections()


def test_every_flat_name_of_before_sections_has_a_home_and_no_section_key_is_left_flat():
    keys = set(all_keys())
    for old, news in FLAT_NAMES.items():
        assert old not in keys, old  # the flat name is gone from the schema
        assert set(news) <= keys, news
    for kind, _cls in SECTIONS.items():
        assert any(key.startswith(f"algo.{kind}.") for key in keys), kind


@pytest.mark.parametrize("sets, key, value", [
    (["algo.clip_range=0.3"], "algo.ppo.clip_range", 0.3),
    (["algo.vtrace_clip_rho=2.0", "algo.name=impala"], "algo.impala.clip_rho", 2.0),
    (["algo.name=dqn", "replay.exploration_fraction=0.5"], "algo.dqn.exploration_fraction", 0.5),
    (["algo.name=td3", *PENDULUM, "replay.policy_delay=3"], "algo.td3.policy_delay", 3),
    (["algo.name=mpo", *PENDULUM, "replay.mpo_epsilon=0.2"], "algo.mpo.epsilon", 0.2),
    # a key two algorithms read goes to the run's own
    (["algo.name=sac", *PENDULUM, "replay.n_critics=3"], "algo.sac.n_critics", 3),
    (["algo.name=td3", *PENDULUM, "replay.n_critics=3"], "algo.td3.n_critics", 3),
    (["algo.name=ddpg", *PENDULUM, "replay.noise_std=0.3"], "algo.ddpg.noise_std", 0.3),
])
def test_a_flat_key_of_before_sections_is_read_in_its_section_with_a_warning(sets, key, value):
    with pytest.warns(FutureWarning, match=rf"-> {key.replace('.', '[.]')}"):
        config = from_dict({}, sets)
    node = config
    for part in key.split("."):
        node = getattr(node, part)
    assert node == value


def test_a_flat_key_in_a_yaml_file_is_read_and_the_new_name_wins(tmp_path):
    path = tmp_path / "old.yaml"
    path.write_text("algo:\n  num_epochs: 3\n  minibatch_size: 64\n  ppo:\n"
                    "    minibatch_size: 128\n")
    with pytest.warns(FutureWarning, match="algo.num_epochs -> algo.ppo.num_epochs"):
        config = load_config(path)
    assert (config.algo.ppo.num_epochs, config.algo.ppo.minibatch_size) == (3, 128)


@pytest.mark.parametrize("sets, key", [
    (["algo.ppo.clip_range=0.3", "algo.name=a2c"], "algo.ppo.clip_range"),
    (["algo.td3.policy_delay=3", "algo.name=sac", *PENDULUM], "algo.td3.policy_delay"),
    (["algo.dqn.double_q=true"], "algo.dqn.double_q"),
    (["replay.policy_delay=3", "algo.name=sac", *PENDULUM], "algo.td3.policy_delay"),
])
def test_another_algorithms_section_is_refused_naming_the_key_and_the_fix(sets, key):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        with pytest.raises(ConfigError) as err:
            from_dict({}, sets)
    assert f"config key '{key}' is read by {key.split('.')[1]}" in str(err.value)
    assert "drop the key" in str(err.value)


def test_a_plugin_reads_the_section_of_the_built_in_it_derives_from(tmp_path, monkeypatch):
    (tmp_path / "slow_td3.py").write_text("import hpcrl\n\nclass SlowTD3(hpcrl.TD3):\n"
                                          "    '''TD3 under another name.'''\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = from_dict({}, ["algo.name=slow_td3:SlowTD3", *PENDULUM, "algo.td3.policy_delay=4"])
    assert algorithm_kind(config.algo.name) == "td3"
    assert own_section(config.algo) is config.algo.td3
    assert own_section(config.algo).policy_delay == 4
    with pytest.raises(ConfigError, match="'algo.sac.n_critics' is read by sac"):
        from_dict({}, ["algo.name=slow_td3:SlowTD3", *PENDULUM, "algo.sac.n_critics=3"])


def test_the_written_config_holds_the_runs_own_section_and_loads_back_the_same():
    config = from_dict({}, ["algo.name=td3", *PENDULUM, "algo.td3.policy_delay=3"])
    data = yaml.safe_load(dump_yaml(config))
    assert set(data["algo"]) & set(SECTIONS) == {"td3"}
    assert from_dict(data, saved=True) == config
    assert from_dict(yaml.safe_load(dump_yaml(load_config())), saved=True) == load_config()


def test_config_show_marks_a_presets_keys_inside_a_section():
    config, sources = resolve({}, ["scheme.preset=apex"])
    text = annotated_yaml(config, sources)
    assert "    per_collector_eps: true  # from preset apex" in text
    assert "    initial_priorities: collector  # from preset apex" in text
    assert yaml.safe_load(text) == yaml.safe_load(dump_yaml(config))


def old_format(data: dict) -> dict:
    """``data`` as hpcrl wrote a run's config.yaml before sections: every algorithm's keys
    flat in algo and replay, at their values or defaults."""
    out = {name: dict(part) if isinstance(part, dict) else part for name, part in data.items()}
    algo = out["algo"]
    for kind in SECTIONS:
        section = algo.pop(kind, None) or {}
        for old, news in FLAT_NAMES.items():
            for new in news:
                _, owner, leaf = new.split(".")
                if owner == kind and leaf in section:
                    group, flat = old.split(".")
                    out[group].setdefault(flat, section[leaf])
    return out


def test_a_run_written_before_sections_resumes_silently_with_its_values(tmp_path, tiny_overrides):
    run = RunDir(tmp_path / "run")
    config = from_dict({}, tiny_overrides + ["algo.ppo.clip_range=0.25"])
    Trainer(config, run, console=None).train()
    saved = yaml.safe_load(run.config_path.read_text())
    td3 = yaml.safe_load(dump_yaml(from_dict({}, ["algo.name=td3", *PENDULUM])))
    saved["algo"]["td3"] = td3["algo"]["td3"]  # the old writer kept every algorithm's keys...
    saved = old_format(saved)
    saved["replay"]["policy_delay"] = 5  # ...even one set away from its default, never read
    run.config_path.write_text(yaml.safe_dump(saved))
    assert "clip_range" in saved["algo"] and "ppo" not in saved["algo"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning: the user wrote none of these names
        resumed = resume_config(run, ["train.total_env_steps=2048"])
    assert resumed.algo.ppo.clip_range == 0.25
    assert resumed.algo.td3 == SECTIONS["td3"]()  # another algorithm's keys: dropped unread
    Trainer(resumed, run, console=None, resume=True).train()
