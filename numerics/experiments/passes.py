"""The engine's forward and backward passes: the outputs of R runs on a batch's layout
(``layout.Tokens``) and, from dL/df, their gradients.

A **bank** is R runs of the same model on the same data stream, each with its own parameters: alpha (R, H, D),
B (R, H, D, K).  Every pass computes all runs and heads at once; its cost is proportional to the number of
token rows times the number of runs times H K.  ``_risk_and_grad`` is one step of a chunk of runs: forward,
the loss's gradient (``readout``), backward.

``Tokens.kernel`` chooses how one-hot token rows (ICL, two-head AND) are computed: "numpy" (the default, the
rounding of the committed results) or "compiled" (``kernels``: numba loops, other rounding, the same values
to 1e-12; ``runner.Config.kernel``, ``table1 --kernel``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse
from theory.validation import SettingError

from numerics.experiments import kernels
from numerics.experiments.layout import Tokens, _onehot, _patterns, _row_operators, _rows_loops
from numerics.experiments.readout import _risk_and_dl


@dataclass
class Forward:
    """What the backward pass needs: per-head outputs fh (N, R, H, K), f (N, R, K), and the attention
    weights: bag layout (T, N, RH) with the type values V (T, RH, K); rows layout (M, RH) with V the mean
    embeddings xbar (RH, N_ne, D) of the non-empty strings.  The compiled kernel's (``_onehot_forward``: w its
    weights and normalisers) has no fh: its backward pass is in ``_onehot_risk_and_grad``."""

    f: np.ndarray
    fh: np.ndarray | None
    w: object
    V: object = None


def _forward_rows(alpha: np.ndarray, B: np.ndarray, tb: Tokens, loops) -> Forward:
    """Rows layout, all runs and heads at once: scores s = X_rows alpha (a lookup for one-hot rows), the
    segment softmax w, the mean embedding xbar_n = sum_i w_i x_i of each string (one sparse product over
    every (run, head)) and f = xbar B (a batched dense product of size N x D x K per run and head).  ``loops``:
    ``_rows_loops(tb)``, asked once by the caller for the whole step."""
    R, H, D = alpha.shape
    N_ne = len(tb.starts)
    oh = _onehot(tb)
    if oh is not None:
        Wt, xbar, _, f = _onehot_forward(alpha, B, tb, oh)
        return Forward(f=f, fh=None, w=Wt, V=xbar)
    if loops is not None:  # the same operations in the same order in two loops around numpy's exponential
        Wt, xbar = kernels.rows_forward(alpha.reshape(R * H, D), loops)                    # (M, RH), (RH, N_ne, D)
        return _readout(xbar, B, tb, Wt)
    _, _, _, reps, heavy, (rows_p, scatter_p, _, _) = _row_operators(tb)
    G = tb.groups
    if G > 1 and R % G:
        raise SettingError(f"a stack of {G} batches takes the same number of runs on each, got {R} runs")
    CH = R * H // G                                                                   # columns: runs of a group
    if G == 1:
        A = alpha.reshape(R * H, D).T                                                 # (D, RH)
    else:  # group s's alphas in rows s D .. s D + D - 1 (``_row_operators``' score rows)
        A = alpha.reshape(G, CH, D).transpose(0, 2, 1).reshape(G * D, CH)            # (G D, CH)
    S = rows_p(A) if rows_p is not None else np.asarray(tb.rows @ A)                 # (M, CH)
    # the softmax in place (S becomes the weights): no new (M, CH) array per operation
    S -= np.repeat(np.maximum.reduceat(S, tb.starts, axis=0), reps, axis=0)
    np.exp(S, out=S)
    if CH == 1 and 20 * len(heavy) < len(S):  # few repeated tokens (ICL at d >= 50): only their rows
        S.reshape(-1)[heavy] *= tb.mult[heavy]
    elif len(heavy):
        S *= tb.mult[:, None]
    S /= np.repeat(np.add.reduceat(S, tb.starts, axis=0), reps, axis=0)
    Wt = S                                                                            # (M, CH)
    xbar = scatter_p(Wt).reshape(N_ne, D, CH)
    if G > 1:  # (G N, D, CH) -> (G CH, N, D): run (s, c) on its group's strings
        xbar = np.ascontiguousarray(xbar.reshape(G, N_ne // G, D, CH).transpose(0, 3, 1, 2))
        xbar = xbar.reshape(R * H, N_ne // G, D)
    elif R * H > 1:
        xbar = np.ascontiguousarray(xbar.transpose(2, 0, 1))                         # (RH, N_ne, D)
    else:
        xbar = xbar.reshape(1, N_ne, D)
    return _readout(xbar, B, tb, Wt)


def _onehot_forward(alpha: np.ndarray, B: np.ndarray, tb: Tokens, oh):
    """The compiled kernel's forward pass: (its weights and normalisers, the mean embeddings xbar (RH, N_ne, D),
    the heads' outputs fhe (RH, N_ne, K), f (N, R, K)), f a view of fhe where there is one head and no empty
    string (no array of the numpy path's layout (N, R, H, K) is built)."""
    R, H, D = alpha.shape
    K = B.shape[-1]
    Wt, xbar = kernels.softmax_scatter(alpha.reshape(R * H, D), oh)
    fhe = xbar @ B.reshape(R * H, D, K)                                               # (RH, N_ne, K)
    f = (fhe if H == 1 else fhe.reshape(R, H, -1, K).sum(axis=1)).transpose(1, 0, 2)  # (N_ne, R, K)
    if f.shape[0] < tb.size:
        f_ne, f = f, np.zeros((tb.size, R, K))
        f[tb.nonempty] = f_ne
    return Wt, xbar, fhe, f


def _onehot_risk_and_grad(alpha: np.ndarray, B: np.ndarray, tb: Tokens, loss: str, oh):
    """``_risk_and_grad`` on the compiled kernel, in the fewest calls (at ICL's sizes a step's numpy calls
    cost about as much as its passes over the rows): dL/df, U = B g_n and the heads' outputs stay in the layout
    (RH, N_ne, .) of the readout products, which the loops read as they are; the squared loss on a batch
    without empty strings (ICL, sampled two-head AND) is one compiled pass too (``kernels.squared_loss``)."""
    R, H, D = alpha.shape
    K = B.shape[-1]
    Wt, xbar, fhe, f = _onehot_forward(alpha, B, tb, oh)
    if loss == "squared" and fhe.shape[1] == tb.size:  # one compiled pass (a third of numpy's calls' time)
        r, g_c = kernels.squared_loss(fhe, tb.y, tb.weights, H)                            # g_c (RH, N, K)
    else:
        r, g = _risk_and_dl(f, tb, loss)                                              # g (N, R, K)
        g_t = (g if fhe.shape[1] == tb.size else g[tb.nonempty]).transpose(1, 0, 2)   # (R, N_ne, K)
        g_c = g_t if H == 1 else np.repeat(g_t, H, axis=0)                            # (RH, N_ne, K)
    Bc = B.reshape(R * H, D, K)
    gB = xbar.transpose(0, 2, 1) @ g_c                                                # (RH, D, K)
    ga = kernels.score_grad(g_c @ Bc.transpose(0, 2, 1), fhe, g_c, Wt, oh)                 # (RH, D)
    return r, ga.reshape(R, H, D), gB.reshape(R, H, D, K), f


def _readout(xbar: np.ndarray, B: np.ndarray, tb: Tokens, Wt) -> Forward:
    """The numpy kernel's f = xbar B from the mean embeddings xbar (RH, N_ne, D) of the non-empty strings."""
    R, H, D, K = B.shape
    N = tb.size // tb.groups
    N_ne = len(tb.starts) // tb.groups
    fhe = xbar @ B.reshape(R * H, D, K)                                               # (RH, N_ne, K)
    if N_ne == N:  # every string non-empty (the sampled tasks): nonempty is 0..N-1
        fh = fhe.transpose(1, 0, 2).reshape(N, R, H, K)
    else:
        fh = np.zeros((N, R, H, K))
        fh[tb.nonempty] = fhe.transpose(1, 0, 2).reshape(N_ne, R, H, K)
    # one head: numpy's sum over the length-1 axis is 0.0 + fh (bit for bit), without its strided loop
    f = fh[:, :, 0] + 0.0 if H == 1 else fh.sum(axis=2)
    return Forward(f=f, fh=fh, w=Wt, V=xbar)


def _backward_rows(fw: Forward, B: np.ndarray, g: np.ndarray, tb: Tokens, loops) -> tuple[np.ndarray, np.ndarray]:
    """Gradients of the rows layout from dL/df = g (N, R, K), all runs and heads at once: dB_h = xbar^T g,
    and per row ds_i = w_i (x_i . (B g_n) - f_hn . g_n), dalpha_h = X_rows^T ds."""
    R, H, D, K = B.shape
    G = tb.groups
    N_ne = len(tb.starts) // G
    every = N_ne == g.shape[0]  # nonempty is 0..N-1: no gather of the strings (always so for G > 1)
    g_t = (g if every else g[tb.nonempty]).transpose(1, 0, 2)                        # (R, N_ne, K)
    # for one head a strided view, not a contiguous copy: the products below round by their operands'
    # layout (a contiguous copy moves dB's last bits at R = 3 with empty strings)
    # (one head: g_t itself, which the products take with the same bits as the broadcast's reshape of it (its
    # strides differ only on axes of length 1; tests/experiments/test_engine_rows_loops.py), without the call)
    g_ne = g_t if H == 1 else np.broadcast_to(g_t[:, None], (R, H, N_ne, K)).reshape(R * H, N_ne, K)
    gB = fw.V.transpose(0, 2, 1) @ g_ne                                               # (RH, D, K)
    U = g_ne @ B.reshape(R * H, D, K).transpose(0, 2, 1)                              # (RH, N_ne, D)
    fh = (fw.fh if every else fw.fh[tb.nonempty]).reshape(N_ne, R * H, K)
    if K == 1:  # f_hn . g_n is one product
        fg = fh[..., 0] * g_ne[..., 0].T                                              # (N_ne, RH)
    elif R * H == 1:
        fg = np.einsum("nk,nk->n", fh[:, 0], g_ne[0])[:, None]
    else:
        fg = np.empty((N_ne, R * H))
        for c in range(R * H):  # per (run, head): the summation order of the per-run path
            fg[:, c] = np.einsum("nk,nk->n", fh[:, c], g_ne[c])
    if loops is not None:  # the sparse branch's operations in its order, in one loop over the rows
        return kernels.rows_score_grad(U, fg, fw.w, loops).reshape(R, H, D), gB.reshape(R, H, D, K)
    if sparse.issparse(tb.rows):
        _, _, _, reps, _, (_, _, gather_p, rows_t_p) = _row_operators(tb)
    if sparse.issparse(tb.rows) and G > 1:  # group s's strings and runs: rows s N D .., columns its C H runs
        CH = R * H // G
        vg = gather_p(np.ascontiguousarray(U.reshape(G, CH, N_ne * D).transpose(0, 2, 1)).reshape(-1, CH))
        vg -= np.repeat(fg.reshape(N_ne, G, CH).transpose(1, 0, 2).reshape(-1, CH), reps, axis=0)
        ds = np.multiply(vg, fw.w, out=vg)
        ga = rows_t_p(ds).reshape(G, D, CH).transpose(0, 2, 1)                       # (G, CH, D)
        return ga.reshape(R, H, D), gB.reshape(R, H, D, K)
    if sparse.issparse(tb.rows):
        vg = gather_p(U.reshape(R * H, N_ne * D).T)                                   # (M, RH)
        vg -= np.repeat(fg, reps, axis=0)
        ds = np.multiply(vg, fw.w, out=vg)
        ga = rows_t_p(ds)                                                             # (D, RH)
    else:
        # dense rows (SLR, cheap): per run and head, a row's dot product and rows^T ds by BLAS, the
        # summation order of the per-run path, so that trained numbers do not move with the rounding
        ga = np.empty((D, R * H))
        for c in range(R * H):
            ds = fw.w[:, c] * (np.einsum("md,md->m", tb.rows, U[c][tb.seg]) - fg[tb.seg, c])
            ga[:, c] = tb.rows.T @ ds
    return ga.T.reshape(R, H, D), gB.reshape(R, H, D, K)


def forward(alpha: np.ndarray, B: np.ndarray, tb: Tokens) -> Forward:
    """Outputs of R runs (alpha (R, H, D), B (R, H, D, K)) on every string of ``tb``."""
    R, H, D = alpha.shape
    K = B.shape[-1]
    N = tb.size
    if tb.layout == "rows":
        return _forward_rows(alpha, B, tb, _rows_loops(tb))
    S_tab = np.asarray(tb.table @ alpha.reshape(R * H, D).T)                         # (T, RH)
    V_tab = np.asarray(tb.table @ B.transpose(2, 0, 1, 3).reshape(D, R * H * K))     # (T, RHK)
    # bag layout
    # few token types: a string's softmax shift (its largest present score) and its exponentials
    # depend only on which types it has, so they are computed once per presence pattern (2^T of them)
    # and gathered; then one (N, RH) array per type, no (N, T, RH) temporaries and no exp over N
    counts = tb.counts
    T = counts.shape[1]
    pat = _patterns(tb)                                                            # (N,) pattern
    bits = ((np.arange(1 << T)[:, None] >> np.arange(T)[None, :]) & 1).astype(bool)  # (P, T)
    topP = np.where(bits[:, :, None], S_tab[None], -np.inf).max(axis=1)            # (P, RH)
    topP[~np.isfinite(topP)] = 0.0
    exP = np.where(bits[:, :, None], np.exp(np.minimum(S_tab[None] - topP[:, None], 0.0)), 0.0)
    V = V_tab.reshape(T, R * H, K)
    if _bag_compiled(T, K):  # the same operations in the same order, in one pass: the same bits
        w, fh = kernels.bag_forward(counts, pat, exP, V[:, :, 0])
    else:
        w = np.empty((T, N, R * H))
        for t in range(T):
            np.take(exP[:, t], pat, axis=0, out=w[t])
            w[t] *= counts[:, t:t + 1]
        Z = w.sum(axis=0)
        Z[Z == 0] = 1.0
        w /= Z
        fh = np.einsum("tnc,tck->nck", w, V) if K > 1 else (w * V[:, None, :, 0]).sum(axis=0)
    fh = fh.reshape(N, R, H, K)
    # one head: f is fh itself, which is what fh.sum(axis=2) (0.0 + fh) gives here, bit for bit: every sum
    # above starts from +0, so no entry of fh is -0.0 (``_readout``'s fh can be, and adds the 0.0)
    return Forward(f=fh[:, :, 0] if H == 1 else fh.sum(axis=2), fh=fh, w=w, V=V)


def _bag_compiled(T: int, K: int) -> bool:
    """Whether the bag layout's forward pass runs as one compiled loop (``kernels.bag_forward``), whatever the
    kernel option: for two token types and one output (the exact populations: occurrence, OR and one-head AND
    in their reduced types), where numba imports and compiles (``kernels.usable``).  The loop does numpy's
    operations in numpy's order (its sums over the two types too, from +0 up), so it gives numpy's bits
    (tested, to the sign of every zero; only a NaN's sign may differ) and no result changes.  The numpy path
    makes about eight passes over (types, strings, runs) arrays, the loop one."""
    return K == 1 and T == 2 and kernels.usable()


def _risk_and_grad(alpha: np.ndarray, B: np.ndarray, tb: Tokens, loss: str):
    oh = _onehot(tb)
    if oh is not None:
        return _onehot_risk_and_grad(alpha, B, tb, loss, oh)
    if tb.layout == "rows":  # the loops' view asked once for the step (``_rows_loops``)
        loops = _rows_loops(tb)
        fw = _forward_rows(alpha, B, tb, loops)
        r, g = _risk_and_dl(fw.f, tb, loss)                            # g (N, R, K)
        ga, gB = _backward_rows(fw, B, g, tb, loops)
        return r, ga, gB, fw.f
    R, H, D = alpha.shape
    K = B.shape[-1]
    fw = forward(alpha, B, tb)
    r, g = _risk_and_dl(fw.f, tb, loss)                                # g (N, R, K)
    gh = np.broadcast_to(g[:, :, None, :], (g.shape[0], R, H, K)).reshape(-1, R * H, K)
    # per type t: dV_t = sum_n w_tn g_n and ds_t = sum_n w_tn (V_t - fh_n) . g_n.  A non-empty string's weights
    # sum to 1, so V_t - fh_n = sum_s w_sn (V_t - V_s), and an empty string has w = 0: ds_t = sum_s (V_t - V_s) .
    # M_ts with M_ts = sum_n w_tn w_sn g_n, one pass over the strings per pair of the bag's few types, and no
    # cancellation beyond the gradient's own.  (As V_t . dV_t - sum_n w_tn fh_n . g_n, two sums of size |f| |g|
    # cancelled to the gradient, it erred by 9e-12 on an alpha entry of 2.2e-6 of occurrence's d = 200
    # population at |alpha| = 20, |B| = 12: tests/experiments/test_tasks.py.)
    T = fw.w.shape[0]
    dV = np.einsum("tnc,nc->tc", fw.w, gh[..., 0])[..., None] if K == 1 else np.einsum("tnc,nck->tck", fw.w, gh)
    if K == 1 and T > 2 and g.shape[0] <= PAIRS_AT_ONCE_MAX and kernels.usable():
        # every pair's sum in one einsum (the same sums as one call a pair, bit for bit, on so few strings),
        # then the loop's differences, products and sums in its order (``kernels.type_pairs``)
        t_of, s_of = np.tril_indices(T, -1)                                         # the loop's order of pairs
        E = np.einsum("pnc,nc->pc", fw.w[t_of] * fw.w[s_of], gh[..., 0])           # (T (T - 1) / 2, RH)
        ds = kernels.type_pairs(fw.V[:, :, 0], E)
    else:
        ds = _type_pairs_loop(fw, gh, T, K)
    G_V, G_s = dV.reshape(dV.shape[0], -1), ds
    gB = np.asarray(tb.table.T @ G_V).reshape(D, R, H, K).transpose(1, 2, 0, 3)
    ga = np.asarray(tb.table.T @ G_s).reshape(D, R, H).transpose(1, 2, 0)
    return r, ga, gB, fw.f


PAIRS_AT_ONCE_MAX = 4096
"""The bag layout's score gradient takes every pair of types in one einsum on batches of at most this many
strings (even pairs' sampled batches, and the unmerged class populations of three types up to that size).  One
einsum over the stacked pairs gives each pair's sum the bits of its own call where the reduction over the strings
fits numpy's iterator buffer (8192 elements) in one piece (``tests/experiments/test_engine_rows_loops.py`` holds the two to the same
bits up to this size); on longer ones the buffering can split them differently, and the last bits move."""


def _type_pairs_loop(fw: Forward, gh: np.ndarray, T: int, K: int) -> np.ndarray:
    """The bag layout's ds (T, RH), one pair of types at a time (``_risk_and_grad``)."""
    ds = np.zeros((T, gh.shape[1]))
    for t in range(T):
        for s in range(t):
            wts = fw.w[t] * fw.w[s]                                                # (N, RH)
            if K == 1:
                part = (fw.V[t, :, 0] - fw.V[s, :, 0]) * np.einsum("nc,nc->c", wts, gh[..., 0])
            else:
                part = np.einsum("ck,ck->c", fw.V[t] - fw.V[s], np.einsum("nc,nck->ck", wts, gh))
            ds[t] += part
            ds[s] -= part
    return ds
