"""Monte Carlo estimates of the population risk and gradients, as an independent cross-check.

Strings are drawn from the setting (its length law, tokens uniform), reduced to token counts, and the
model (``numerics.model``) is evaluated on them; every estimate comes with its standard error.  Seeds make
runs reproducible.

>>> from theory.setting import Setting
>>> est = estimate(Setting(4), [0.0] * 4, [0.0] * 4, size=1000, seed=1)
>>> est.risk, est.size
(0.5, 1000)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from theory.setting import Setting
from theory.validation import check_int, check_vector

from numerics.model import attend, attend_backward, loss_terms


@dataclass(frozen=True)
class MCEstimate:
    """Sample means of the risk and gradients with their standard errors (an estimate, not a bound)."""

    risk: float
    risk_se: float
    grad_alpha: np.ndarray
    grad_alpha_se: np.ndarray
    grad_beta: np.ndarray
    grad_beta_se: np.ndarray
    size: int


def sample_counts(setting: Setting, size: int, rng: np.random.Generator):
    """Draw ``size`` strings; return (lengths [size], counts [size x d]); symbol 0 is the marked one."""
    size = check_int("sample size", size)
    n = setting.law.sample(rng, size)
    counts = rng.multinomial(n, np.full(setting.d, 1.0 / setting.d))
    return n, counts


def per_string(setting: Setting, alpha, beta, counts):
    """Loss and gradients string by string (rows) from the model on one-hot tokens with counts.

    Returns (loss [N], grad_alpha [N x d], grad_beta [N x d]); f = 0 on the empty string.
    """
    s = np.broadcast_to(np.asarray(alpha, float), counts.shape)
    V = np.broadcast_to(np.asarray(beta, float)[:, None], counts.shape + (1,))
    f, w = attend(s, V, counts)
    y = setting.label(counts[:, 0])[:, None]
    loss, dl = loss_terms(setting.loss, f, y)
    ds, dV = attend_backward(w, V, f, dl)
    return loss, ds, dV[..., 0]


def estimate(setting: Setting, alpha, beta, *, size: int = 100_000, seed: int = 0, counts=None) -> MCEstimate:
    """Monte Carlo risk and gradients at (alpha, beta) from ``size`` fresh strings (or given counts)."""
    alpha = np.asarray(check_vector("alpha", alpha, setting.d), float)
    beta = np.asarray(check_vector("beta", beta, setting.d), float)
    if counts is None:
        _, counts = sample_counts(setting, size, np.random.default_rng(seed))
    size = counts.shape[0]
    loss, ga, gb = per_string(setting, alpha, beta, counts)

    def se(x):
        return x.std(axis=0, ddof=1) / np.sqrt(size)

    return MCEstimate(float(loss.mean()), float(se(loss)), ga.mean(axis=0), se(ga), gb.mean(axis=0), se(gb), size)
