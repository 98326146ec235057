"""Action distributions agree with torch.distributions and sample the right frequencies."""
import torch
from torch.distributions import Categorical, Normal

from hpcrl.models.distributions import CategoricalActions, DiagGaussianActions


def test_categorical_log_prob_entropy_match_torch():
    logits = torch.randn(64, 5)
    actions = torch.randint(0, 5, (64,))
    d = CategoricalActions(5)
    ref = Categorical(logits=logits)
    torch.testing.assert_close(d.log_prob(logits, actions), ref.log_prob(actions))
    torch.testing.assert_close(d.entropy(logits), ref.entropy())
    assert torch.equal(d.mode(logits), logits.argmax(-1))


def test_categorical_inverse_cdf_sampling_frequencies():
    probs = torch.tensor([0.1, 0.6, 0.3])
    logits = probs.log().expand(200_000, 3)
    u = torch.rand(200_000, generator=torch.Generator().manual_seed(0))
    samples = CategoricalActions(3).sample(logits, u)
    freq = torch.bincount(samples, minlength=3).float() / samples.numel()
    torch.testing.assert_close(freq, probs, atol=5e-3, rtol=0)
    assert samples.max() <= 2  # u close to 1 never yields an out-of-range index


def test_gaussian_matches_torch_normal():
    mean, log_std = torch.randn(32, 3), torch.randn(3).expand(32, 3) * 0.3
    params = torch.stack([mean, log_std], dim=1)
    actions = torch.randn(32, 3)
    d = DiagGaussianActions(3)
    ref = Normal(mean, log_std.exp())
    torch.testing.assert_close(d.log_prob(params, actions), ref.log_prob(actions).sum(-1))
    torch.testing.assert_close(d.entropy(params), ref.entropy().sum(-1))
    noise = torch.randn(32, 3)
    torch.testing.assert_close(d.sample(params, noise), mean + log_std.exp() * noise)
    torch.testing.assert_close(d.mode(params), mean)
