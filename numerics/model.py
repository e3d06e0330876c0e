"""The model family, written once: H-head softmax attention without positional encoding, linear readout.

For a string of tokens with embeddings x_i in R^D (row i of ``X``), head h scores s_hi = alpha_h^T x_i,
attends with w_hi = m_i e^{s_hi} / sum_j m_j e^{s_hj} and reads out f = sum_h B_h^T sum_i w_hi x_i in
R^K (docs/setting.md, "The experiment tasks").  ``m_i >= 0`` are multiplicities: a string can be given token by
token (m = 1, with m = 0 for padding) or as a bag of distinct tokens with their counts, which is how the
exact series evaluates the population risk (the tokens are the parameter classes, m the counts).  A
string with no tokens (all m = 0) has w = 0 and f = 0.

Forward and backward sit side by side:

* ``attend(s, V, m)`` -> (f, w) with values V_i = B^T x_i, and ``attend_backward`` its vector-Jacobian
  product: d/ds_i = w_i (V_i - f) . g and d/dV_i = w_i g for an upstream gradient g = dL/df;
* ``LOSSES``: value and derivative in f of the squared, logistic and cross-entropy losses;
* ``Model``: the parameters (alpha in R^{H x D}, B in R^{H x D x K}) and ``risk_and_grad`` over a batch.

Every function takes a number context (``numerics.contexts``): float64 arrays, or object arrays of mpmath
numbers or arb balls, so the exact series (float, mp, arb) and the sampled training share this code.
The theory model is H = 1, K = 1, D = d one-hot tokens: f = sum_k beta_k c_k e^{alpha_k} / sum_k c_k e^{alpha_k}.

>>> import numpy as np
>>> m = Model(H=1, D=2, K=1)
>>> p = m.zeros()
>>> p.B[0, :, 0] = [1.0, -1.0]
>>> X = np.eye(2)                      # two token types, shared by the batch
>>> counts = np.array([[1, 3], [0, 2]])  # string 1: one a, three b; string 2: two b
>>> m.forward(p, X, counts)[0][:, 0].tolist()
[-0.5, -1.0]
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from theory.validation import SettingError, check_choice, check_int

from numerics.contexts import FLOAT


def _mass(m, shape):
    """Multiplicities broadcast to ``shape`` (N, L) as float64 (plain numbers in every context)."""
    if m is None:
        return np.ones(shape)
    m = np.asarray(m, dtype=float)
    if np.any(m < 0):
        raise SettingError("token multiplicities must be >= 0")
    return np.broadcast_to(m, shape)


def attention_weights(s, m=None, ctx=FLOAT):
    """Softmax weights along the last axis with multiplicities ``m``; rows with no mass get w = 0.

    The maximum score over tokens that are present is subtracted first (exact in every context), so
    scores of any size neither overflow nor lose the softmax.
    """
    s = np.asarray(s, dtype=ctx.dtype)
    mass = _mass(m, s.shape)
    present = mass > 0
    sf = np.where(present, ctx.shift(s), -np.inf)
    top = sf.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = ctx.exp(np.where(present, s - top, 0.0 * s))  # absent tokens: exp(0), then weight 0
    e = np.where(present, mass * e, 0.0 * e)
    total = e.sum(axis=-1, keepdims=True)
    empty = ~present.any(axis=-1, keepdims=True)
    return e / np.where(empty, 1.0, total)


def attend(s, V, m=None, ctx=FLOAT):
    """One attention readout: (f, w) with f = sum_i w_i V_i; s is (..., L), V is (..., L, K)."""
    w = attention_weights(s, m, ctx)
    f = np.einsum("...l,...lk->...k", w, V)
    return f, w


def attend_pair(cu, r, beta_a, beta_b, out=None):
    """``attend`` for non-empty strings of two token types, vectorised over count arrays (the lean path).

    Token a occurs c times and token b r times (c + r >= 1), with scores alpha_a, alpha_b and values
    beta_a, beta_b.  The caller passes ``cu`` = c e^(alpha_a - alpha_b), so the weight on a is
    w = cu / (cu + r) and f = beta_b + (beta_a - beta_b) w; numbers of any context.  ``out`` (float
    arrays only) is a pair of buffers (f, w) reused across calls.  The backward pass is
    ``attend_backward`` with two tokens: dL/dalpha_a = -dL/dalpha_b = w (beta_a - f) g,
    dL/dbeta_a = w g and dL/dbeta_b = (1 - w) g for g = dL/df.  Returns (f, w).
    """
    if out is None:
        w = cu / (cu + r)
        return beta_b + (beta_a - beta_b) * w, w
    f, w = out
    np.add(cu, r, out=w)
    np.divide(cu, w, out=w)
    np.multiply(w, beta_a - beta_b, out=f)
    f += beta_b
    return f, w


def pair_squared_sums(cu, r, y, W, beta_a: float, beta_b: float, buf: dict):
    """``attend_pair``, the squared loss and the two-token backward pass, fused and summed with
    probability weights W (float arrays; ``buf`` holds reused buffers "w", "f", "g", "tmp").

    With w = cu / (cu + r), f = beta_b + (beta_a - beta_b) w and g = W (f - y) (= W dL/df), returns
    (sum W (f - y)^2 / 2, sum g w, sum g, sum g w (beta_a - f)): the risk and the sums the backward pass
    needs (dL/dbeta_a, dL/dbeta_a + dL/dbeta_b, dL/dalpha_a), using beta_a - f = (beta_a - beta_b)(1 - w).
    Every sum is numpy's pairwise summation.
    """
    w, dl, g, tmp = buf["w"], buf["f"], buf["g"], buf["tmp"]
    np.add(cu, r, out=w)
    np.divide(cu, w, out=w)
    delta = beta_a - beta_b
    np.multiply(w, delta, out=dl)
    dl += beta_b
    dl -= y  # f - y
    np.multiply(W, dl, out=g)
    risk = 0.5 * np.multiply(g, dl, out=tmp).sum()
    g_total = g.sum()
    gw = np.multiply(g, w, out=tmp).sum()
    gw2 = np.multiply(tmp, w, out=tmp).sum()
    return risk, gw, g_total, delta * (gw - gw2)


def attend_backward(w, V, f, g):
    """Vector-Jacobian product of ``attend``: (dL/ds (..., L), dL/dV (..., L, K)) for g = dL/df (..., K)."""
    vg = np.einsum("...lk,...k->...l", V, g)
    fg = np.einsum("...k,...k->...", f, g)
    ds = w * (vg - fg[..., None])
    dV = w[..., :, None] * g[..., None, :]
    return ds, dV


# ------------------------------------------------------------------------------------------------
# losses: value per example and derivative in f (shape (N, K)); y is (N, K) for squared/logistic and
# (N,) integer class labels for cross-entropy


def _squared(f, y, ctx, out=None):
    if out is not None:  # float buffers (loss (N,), r (N, 1)): no allocation on the lean series path
        loss, r = out
        np.subtract(f, y, out=r)
        np.multiply(r[:, 0], r[:, 0], out=loss)
        loss *= 0.5
        return loss, r
    r = f - y
    sq = r * r
    # numpy reduces a length-1 axis with one strided loop per row: skip it for K = 1; otherwise ndarray.sum's
    # own reduction (np.add.reduce), the same sum, without the Python wrapper a per-step call would pay for
    return 0.5 * (sq[..., 0] if sq.shape[-1] == 1 else np.add.reduce(sq, axis=-1)), r


def _logistic(f, y, ctx):
    if f.shape[-1] != 1:
        raise SettingError("the logistic loss is for scalar outputs (K = 1)")
    z = -y * f
    return ctx.log1pexp(z)[..., 0], -y * ctx.sigmoid(z)


def _cross_entropy(f, y, ctx):
    y = np.asarray(y, dtype=int)
    top = ctx.shift(f).max(axis=-1, keepdims=True)
    e = ctx.exp(f - top)
    total = e.sum(axis=-1, keepdims=True)
    soft = e / total
    picked = np.take_along_axis(f, y[:, None], axis=-1)[:, 0]
    logz = ctx.log(total[:, 0])
    loss = logz + top[:, 0] - picked
    onehot = np.zeros(f.shape)
    onehot[np.arange(len(y)), y] = 1.0
    return loss, soft - onehot


LOSSES = {"squared": _squared, "logistic": _logistic, "cross_entropy": _cross_entropy}
"""Loss name -> function (f, y, ctx) -> (loss per example, dloss/df)."""


def loss_terms(name: str, f, y, ctx=FLOAT, out=None):
    """(loss per example, dloss/df) of loss ``name`` at outputs f (N, K).

    ``out``: optional float buffers (loss (N,), dloss/df (N, 1)) that the squared loss (K = 1) fills
    in place; the other losses allocate their results.
    """
    check_choice("loss", name, LOSSES)
    if out is not None and name == "squared":
        return _squared(f, y, ctx, out)
    return LOSSES[name](f, y, ctx)


# ------------------------------------------------------------------------------------------------


@dataclass
class Params:
    """Attention alpha (H, D) and readout B (H, D, K)."""

    alpha: np.ndarray
    B: np.ndarray

    def copy(self) -> "Params":
        return Params(self.alpha.copy(), self.B.copy())

    def flat(self) -> np.ndarray:
        """alpha and B as one float vector (for finite differences and distances)."""
        return np.concatenate([np.asarray(self.alpha, float).ravel(), np.asarray(self.B, float).ravel()])


@dataclass(frozen=True)
class Model:
    """H heads over embeddings in R^D with K outputs: f(X) = sum_h B_h^T sum_i softmax_i(alpha_h^T x_i) x_i."""

    H: int = 1
    D: int = 2
    K: int = 1

    def __post_init__(self):
        for name in ("H", "D", "K"):
            object.__setattr__(self, name, check_int(name, getattr(self, name)))

    def zeros(self) -> Params:
        """The zero initialisation."""
        return Params(np.zeros((self.H, self.D)), np.zeros((self.H, self.D, self.K)))

    def init(self, scale: float = 0.0, seed: int = 0) -> Params:
        """Zero for H = 1; for H >= 2 seeded normal values of the given scale (zero keeps heads identical)."""
        if self.H == 1 or scale == 0:
            return self.zeros()
        rng = np.random.default_rng(seed)
        return Params(scale * rng.standard_normal((self.H, self.D)),
                      scale * rng.standard_normal((self.H, self.D, self.K)))

    def _scores_values(self, params: Params, X):
        X = np.asarray(X, dtype=params.alpha.dtype if params.alpha.dtype == object else float)
        if X.shape[-1] != self.D:
            raise SettingError(f"embeddings must have D = {self.D} columns, got shape {X.shape}")
        s = np.einsum("...ld,hd->...hl", X, params.alpha)
        V = np.einsum("...ld,hdk->...hlk", X, params.B)
        return X, s, V

    def forward(self, params: Params, X, m=None, ctx=FLOAT):
        """Outputs f (N, K) and weights w (N, H, L) for a batch X (N, L, D), or X (L, D) shared by
        every string of the batch, with multiplicities m (N, L) (None: every token once)."""
        X, s, V = self._scores_values(params, X)
        mh = None if m is None else np.asarray(m, dtype=float)[..., None, :]
        if X.ndim == 2:
            if m is None:
                raise SettingError("a shared embedding table X (L, D) needs multiplicities m (N, L)")
            s = np.broadcast_to(s, mh.shape[:-2] + s.shape)
            V = np.broadcast_to(V, mh.shape[:-2] + V.shape)
        fh, w = attend(s, V, mh, ctx)
        return fh.sum(axis=-2), w

    def risk_and_grad(self, params: Params, X, y, m=None, *, loss: str = "squared", weights=None, ctx=FLOAT):
        """Weighted mean loss over the batch and its gradient in (alpha, B).

        ``weights`` (N,) are probability weights (default 1/N each); the risk is sum_n weights_n loss_n,
        so an exact population sum passes its probability weights here.
        Returns (risk, Params of gradients, f).
        """
        X, s, V = self._scores_values(params, X)
        N = np.asarray(m).shape[0] if X.ndim == 2 else X.shape[0]
        mh = None if m is None else np.asarray(m, dtype=float)[..., None, :]
        if X.ndim == 2:
            s = np.broadcast_to(s, (N,) + s.shape)
            V = np.broadcast_to(V, (N,) + V.shape)
        fh, w = attend(s, V, mh, ctx)
        f = fh.sum(axis=-2)
        lv, dl = loss_terms(loss, f, y, ctx)
        wt = np.full(N, 1.0 / N) if weights is None else weights
        risk = (wt * lv).sum()
        g = dl * wt[:, None]
        ds, dV = attend_backward(w, V, fh, g[:, None, :])
        if X.ndim == 2:
            ds, dV = ds.sum(axis=0), dV.sum(axis=0)
            galpha = np.einsum("hl,ld->hd", ds, X)
            gB = np.einsum("hlk,ld->hdk", dV, X)
        else:
            galpha = np.einsum("nhl,nld->hd", ds, X)
            gB = np.einsum("nhlk,nld->hdk", dV, X)
        return risk, Params(galpha, gB), f
