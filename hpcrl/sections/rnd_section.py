"""The config section of Random Network Distillation (Burda et al. 2018), ``rnd.*``.

RND is an exploration bonus that any on-policy agent on GAE batches (``ppo``, ``a2c`` and
their plug-in subclasses) takes with ``rnd.enabled=true``: a fixed, randomly initialised
target network embeds each observation, a predictor learns to match the embedding, and the
predictor's error on the observation an env step led to is that step's intrinsic reward.
The agent keeps separate extrinsic and intrinsic value heads and returns (the intrinsic ones
non-episodic, with their own discount) and follows the sum of their advantages weighted by
``ext_coef`` and ``int_coef``. The defaults are the paper's.
"""
from __future__ import annotations

from dataclasses import dataclass

from hpcrl.field_docs import doc


@dataclass
class RndConfig:
    """Random Network Distillation's networks, rewards and weights (off unless ``enabled``)."""

    enabled: bool = doc(
        "Add RND's intrinsic reward to an on-policy agent (ppo, a2c): a second value head, "
        "intrinsic advantages and the predictor's loss, trained on every scheme (the "
        "predictor is part of the actor, so its gradients travel with the policy's).", False)
    int_coef: float = doc("Weight of the intrinsic advantages in the policy's advantage.", 1.0)
    ext_coef: float = doc("Weight of the extrinsic advantages in the policy's advantage.", 2.0)
    gamma: float = doc("Discount of the intrinsic returns (non-episodic: they run on across "
                       "episode ends).", 0.99)
    gae_lambda: float = doc("GAE lambda of the intrinsic advantages.", 0.95)
    loss_coef: float = doc("Weight of the predictor's loss in the agent's loss.", 1.0)
    update_proportion: float = doc(
        "Fraction of each minibatch's samples the predictor trains on (drawn per sample, the "
        "same for any layout of the job): what keeps the bonus from fading as fast with many "
        "envs as with few.", 0.25)
    features: int = doc("Width of the target's and predictor's embedding.", 128)
    hidden_sizes: list = doc(
        "Widths of the hidden layers of the target's MLP over vector observations; the "
        "predictor has one more layer of the last width. Image observations go through "
        "Burda et al.'s convolutions (32 8x8/4, 64 4x4/2, 64 3x3/1; two "
        "unstrided 3x3 ones of 32 and 64 channels for frames under 36 pixels a side, such "
        "as MinAtar's) and a linear layer instead; their predictor adds two ReLU layers of "
        "512.",
        factory=lambda: [128, 128])
    clip_obs: float = doc("The predictor's and target's inputs, normalised by their own "
                          "running statistics, are clipped to +- this.", 5.0)



