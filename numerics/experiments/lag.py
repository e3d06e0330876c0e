"""Does attention learning lag output learning?  Three measures on a training trajectory.

* **displacement** (the suite's first measure): r_P(t) = |P_t - P_0| / |P_end - P_0| for P = attention alpha or
  output B, and t_half(P) = the first step with r_P >= 1/2;
* **function** (which block the risk reduction depends on over time): on held-out data, each block's progress
  is measured inside the final model: gain_att(t) = R(alpha_0, B_end) - R(alpha_t, B_end), the part of the
  final model's risk reduction that the attention has learned by step t, and gain_out(t) = R(alpha_end, B_0) -
  R(alpha_end, B_t), the part the readout has learned (the final model with one block reset to its start, or
  taken from step t); each is normalised by its value at the end, and t_half is where it first reaches 1/2.
  (Resetting a block of the *current* model instead is degenerate from a zero start: with B_0 = 0 every
  output-reset model has f = 0, so the readout's "gain" would be the whole risk reduction.)
* **alignment** with the task's ground-truth directions (where the task has them): the attention's and the
  readout's component along the directions a solution uses (``alignment``), normalised and timed the same way.

For each measure the lag ratio is t_half(attention) / t_half(output); attention lags output when the ratio is
above 1 (see ``verdicts``).  A measure whose attention or output curve never moves (or ends where it started)
has no t_half: the ratio is undefined there.
"""
from __future__ import annotations

import numpy as np

from numerics.experiments import engine
from numerics.experiments.population import marked_symbols


def relative_progress(values) -> np.ndarray:
    """(m_t - m_0) / (m_end - m_0) (all zeros when the measure ends where it started)."""
    v = np.asarray(values, float)
    span = v[-1] - v[0]
    return (v - v[0]) / span if span != 0 and np.isfinite(span) else np.zeros_like(v)


def t_half(steps, values) -> int | None:
    """The first recorded step at which the relative progress of ``values`` reaches 1/2 (None: no progress)."""
    return crossing(steps, values)[0]


def crossing(steps, values) -> tuple[int | None, int]:
    """(t_half, its resolution): the first recorded step with relative progress >= 1/2 and the distance to the
    recorded step before it (the crossing lies in between)."""
    r = relative_progress(values)
    if not r.any():
        return None, 0
    i = int(np.argmax(r >= 0.5))
    s = np.asarray(steps)
    return int(s[i]), int(s[i] - s[i - 1]) if i > 0 else 0


def functional_curves(snapshots: dict, steps: list[int], test: engine.Tokens, loss: str) -> dict:
    """On ``test`` at the snapshot ``steps`` (the last one the end of the run): R(alpha_t, B_t), the final
    model with its attention from step t, R(alpha_t, B_end), and with its readout from step t,
    R(alpha_end, B_t); and the gains of each block (see module doc)."""
    aT, bT = snapshots[steps[-1]]
    n = len(steps)

    def model(i):  # the i-th of the 3n models: (alpha_t, B_t), (alpha_t, B_end), (alpha_end, B_t)
        part, s = divmod(i, n)
        a, b = snapshots[steps[s]]
        return (aT if part == 2 else a), (bT if part == 1 else b)

    # 16 models at a time, stacked when evaluated: at d = 200 ICL's 3n readouts would hold 0.8 GB at once
    risks = []
    for i in range(0, 3 * n, 16):
        chunk = [model(j) for j in range(i, min(i + 16, 3 * n))]
        risks.append(engine.risk(np.stack([a for a, _ in chunk]), np.stack([b for _, b in chunk]), test, loss))
    risks = np.concatenate(risks)
    full, att_t, out_t = risks[:n], risks[n:2 * n], risks[2 * n:]
    return {"steps": list(steps), "risk": full.tolist(), "risk_attention_at_t": att_t.tolist(),
            "risk_output_at_t": out_t.tolist(), "gain_att": _gain(att_t).tolist(), "gain_out": _gain(out_t).tolist()}


GAIN_EPS = 4
"""A gain of at most GAIN_EPS machine epsilons times the larger of the two risks it subtracts (4 to 8 units in
the last place) is 0: the same model evaluated in another column of a stacked evaluation can come out one unit
apart (numpy's vectorised loops), and a block that never moved must show no gain and no t_half."""


