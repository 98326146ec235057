"""The env layer's registries: every built-in suite and vector-env backend registers itself
from its own module, a registered one is found by name (a plug-in's too), and an unknown
name is refused naming the known ones."""
from __future__ import annotations

import textwrap

import gymnasium as gym
import pytest

from hpcrl.config import ConfigError, load_config
from hpcrl.envs.backends.backend import BACKENDS, Backend, backend_problem, vector_backend
from hpcrl.envs.backends.gymnasium import gymnasium_vector_env
from hpcrl.envs.registry import Registry, UnknownName
from hpcrl.envs.suites.suite import SUITES
from hpcrl.envs.suites.suite_ids import suite_of
from hpcrl.envs.vector import make_vector_env

BUILT_IN_SUITES = {"Atari", "Crafter", "DeepMind Control", "MinAtar", "MiniGrid", "PyBullet",
                   "ViZDoom"}


def test_every_suite_module_registers_its_suite():
    assert set(SUITES.names()) == BUILT_IN_SUITES
    for suite in SUITES:
        assert SUITES.get(suite.name) is suite
        assert suite_of(suite.example) == (suite, True)


def test_an_unknown_suite_is_refused_naming_the_known_ones():
    with pytest.raises(UnknownName, match="unknown env suite 'Pong'; known: Atari, ") as err:
        SUITES.get("Pong")
    assert all(name in str(err.value) for name in BUILT_IN_SUITES)


def test_both_backends_register_themselves_and_auto_picks_gymnasium_for_cartpole():
    assert set(BACKENDS.names()) == {"gymnasium", "envpool"}
    assert vector_backend(load_config(overrides=[]).env) is BACKENDS.get("gymnasium")


def test_an_unknown_backend_is_refused_naming_the_known_ones():
    with pytest.raises(ConfigError, match=r"config key 'env.backend': unknown env backend "
                                          r"'cuda'; known: envpool, gymnasium"):
        load_config(overrides=["env.backend=cuda"])


def test_a_plugin_backend_is_found_by_name(monkeypatch):
    made = []

    def make(config, num_envs, global_indices):
        made.append((num_envs, global_indices))
        return gymnasium_vector_env(config, num_envs, global_indices)

    monkeypatch.setattr(BACKENDS, "_records", dict(BACKENDS._records))  # drop it afterwards
    BACKENDS.add(Backend(name="mine", make=make, problem=lambda config: None,
                         auto=lambda config: False))
    config = load_config(overrides=["env.backend=mine"])
    assert backend_problem(config.env) is None
    envs = make_vector_env(config.env, 2, [4, 5])
    assert made == [(2, [4, 5])] and isinstance(envs, gym.vector.SyncVectorEnv)
    envs.close()


def test_a_backend_that_cannot_serve_the_config_is_refused_with_its_reason(monkeypatch):
    monkeypatch.setattr(BACKENDS, "_records", dict(BACKENDS._records))
    BACKENDS.add(Backend(name="picky", make=gymnasium_vector_env,
                         problem=lambda config: "it steps no CartPole; use env.backend=auto",
                         auto=lambda config: True))
    config = load_config(overrides=[])
    assert vector_backend(config.env).name == "picky"  # auto picks it
    with pytest.raises(ConfigError, match=r"'env.backend' \(picky\): it steps no CartPole"):
        load_config(overrides=["env.backend=picky"])


def test_a_registry_imports_its_package_and_refuses_a_taken_name(tmp_path, monkeypatch):
    package = tmp_path / "my_suites"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name in ("b_second", "a_first"):
        (package / f"{name}.py").write_text(textwrap.dedent(f"""
            from dataclasses import dataclass
            from test_env_registry_probe import REGISTRY

            @dataclass(frozen=True)
            class Record:
                name: str

            RECORD = REGISTRY.add(Record("{name}"))
        """))
    registry: Registry = Registry("probe record", "my_suites", key="env.probe")
    probe = tmp_path / "test_env_registry_probe.py"
    probe.write_text("REGISTRY = None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import test_env_registry_probe

    monkeypatch.setattr(test_env_registry_probe, "REGISTRY", registry)
    assert registry.names() == ["a_first", "b_second"]  # the modules', in name order
    first = registry.get("a_first")
    assert registry.add(first) is first  # the same record again: nothing happens
    with pytest.raises(ValueError, match="env suite|probe record 'a_first' is registered"):
        registry.add(type(first)("a_first"))
    with pytest.raises(UnknownName, match="config key 'env.probe': unknown probe record 'c'"):
        registry.get("c")
