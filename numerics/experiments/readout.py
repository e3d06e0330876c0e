"""The engine's readout rules: per-string losses and their gradients in the outputs f, and the
prediction, accuracy and tie rules of the reported accuracies.
"""
from __future__ import annotations

import numpy as np

from theory.validation import SettingError

from numerics.model import loss_terms
from numerics.experiments import kernels
from numerics.experiments.layout import Tokens


def losses(f: np.ndarray, tb: Tokens, loss: str) -> tuple[np.ndarray, np.ndarray]:
    """Per string and run: loss (N, R) and dloss/df (N, R, K)."""
    N, R, K = f.shape
    flat = f.reshape(N * R, K)
    if loss == "cross_entropy":
        if tb.labels is None:
            raise SettingError("the cross-entropy loss needs class labels; this task has none")
        target = np.repeat(np.asarray(tb.labels, int), R)
    else:
        target = tb.y if R == 1 else np.repeat(tb.y, R, axis=0)
    lv, dl = loss_terms(loss, flat, target)
    return np.asarray(lv, float).reshape(N, R), np.asarray(dl, float).reshape(N, R, K)


def _risk_and_dl(f: np.ndarray, tb: Tokens, loss: str) -> tuple[np.ndarray, np.ndarray]:
    """The R weighted risks and d risk / d f (N, R, K): each string's loss gradient times its weight, scaled in
    the gradient's own array (every loss returns a new one)."""
    lv, dl = _terms_and_dl(f, tb, loss)
    return tb.weights @ lv, dl


def _terms_and_dl(f: np.ndarray, tb: Tokens, loss: str) -> tuple[np.ndarray, np.ndarray]:
    """The losses (N, R) and their weighted gradients d risk / d f (N, R, K) of ``_risk_and_dl``."""
    if loss == "squared" and f.shape[2] == 1 and tb.y.shape[1] == 1 and kernels.usable():
        # one output: numpy's elementwise passes as one compiled pass, the same bits (``kernels.squared_terms``)
        lv, dl = kernels.squared_terms(f[:, :, 0], tb.y[:, 0], tb.weights)
        return lv, dl[:, :, None]
    if loss == "squared" and tb.y.shape[1] == f.shape[2] and kernels.usable():
        # several outputs (ICL): the same in one pass, numpy's pairwise sum over the outputs replayed
        return kernels.squared_outputs(f, tb.y, tb.weights)
    lv, dl = losses(f, tb, loss)
    return lv, np.multiply(dl, tb.weights[:, None, None], out=dl)


TIE_RTOL = 1e-9
"""Outputs closer than TIE_RTOL times the run's output scale (``tie_margin``) are tied: a +-1 output with
|f| within it, or two class outputs within it of each other.  Their order is the trained parameters'
rounding, not the model's: OR's output-only readout at d = 50 has beta_a / beta_u = -24 (-(d/2 - 1)) to
2e-15 relative, so 34 count classes (mass 0.0076) sit at |f| <= 8e-16, and the committed run's accuracy
curve alternated between 0.857 and 0.864 as their signs moved; the next class is at |f| = 3.5e-4.  A tie
is decided by the stated rule (``predictions``: f = 0 counts as -1, the first of tied classes wins), so an
accuracy does not depend on rounding, and its tied mass is reported beside it.  The margin is far above
the ties seen (|f| <= 8e-16 here, 1e-13 in an Adam run of the same row at d = 25) and far below the
next class's 3.5e-4."""


def tie_margin(B: np.ndarray, l1: float = 1.0) -> np.ndarray:
    """TIE_RTOL times the largest |f| the readout B (..., H, D, K) allows on tokens of L1 norm at most ``l1``
    (``_largest_l1`` of the token table): each head's output is a convex combination of its token values
    x B_h, and |x B_h| <= |x|_1 max |B_h|, so |f| <= l1 sum_h max |B_h|.  One-hot and class-average tokens
    have l1 = 1; ICL's pair tokens have two ones, l1 = 2.  Shape (...)."""
    return TIE_RTOL * l1 * np.abs(B).max(axis=(-2, -1)).sum(axis=-1)


def _largest_l1(table) -> float:
    """The largest L1 norm of a table's rows (0 for an empty table)."""
    if table.shape[0] == 0:
        return 0.0
    return float(abs(table).sum(axis=1).max())


def predictions(f: np.ndarray, margin=0.0) -> tuple[np.ndarray, np.ndarray]:
    """(the predictions, whether each is tied) of outputs f (..., K) at a tie margin broadcast against
    f[..., 0]: for K = 1, +1 where f > margin and -1 elsewhere (f = 0 and every |f| <= margin count as
    -1), tied where |f| <= margin; for K > 1, the first class whose output is within the margin of the
    largest (the argmax when the margin is 0), tied where two are (on ICL a tie goes to class 0, the
    trigger, which is never an answer: a tied string counts wrong)."""
    margin = np.asarray(margin, dtype=float)
    if f.shape[-1] == 1:
        f0 = f[..., 0]
        return np.where(f0 > margin, 1, -1), np.abs(f0) <= margin
    near = f >= f.max(axis=-1, keepdims=True) - margin[..., None]
    return np.argmax(near, axis=-1), near.sum(axis=-1) > 1


def accuracy(f: np.ndarray, tb: Tokens, margin=0.0) -> np.ndarray | None:
    """Weighted accuracy per run of outputs f (N, R, K): ``predictions`` at ``margin`` (a scalar or one per
    run), +-1 labels for K = 1 and class labels for K > 1; None for regression."""
    return None if tb.labels is None else tb.weights @ prediction_hits(f, tb.labels, margin)[0]


def prediction_hits(f: np.ndarray, labels, margin=0.0) -> tuple[np.ndarray, np.ndarray]:
    """(correct, tied) predictions (N, R) as floats for outputs f (N, R, K) and labels (N,)."""
    pred, tied = predictions(f, margin)
    return (pred == np.asarray(labels)[:, None]).astype(float), tied.astype(float)
