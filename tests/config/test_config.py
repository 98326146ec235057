"""Config loading, overrides and the errors bad input gets."""
import pytest

from hpcrl.config import ConfigError, all_keys, dump_yaml, from_dict, load_config


def test_defaults_are_the_rl_zoo_cartpole_recipe():
    c = load_config()
    assert (c.env.id, c.env.num_envs, c.algo.name) == ("CartPole-v1", 8, "ppo")
    assert (c.algo.num_steps, c.algo.ppo.minibatch_size, c.algo.ppo.num_epochs) == (32, 256, 20)
    assert (c.algo.gamma, c.algo.gae_lambda, c.algo.lr, c.algo.ent_coef) == (0.98, 0.8, 1e-3, 0)
    assert c.train.total_env_steps == 100_000


def test_yaml_then_overrides(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("seed: 3\nalgo:\n  lr: 0.01\n  name: a2c\n")
    c = load_config(f, ["algo.lr=2e-4", "env.kwargs={max_episode_steps: 50}"])
    assert c.seed == 3 and c.algo.name == "a2c" and c.algo.lr == 2e-4
    assert c.env.kwargs == {"max_episode_steps": 50}
    assert from_dict(__import__("yaml").safe_load(dump_yaml(c))) == c  # round trip


@pytest.mark.parametrize("override, message", [
    ("algo.lrr=1", "unknown config key 'algo.lrr'; did you mean 'algo.lr'"),
    ("algo.minibatchsize=64", "did you mean 'algo.ppo.minibatch_size'"),
    ("trian.total_env_steps=5", "did you mean 'train.total_env_steps'"),
    ("algo.lr=fast", "config key 'algo.lr' must be a number"),
    ("env.num_envs=2.5", "config key 'env.num_envs' must be an integer"),
    ("env.normalize_obs=3", "config key 'env.normalize_obs' must be true or false"),
    ("algo.name=dqnn", "config key 'algo.name' must be one of"),
    ("algo.ppo.minibatch_size=100", "must divide the batch"),
    ("algo.ppo.minibatch_size=4", "multiple of the number of envs"),
    ("algo.gamma=1.5", "config key 'algo.gamma' must lie in [0, 1]"),
    ("algo.lr=-1", "config key 'algo.lr' must be > 0"),
    ("env.num_envs=0", "config key 'env.num_envs' must be > 0"),
    ("train.total_env_steps=10", "smaller than the env steps of one update, "
                                 "algo.num_steps x env.num_envs = 32 x 8 = 256"),
    ("train.device=tpu", "config key 'train.device'"),
    ("actor.hidden_sizes=[64, -1]", "actor.hidden_sizes"),
    ("env.id=CartPol-v1", "Did you mean: `CartPole`"),
    ("env.id=no_such_module:Env-v0", "cannot import module 'no_such_module'"),
    ("algo", "not of the form KEY=VALUE"),
])
def test_bad_input_names_the_key(override, message):
    with pytest.raises(ConfigError) as err:
        load_config(None, [override])
    assert message in str(err.value)


def test_bad_files(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- just\n- a list\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_config(bad)
    section = tmp_path / "section.yaml"
    section.write_text("algo: 3\n")
    with pytest.raises(ConfigError, match="section 'algo' must be a mapping"):
        load_config(section)


def test_module_env_ids_are_accepted():
    assert load_config(None, ["env.id=gymnasium.envs.classic_control:CartPole-v1"])


def test_every_key_is_documented():
    from hpcrl.config.docs import describe
    text = describe(load_config())
    for key in all_keys():
        assert key + " = " in text
    assert text.count("\n    ") >= len(all_keys())


def test_off_policy_collectors_refuse_a_gpu_collector_device_with_the_reason():
    with pytest.raises(ConfigError, match="scheme.collector_device.*numpy copy"):
        load_config(None, ["algo.name=dqn", "scheme.collector_device=cuda"])


def test_off_policy_learners_take_train_device(monkeypatch, tmp_path):
    """``train.device`` is read by the off-policy learner: on a machine without a GPU,
    ``cuda`` stops at the device check that names the fix, before any env step."""
    import torch

    from hpcrl.placement.serial_run import Trainer
    from hpcrl.runtime.run_dir import RunDir

    config = load_config(None, ["algo.name=sac", "env.id=Pendulum-v1", "train.device=cuda",
                                "train.total_env_steps=2000", "train.tensorboard=false"])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="'train.device' asks for 'cuda', but CUDA is not "
                                         "available.*use train.device=cpu or auto"):
        Trainer(config, RunDir(tmp_path), console=None)


@pytest.mark.parametrize("sets, reason, repeats_itself", [
    (["scheme.preset=async-ppo"], "asynchronous collection (scheme.collection=async)", False),
    (["scheme.preset=a3c"], "asynchronous gradients (scheme.gradients=async)", False),
    (["scheme.preset=ddppo"], "straggler preemption (scheme.preemption.fraction_workers=0.6",
     False),
    (["scheme.preset=ddppo", "scheme.preemption.fraction_workers=1",
      "scheme.preemption.fraction_samples=1"],
     "scheme.gradient_workers=2 sum their gradients (all-reduce)", True),
    (["train.device=cuda"], "train.device=cuda puts a role on a GPU", False),
    (["scheme.preset=a2c", "scheme.inference_ranks=1", "scheme.inference_device=cuda:0"],
     "scheme.inference_device=cuda:0 puts a role on a GPU", False),
])
def test_a_deterministic_job_is_refused_where_its_layout_cannot_keep_the_bits(
        sets, reason, repeats_itself):
    """train.deterministic=true is refused in one line naming the cause and the fixes; at
    auto the same layout runs, deterministically only where it repeats itself run to run
    (several gradient workers do: only timing or a GPU makes a run differ from the next)."""
    from hpcrl.config.determinism import runs_deterministically

    with pytest.raises(ConfigError) as err:
        load_config(None, ["train.deterministic=true", *sets])
    message = str(err.value)
    assert message.startswith("config key 'train.deterministic' (true): "), message
    assert reason in message and "or set train.deterministic=auto" in message
    assert "\n" not in message
    assert runs_deterministically(load_config(None, sets), cuda=False) == repeats_itself


@pytest.mark.parametrize("sets", [
    [],
    ["scheme.preset=a2c", "scheme.compress=lz4", "scheme.transport=messages"],
    ["scheme.preset=a2c", "scheme.inference_ranks=1", "scheme.inference_device=cpu",
     "scheme.env_groups=2"],
    ["algo.name=dqn"],
], ids=["serial", "a2c-lz4-messages", "a2c-inference-groups", "serial-dqn"])
def test_layouts_with_one_learner_take_a_deterministic_job(sets):
    from hpcrl.config.determinism import runs_deterministically

    for mode, expected in (("true", True), ("auto", True), ("false", False)):
        config = load_config(None, [f"train.deterministic={mode}", *sets])
        assert runs_deterministically(config, cuda=True) is expected, mode
