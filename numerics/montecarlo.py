"""Monte Carlo estimates of the population risk and gradients, as an independent cross-check.

Strings are drawn from the setting (length geometric, tokens uniform), reduced to token counts, and the
model is evaluated on them; every estimate comes with its standard error.  Seeds make runs reproducible.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from theory.setting import Setting
from theory.validation import SettingError, check_vector


@dataclass(frozen=True)
class MCEstimate:
    risk: float
    risk_se: float
    grad_alpha: np.ndarray
    grad_alpha_se: np.ndarray
    grad_beta: np.ndarray
    grad_beta_se: np.ndarray
    size: int


def sample_counts(setting: Setting, size: int, rng: np.random.Generator):
    """Draw ``size`` strings; return (lengths [size], counts [size x d]); symbol 0 is the marked one."""
    if not isinstance(size, (int, np.integer)) or size < 1:
        raise SettingError(f"sample size must be a positive integer, got {size!r}")
    p = float(setting.p_value)
    n = rng.geometric(p, size=size)  # support {1, 2, ...}
    if setting.lengths == "nonnegative":
        n = n - 1
    counts = rng.multinomial(n, np.full(setting.d, 1.0 / setting.d))
    return n, counts


def model_on_counts(alpha, beta, counts):
    """f and the attention mass per symbol for count vectors (rows); f = 0 on the empty string."""
    a = np.asarray(alpha, float)
    e = np.exp(a - a.max())
    ce = counts * e[None, :]
    S0 = ce.sum(axis=1)
    empty = S0 == 0
    att = ce / np.where(empty, 1.0, S0)[:, None]
    f = att @ np.asarray(beta, float)
    return f, att


def loss_terms(setting: Setting, f, y):
    if setting.loss == "squared":
        return 0.5 * (f - y) ** 2, f - y
    z = -y * f
    return np.logaddexp(0.0, z), -y / (1.0 + np.exp(-z))


def estimate(setting: Setting, alpha, beta, *, size: int = 100_000, seed: int = 0, counts=None) -> MCEstimate:
    """Monte Carlo risk and gradients at (alpha, beta) from ``size`` fresh strings (or given counts)."""
    alpha = np.asarray(check_vector("alpha", alpha, setting.d), float)
    beta = np.asarray(check_vector("beta", beta, setting.d), float)
    if counts is None:
        _, counts = sample_counts(setting, size, np.random.default_rng(seed))
    size = counts.shape[0]
    f, att = model_on_counts(alpha, beta, counts)
    y = np.where(counts[:, 0] > 0, 1.0, -1.0)
    loss, dl = loss_terms(setting, f, y)
    gb = att * dl[:, None]
    ga = att * (beta[None, :] - f[:, None]) * dl[:, None]
    se = lambda x: x.std(axis=0, ddof=1) / np.sqrt(size)  # noqa: E731
    return MCEstimate(float(loss.mean()), float(se(loss)), ga.mean(axis=0), se(ga), gb.mean(axis=0), se(gb), size)
