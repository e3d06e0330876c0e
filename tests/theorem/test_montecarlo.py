import numpy as np

from numerics.theorem.montecarlo import estimate, sample_counts
from theory.setting import Setting


def test_seeded_runs_are_reproducible():
    s = Setting(6)
    a = estimate(s, [0.1] * 6, [0.3, -0.1, 0, 0, 0, 0], size=5000, seed=11)
    b = estimate(s, [0.1] * 6, [0.3, -0.1, 0, 0, 0, 0], size=5000, seed=11)
    c = estimate(s, [0.1] * 6, [0.3, -0.1, 0, 0, 0, 0], size=5000, seed=12)
    assert a.risk == b.risk and np.array_equal(a.grad_beta, b.grad_beta)
    assert a.risk != c.risk


def test_sampled_law_is_balanced_and_geometric():
    s = Setting(10)
    n, counts = sample_counts(s, 200_000, np.random.default_rng(0))
    assert n.min() >= 1 and np.array_equal(counts.sum(axis=1), n)
    pos = (counts[:, 0] > 0).mean()
    assert abs(pos - 0.5) < 5 * np.sqrt(0.25 / 200_000)
    assert abs(n.mean() - 1 / float(s.p_value)) < 5 * n.std() / np.sqrt(len(n))
    n0, _ = sample_counts(Setting(10, lengths="nonnegative"), 1000, np.random.default_rng(0))
    assert n0.min() == 0
