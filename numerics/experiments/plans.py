"""Training plans of Table 1 on the model family, and the gap metric of joint GD.

Every plan has the same budget of T + 2 gradient steps:

* ``three_phase``: one output step (eta_1), one attention step (eta_2), then T output steps (eta_3);
* ``joint``: T + 2 steps on both layers (attention step eta_alpha, output step eta_B);
* ``output_only``: T + 2 output steps; ``attention_only``: T + 2 attention steps.

The step-size rule (``step_grid``): every output step size of every plan (eta_1, eta_3, eta_B) ranges over
one grid and every attention step size (eta_2, eta_alpha) over another, both multiples of 1 / lambda_B with
lambda_B the output-layer curvature at the start; each plan takes the point of its grid with the least
validation risk after its T + 2 steps.  Gradients come
from a :class:`Source`: the exact population (one weighted batch) or a seeded mini-batch sampler with fixed
validation and test sets.

Gap metric: under joint GD, r_P(t) = |P_t - P_0| / |P_{T+2} - P_0| (Frobenius norms of the parameter block P,
attention alpha or output B) and t_half(P) = the first step with r_P >= 1/2.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from numerics.model import Model, Params, loss_terms
from theory.validation import SettingError

from .tasks import Batch

PLANS = ("three_phase", "joint", "output_only", "attention_only")
"""Plan names, in the order of the table."""

STEP_SIZES = {"three_phase": ("eta_1", "eta_2", "eta_3"), "joint": ("eta_B", "eta_alpha"),
              "output_only": ("eta_B",), "attention_only": ("eta_alpha",)}
"""The step sizes of each plan (each ranges over the grid of ``step_grid``)."""


def schedule(plan: str, T: int, etas: dict) -> list[tuple[float, float]]:
    """Per step (attention step size, output step size) of the plan: T + 2 steps in all."""
    if plan == "three_phase":
        return [(0.0, etas["eta_1"]), (etas["eta_2"], 0.0)] + [(0.0, etas["eta_3"])] * T
    if plan == "joint":
        return [(etas["eta_alpha"], etas["eta_B"])] * (T + 2)
    if plan == "output_only":
        return [(0.0, etas["eta_B"])] * (T + 2)
    if plan == "attention_only":
        return [(etas["eta_alpha"], 0.0)] * (T + 2)
    raise ValueError(f"unknown plan {plan!r}")


KIND = {"eta_1": "B", "eta_2": "alpha", "eta_3": "B", "eta_B": "B", "eta_alpha": "alpha"}
"""Which layer each step size moves: output (B) or attention (alpha)."""


JOINT_STEPS = ("separate", "shared")
"""Joint GD's step sizes: eta_B and eta_alpha searched on their own grids (the default), or one shared step
eta_B = eta_alpha searched over both grids together (the variant, as in the main job's joint plan)."""


def grid_points(plan: str, grid: dict, joint_steps: str = "separate") -> list[dict]:
    """Every assignment of grid values to the plan's step sizes (``grid`` maps "B" and "alpha" to values);
    under ``joint_steps="shared"`` joint GD takes one step size for both layers."""
    if joint_steps not in JOINT_STEPS:
        raise SettingError(f"joint_steps must be one of {', '.join(JOINT_STEPS)}, got {joint_steps!r}")
    if plan == "joint" and joint_steps == "shared":
        return [{"eta_B": v, "eta_alpha": v} for v in sorted(set(grid["B"]) | set(grid["alpha"]))]
    names = STEP_SIZES[plan]
    return [dict(zip(names, vals)) for vals in itertools.product(*(grid[KIND[n]] for n in names))]


def output_curvature(batch: Batch, loss: str = "squared") -> float:
    """Largest eigenvalue lambda_B of E[xbar xbar^T] (xbar = the uniform-attention mean token), the
    curvature of the squared risk in each output column at alpha = 0: the scale of the step-size grid.
    Under cross-entropy over K classes the loss's Hessian in f at the zero start is (I - 11^T/K)/K, whose
    largest eigenvalue is 1/K: the curvature is lambda_B / K."""
    m = np.asarray(batch.m, float)
    if batch.X.ndim == 2:
        xbar = (m @ batch.X) / np.maximum(m.sum(axis=1), 1e-300)[:, None]
    else:
        xbar = np.einsum("nl,nld->nd", m, batch.X) / np.maximum(m.sum(axis=1), 1e-300)[:, None]
    w = np.full(len(xbar), 1.0 / len(xbar)) if batch.weights is None else batch.weights
    lam = float(np.linalg.eigvalsh((xbar * w[:, None]).T @ xbar)[-1])
    return lam / np.asarray(batch.y).shape[1] if loss == "cross_entropy" else lam


def step_grid(lam: float, factors_B=(1 / 16, 1 / 4, 1.0), factors_alpha=(1.0, 8.0, 64.0)) -> dict:
    """The stated step-size rule: output step sizes in factors_B / lambda_B (at most 1 / lambda_B, below the
    stability limit 2 / lambda_B of the start), attention step sizes in factors_alpha / lambda_B (a wider,
    larger range: the attention gradient starts at 0 and has no curvature scale there)."""
    return {"B": [f / lam for f in factors_B], "alpha": [f / lam for f in factors_alpha]}


@dataclass
class Source:
    """Where gradients and evaluations come from: ``train(step)`` -> the batch of that step; fixed
    ``val`` (step-size selection) and ``test`` (reported) batches."""

    train: Callable[[int], Batch]
    val: Batch
    test: Batch
    exact: bool = False


def targets(batch: Batch, loss: str):
    """What the loss compares f with: the class labels under cross-entropy, the target vectors y otherwise."""
    if loss == "cross_entropy":
        if batch.labels is None:
            raise SettingError("the cross-entropy loss needs class labels; this task has none")
        return batch.labels
    return batch.y


def evaluate(model: Model, params: Params, batch: Batch, loss: str = "squared") -> tuple[float, float | None]:
    """(risk, accuracy) on a batch; accuracy: sign(f) (f = 0 counts as -1) for +-1 labels, argmax for
    class labels, None for regression (no labels)."""
    f, _ = model.forward(params, batch.X, batch.m)
    lv, _ = loss_terms(loss, f, targets(batch, loss))
    w = np.full(batch.size, 1.0 / batch.size) if batch.weights is None else batch.weights
    risk = float((w * lv).sum())
    if batch.labels is None:
        return risk, None
    pred = np.argmax(f, axis=1) if f.shape[1] > 1 else np.where(f[:, 0] > 0, 1, -1)
    return risk, float((w * (pred == batch.labels)).sum())


@dataclass
class Run:
    """One plan run: distances of alpha and B from their start after each step (index 0 = start),
    parameters at the snapshot steps, and the final validation risk."""

    alpha_dist: list = field(default_factory=list)
    B_dist: list = field(default_factory=list)
    snapshots: dict = field(default_factory=dict)
    val_risk: float = float("inf")
    diverged: bool = False


def run_plan(model: Model, params0: Params, steps: list[tuple[float, float]], source: Source,
             loss: str = "squared", snapshot_steps=(), progress: Callable[[], None] | None = None) -> Run:
    """Gradient descent along ``steps`` from ``params0``; a run whose risk becomes non-finite stops and is
    marked diverged (validation risk +inf, so the step-size rule never picks it)."""
    p = params0.copy()
    run = Run(alpha_dist=[0.0], B_dist=[0.0])
    snaps = set(snapshot_steps)
    if 0 in snaps:
        run.snapshots[0] = p.copy()
    for t, (ea, eb) in enumerate(steps):
        b = source.train(t)
        with np.errstate(over="ignore", invalid="ignore"):
            r, g, _ = model.risk_and_grad(p, b.X, targets(b, loss), b.m, loss=loss, weights=b.weights)
        if not np.isfinite(r) or not (np.isfinite(g.alpha).all() and np.isfinite(g.B).all()):
            run.diverged = True
            return run
        p.alpha = p.alpha - ea * g.alpha
        p.B = p.B - eb * g.B
        run.alpha_dist.append(float(np.linalg.norm(p.alpha - params0.alpha)))
        run.B_dist.append(float(np.linalg.norm(p.B - params0.B)))
        if t + 1 in snaps:
            run.snapshots[t + 1] = p.copy()
        if progress is not None:
            progress()
    with np.errstate(over="ignore", invalid="ignore"):
        vr, _ = evaluate(model, p, source.val, loss)
    run.val_risk = vr if np.isfinite(vr) else float("inf")
    run.diverged = not np.isfinite(vr)
    run.snapshots[len(steps)] = p
    return run


def relative_progress(dist: list) -> np.ndarray:
    """r_P(t) = |P_t - P_0| / |P_T - P_0| (all zeros when P never moves)."""
    dist = np.asarray(dist, float)
    return dist / dist[-1] if dist[-1] > 0 else np.zeros_like(dist)


def t_half(dist: list) -> int | None:
    """First step with r_P >= 1/2 (None when P never moves)."""
    r = relative_progress(dist)
    if not r.any():
        return None
    return int(np.argmax(r >= 0.5))