def _gain(risks: np.ndarray) -> np.ndarray:
    """risks[0] - risks, with differences of at most ``GAIN_EPS`` eps times the larger risk set to 0."""
    g = risks[0] - risks
    noise = GAIN_EPS * np.finfo(float).eps * np.maximum(np.abs(risks[0]), np.abs(risks))
    return np.where(np.abs(g) <= noise, 0.0, g)


def alignment(task: str, d: int, alpha: np.ndarray, B: np.ndarray, extra: dict | None = None) -> tuple | None:
    """(attention alignment, output alignment) of parameters alpha (H, D), B (H, D, K) with the task's
    ground-truth directions, or None where the task has none stated here.

    occurrence / OR: the score and the readout of the marked symbols minus those of the unmarked ones (mean
    over marked symbols); AND: none (its solutions need a three-level ranking of the symbols in one head and
    a readout that is not a marked-versus-unmarked gap, ``capacity``, so no single direction is stated);
    ICL: the score of the previous-token-is-trigger coordinate minus the mean of the other previous-token
    coordinates, and the readout's diagonal (token z read out as answer z) minus its off-diagonal mean;
    SLR: cos(alpha, k*) and cos(beta, v*) (summed over heads).
    """
    alpha = np.asarray(alpha, float)
    B = np.asarray(B, float)
    if task in ("occurrence", "OR"):
        k = marked_symbols(task)
        a_gap = alpha[:, :k] - alpha[:, k:].mean(axis=1, keepdims=True)
        b_gap = B[:, :k, 0] - B[:, k:, 0].mean(axis=1, keepdims=True)
        return float(a_gap.mean(axis=1).sum()), float(b_gap.mean(axis=1).sum())
    if task == "ICL":
        prev = alpha[:, d:]
        a = prev[:, 0] - prev[:, 1:].mean(axis=1)
        top = B[:, :d, :]
        diag = np.einsum("hii->h", top) / d
        off = (top.sum(axis=(1, 2)) - diag * d) / (d * d - d)
        return float(a.sum()), float((diag - off).sum())
    if task == "SLR" and extra is not None:
        k, v = extra["k"], extra["v"]

        def cos(x, y):
            nx = np.linalg.norm(x)
            return float(x @ y / nx) if nx > 0 else 0.0
        return (sum(cos(alpha[h], k) for h in range(alpha.shape[0])),
                sum(cos(B[h, :, 0], v) for h in range(B.shape[0])))
    return None


def alignment_curves(task: str, d: int, snapshots: dict, steps: list[int], extra: dict | None = None) -> dict | None:
    """The two alignments at the snapshot steps (None where the task has no stated ground truth)."""
    vals = [alignment(task, d, *snapshots[s], extra) for s in steps]
    if vals[0] is None:
        return None
    return {"steps": list(steps), "att": [v[0] for v in vals], "out": [v[1] for v in vals]}


def measures(steps: list[int], alpha_dist: list, B_dist: list, func: dict, align: dict | None) -> dict:
    """t_half of attention and output under each measure, and their ratio."""
    out = {}
    all_steps = list(range(len(alpha_dist)))
    pairs = {"displacement": (all_steps, alpha_dist, all_steps, B_dist),
             "function": (func["steps"], func["gain_att"], func["steps"], func["gain_out"])}
    if align is not None:
        pairs["alignment"] = (align["steps"], align["att"], align["steps"], align["out"])
    for name, (sa, va, sb, vb) in pairs.items():
        (ta, ra), (tb, rb) = crossing(sa, va), crossing(sb, vb)
        out[name] = {"t_half_att": ta, "t_half_out": tb, "resolution": max(ra, rb),
                     "ratio": (ta / tb) if (ta is not None and tb) else None}
    return out


# ------------------------------------------------------------------------------------------------
# attribution: each block's first-order share of the risk decrease along the path


