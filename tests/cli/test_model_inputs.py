"""What the cost model reads of a config (``hpcrl plan --predict``)."""
from hpcrl.cli.model_inputs import config_inputs
from hpcrl.config import load_config


def steps_of(cfg):
    """A gradient worker's gradient steps and samples per update."""
    inputs = config_inputs(cfg)
    return inputs.gradient_steps, inputs.samples_per_update


def test_atari_recipe_inputs():
    cfg = load_config("examples/atari-ppo.yaml", ())
    # 4 epochs x (128 x 8 / 256) minibatches over the 1,024 samples of one rank
    assert steps_of(cfg) == (16, 4 * 1024)
    inputs = config_inputs(cfg)
    assert (inputs.steps_per_collection, inputs.collecting_ranks) == (1024, 1)
    assert inputs.vector_steps == 128
    assert not inputs.shape.asynchronous and not inputs.shape.preempting
    ddppo = config_inputs(load_config("examples/atari-ppo.yaml", ["scheme.preset=ddppo"]))
    assert ddppo.shape.preempting and ddppo.collecting_ranks == 2


def test_impala_recipe_learns_once_a_batch_of_its_collectors():
    cfg = load_config("examples/atari-impala.yaml", ())
    assert steps_of(cfg) == (1, 20 * 8 * 2)
    shape = config_inputs(cfg).shape
    assert shape.asynchronous and shape.collectors_per_worker == 2