def attribution(risks, att_parts, out_parts) -> dict:
    """The risk decrease R_0 - R_T of a path split into the blocks' first-order parts.

    ``risks`` holds R(theta_t) for t = 0..T; ``att_parts[t]`` = -grad_alpha R(theta_t) . (alpha_{t+1} - alpha_t)
    and ``out_parts[t]`` the same for the readout B (t = 0..T-1).  Returns the total decrease, the two parts
    (sums of the per-step parts), the remainder (total minus both parts: the higher-order terms of every step,
    a correctly rounded sum of the exact terms, ``math.fsum``), each block's share of the total, t_half of each
    block's cumulative part (the first step t at which the sum of its first t per-step parts reaches half of its
    whole part; None when the part is not positive: a block that did not lower the risk has no half time) and
    their ratio t_half(attention) / t_half(readout).

    The per-step part is the directional derivative of R along the block's own move, so it depends on the path
    and the risk alone: an invertible linear reparameterisation of a block (alpha = A phi) maps the gradient to
    A^T grad and the move to A^-1 move, and leaves every per-step part, hence the shares and half times, as they
    are; and a step the run adds after it has converged adds at most the decrease still left to both parts.
    """
    import math

    r = np.asarray(risks, float)
    a = np.asarray(att_parts, float)
    o = np.asarray(out_parts, float)
    if r.ndim != 1 or a.shape != o.shape or len(r) != len(a) + 1:
        raise ValueError(f"risks must hold one value more than the per-step parts; got {r.shape}, {a.shape}, {o.shape}")
    total = float(r[0] - r[-1])
    att, out = math.fsum(a), math.fsum(o)
    remainder = math.fsum([float(r[0]), -float(r[-1]), *(-a), *(-o)])
    steps = list(range(len(r)))

    def half(parts, whole):
        if not whole > 0:
            return None
        return t_half(steps, np.concatenate([[0.0], np.cumsum(parts)]))

    ta, to = half(a, att), half(o, out)
    share = (lambda x: x / total) if total != 0 else (lambda x: None)
    return {"total": total, "att": att, "out": out, "remainder": remainder, "share_att": share(att),
            "share_out": share(out), "t_half_att": ta, "t_half_out": to, "resolution": 0,
            "ratio": (ta / to) if (ta is not None and to) else None}


def path_attribution(path, risk_and_grad) -> dict:
    """``attribution`` along a recorded path [(alpha_0, B_0), ..., (alpha_T, B_T)] (every step of it: the parts
    are first order per step, so a path of snapshots further apart attributes coarser steps), with
    ``risk_and_grad(alpha, B) -> (R, grad_alpha, grad_B)`` the risk whose decrease is split."""
    risks, att, out = [], [], []
    for t, (alpha, B) in enumerate(path):
        r, ga, gB = risk_and_grad(alpha, B)
        risks.append(float(r))
        if t + 1 < len(path):
            a1, B1 = path[t + 1]
            att.append(-float(np.vdot(ga, np.asarray(a1) - alpha)))
            out.append(-float(np.vdot(gB, np.asarray(B1) - B)))
    return attribution(risks, att, out)


def gd_attribution(alpha0: np.ndarray, B0: np.ndarray, lr_att: float, lr_out: float, steps: int, train, val,
                   loss: str) -> dict:
    """``attribution`` of ``steps`` steps of joint GD from (alpha0, B0) (one run: (H, D), (H, D, K)) with rates
    (lr_att, lr_out) on the batches ``train(t)``, the risk being the one on ``val``: every step's parts from
    the gradient of the validation risk at that step and the step actually taken (exact per step, no
    snapshots).  Where ``train(t)`` is ``val`` itself (an exact population) one gradient serves both."""
    alpha, B = alpha0[None].astype(float), B0[None].astype(float)
    risks, att, out = [], [], []
    for t in range(steps + 1):
        rv, gva, gvB, _ = engine.risk_and_grad(alpha, B, val, loss, with_f=False)
        risks.append(float(rv[0]))
        if t == steps:
            break
        tb = train(t)
        if tb is val:
            ga, gB = gva, gvB
        else:
            _, ga, gB, _ = engine.risk_and_grad(alpha, B, tb, loss, with_f=False)
        da, dB = -lr_att * ga, -lr_out * gB
        att.append(-float(np.vdot(gva, da)))
        out.append(-float(np.vdot(gvB, dB)))
        alpha = alpha + da
        B = B + dB
    return attribution(risks, att, out)
