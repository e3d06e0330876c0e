"""A bank of runs trained together: every run has its own parameters, phases, step sizes, optimizer state
and stopping rule, and one array program (``engine.risk_and_grad``) advances all active runs by one step on
the same batch.

Each run follows its plan's phases (``protocol.phases``); a phase of length "plateau" or "rest" ends by the
plateau test of the reading: every ``eval_every`` steps the validation risk is computed; the phase (or the
run) stops when, over its last ``patience`` evaluations, the mean of the newer half is not below the mean of
the older half by ``tol * R0 / 2`` (R0 the run's starting validation risk): a decrease slower than about
``tol * R0`` per ``patience`` evaluations.  The whole run never exceeds ``max_steps`` steps.  A run whose training
or validation risk is non-finite, or whose validation risk exceeds ``divergence_factor * R0``, is stopped and
marked diverged; one that ends above its starting validation risk is marked unstable.

Recorded per run: the validation curve (at every evaluation), the distances |alpha_t - alpha_0| and
|B_t - B_0| after every step, the step at which each phase ended, and (``record=True``) parameter snapshots
at steps 0, 1, 2, 4, ... and every evaluation, for the functional lag measures.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from numerics.experiments import engine
from numerics.experiments.protocol import Reading, phases


@dataclass
class Program:
    """What one run of a bank does: its plan's phases and its learning rates per layer."""

    plan: str
    lr_out: float
    lr_att: float
    label: dict = field(default_factory=dict)


@dataclass
class RunRecord:
    """The outcome of one run of a bank."""

    program: Program
    steps: int = 0
    diverged: bool = False
    unstable: bool = False
    converged: bool = False
    capped: bool = False
    phase_ends: list = field(default_factory=list)
    val_steps: list = field(default_factory=list)
    val_risk: list = field(default_factory=list)
    alpha_dist: list = field(default_factory=list)
    B_dist: list = field(default_factory=list)
    snapshots: dict = field(default_factory=dict)
    final_alpha: np.ndarray | None = None
    final_B: np.ndarray | None = None

    @property
    def failed(self) -> bool:
        """Diverged, or ended above its starting validation risk (an unstable step size)."""
        return self.diverged or self.unstable

    @property
    def final_val(self) -> float:
        return self.val_risk[-1] if self.val_risk and not self.diverged else float("inf")


UNSTABLE_RTOL = 1e-9
"""A run that ends with its validation risk above its start (beyond this relative tolerance) is unstable:
its step size failed, like a diverged one (never chosen, and a verdict on it is refused)."""
SNAPSHOT_DENSE = 40
SNAPSHOT_RATIO = 1.04


def snapshot_steps(eval_every: int, max_steps: int) -> set[int]:
    """Steps at which ``record=True`` keeps parameters: every step up to SNAPSHOT_DENSE, then steps growing by
    the factor SNAPSHOT_RATIO (so a crossing at step t is located to about 4% of t), and every evaluation."""
    out = set(range(min(SNAPSHOT_DENSE, max_steps) + 1)) | set(range(0, max_steps + 1, eval_every))
    t = float(SNAPSHOT_DENSE)
    while t < max_steps:
        t *= SNAPSHOT_RATIO
        out.add(min(int(round(t)), max_steps))
    return out


def plateau(values: list[float], patience: int, tol: float) -> bool:
    """The plateau test on the validation risks of a phase (oldest first): over the last ``patience``
    evaluations (and the one before them), the mean of the newer half is not below the mean of the older
    part by tol / 2, so a steady decrease slower than about tol per ``patience`` evaluations.  Means of
    halves make the test robust to mini-batch noise.  Needs patience + 1 values; a non-finite value is
    never a plateau (divergence is handled separately)."""
    if len(values) < patience + 1 or patience < 2:
        return False
    h = patience // 2
    old, new = float(np.mean(values[-patience - 1:-h])), float(np.mean(values[-h:]))
    return bool(np.isfinite(old) and np.isfinite(new) and old - new < tol / 2)


class _Optimizer:
    """GD, heavy-ball momentum or Adam on one parameter block of R runs (state per run)."""

    def __init__(self, r: Reading, shape: tuple):
        self.r = r
        self.kind = r.optimizer
        if self.kind == "momentum":
            self.v = np.zeros(shape)
        elif self.kind == "adam":
            self.m = np.zeros(shape)
            self.v = np.zeros(shape)
            self.t = np.zeros(shape[0])

    def step(self, idx: np.ndarray, grad: np.ndarray, lr: np.ndarray) -> np.ndarray:
        """The update (to subtract) of the runs ``idx`` with gradients ``grad`` and rates ``lr`` (0: frozen;
        a frozen run's state does not move)."""
        on = lr > 0
        shape = (-1,) + (1,) * (grad.ndim - 1)
        lr_b = lr.reshape(shape)
        if self.kind == "gd":
            return lr_b * grad
        if self.kind == "momentum":
            v = self.v[idx]
            v = np.where(on.reshape(shape), self.r.momentum * v + grad, v)
            self.v[idx] = v
            return lr_b * v
        b1, b2 = self.r.adam_beta1, self.r.adam_beta2
        m, v, t = self.m[idx], self.v[idx], self.t[idx]
        t = np.where(on, t + 1, t)
        onb = on.reshape(shape)
        m = np.where(onb, b1 * m + (1 - b1) * grad, m)
        v = np.where(onb, b2 * v + (1 - b2) * grad * grad, v)
        self.m[idx], self.v[idx], self.t[idx] = m, v, t
        tt = np.maximum(t, 1).reshape(shape)
        mhat = m / (1 - b1 ** tt)
        vhat = v / (1 - b2 ** tt)
        return lr_b * mhat / (np.sqrt(vhat) + self.r.adam_eps)


def _in_calls(fn, alpha: np.ndarray, B: np.ndarray, runs_per_call: int | None):
    """``fn(alpha, B)`` (risks, or a tuple of per-run arrays, with the runs first) over the runs in calls of at
    most ``runs_per_call`` runs (None: one call), concatenated: the runs share the batch either way."""
    R = alpha.shape[0]
    if runs_per_call is None or R <= runs_per_call:
        return fn(alpha, B)
    parts = [fn(alpha[i:i + runs_per_call], B[i:i + runs_per_call]) for i in range(0, R, runs_per_call)]
    if isinstance(parts[0], tuple):
        return tuple(None if p[0] is None else np.concatenate(p) for p in zip(*parts))
    return np.concatenate([np.atleast_1d(p) for p in parts])


def train_bank(alpha0: np.ndarray, B0: np.ndarray, programs: list[Program], train: Callable[[int], engine.Tokens],
               val: engine.Tokens, loss: str, r: Reading, record: bool = False,
               progress: Callable[[int], None] | None = None, runs_per_call: int | None = None) -> list[RunRecord]:
    """Train the runs of ``programs`` from (alpha0, B0) (each (R, H, D) / (R, H, D, K), one start per run)
    on the batches ``train(step)``, validating on ``val``; see the module doc.  Every step draws one batch for
    all runs; ``runs_per_call`` caps the runs of one engine call (None: all active runs in one), for rows
    whose step costs more per run in a bank than alone (``runner.RUNS_PER_CALL``): 1 trains each run by
    calls of its own, so its bits are those of the run trained alone."""
    if runs_per_call is not None and runs_per_call < 1:
        raise ValueError(f"runs_per_call must be None or >= 1, got {runs_per_call!r}")
    R = len(programs)
    alpha, B = alpha0.astype(float).copy(), B0.astype(float).copy()
    recs = [RunRecord(program=p) for p in programs]
    plan_phases = [phases(p.plan, r) for p in programs]
    phase = np.zeros(R, int)
    phase_start = np.zeros(R, int)
    window: list[list[float]] = [[] for _ in range(R)]  # validation risks since the phase began

    def val_risk(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.asarray(_in_calls(lambda x, y: np.asarray(engine.risk(x, y, val, loss), float), a, b,
                                    runs_per_call), float)

    R0 = val_risk(alpha, B)
    active = np.ones(R, bool)
    opt_a, opt_b = _Optimizer(r, alpha.shape), _Optimizer(r, B.shape)
    snaps = snapshot_steps(r.eval_every, r.max_steps) if record else set()
    for i, rec in enumerate(recs):
        rec.val_steps.append(0)
        rec.val_risk.append(float(R0[i]))
        rec.alpha_dist.append(0.0)
        rec.B_dist.append(0.0)
        if record:
            rec.snapshots[0] = (alpha[i].copy(), B[i].copy())
        if not np.isfinite(R0[i]):
            rec.diverged, active[i] = True, False
    for i in range(R):
        window[i].append(float(R0[i]))

    def stale(i: int) -> bool:
        return plateau(window[i], r.patience, r.tol * R0[i])

    def block_rates(i: int) -> tuple[float, float]:
        block = plan_phases[i][phase[i]][0]
        p = programs[i]
        return (p.lr_att if block in ("att", "both") else 0.0, p.lr_out if block in ("out", "both") else 0.0)

    def advance_fixed_phases(i: int, t: int) -> None:
        """Move run i past phases of fixed length that end at step t."""
        while True:
            _, length = plan_phases[i][phase[i]]
            if isinstance(length, int) and t - phase_start[i] >= length:
                recs[i].phase_ends.append(t)
                phase[i] += 1
                phase_start[i] = t
                window[i] = [recs[i].val_risk[-1]]
                continue
            return

    for i in range(R):
        advance_fixed_phases(i, 0)
    t = 0
    while active.any() and t < r.max_steps:
        idx = np.flatnonzero(active)
        tb = train(t)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            risk, ga, gB, _ = _in_calls(lambda x, y: engine.risk_and_grad(x, y, tb, loss, with_f=False),
                                        alpha[idx], B[idx], runs_per_call)
        rates = np.array([block_rates(i) for i in idx])
        bad = ~np.isfinite(risk) | ~np.isfinite(ga).all(axis=(1, 2)) | ~np.isfinite(gB).all(axis=(1, 2, 3))
        if bad.any():  # a non-finite step is not taken: the run keeps its last parameters and is stopped below
            rates[bad], ga[bad], gB[bad] = 0.0, 0.0, 0.0
        with np.errstate(over="ignore", invalid="ignore"):
            alpha[idx] -= opt_a.step(idx, ga, rates[:, 0])
            B[idx] -= opt_b.step(idx, gB, rates[:, 1])
        t += 1
        da = np.linalg.norm((alpha[idx] - alpha0[idx]).reshape(len(idx), -1), axis=1)
        db = np.linalg.norm((B[idx] - B0[idx]).reshape(len(idx), -1), axis=1)
        for j, i in enumerate(idx):
            recs[i].alpha_dist.append(float(da[j]))
            recs[i].B_dist.append(float(db[j]))
            if bad[j]:
                recs[i].diverged, active[i] = True, False
            if record and t in snaps:
                recs[i].snapshots[t] = (alpha[i].copy(), B[i].copy())
        for i in idx:
            if active[i]:
                advance_fixed_phases(i, t)
        if progress is not None:
            progress(1)
        if t % r.eval_every and t < r.max_steps:
            continue
        idx = np.flatnonzero(active)
        if not idx.size:
            break
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            v = val_risk(alpha[idx], B[idx])
        for j, i in enumerate(idx):
            rec = recs[i]
            rec.val_steps.append(t)
            rec.val_risk.append(float(v[j]))
            if not np.isfinite(v[j]) or v[j] > r.divergence_factor * R0[i]:
                rec.diverged, active[i] = True, False
                continue
            window[i].append(float(v[j]))
            _, length = plan_phases[i][phase[i]]
            if length == "plateau" and (stale(i) or t - phase_start[i] >= r.phase2_cap):
                rec.phase_ends.append(t)
                phase[i] += 1
                phase_start[i] = t
                window[i] = [float(v[j])]
            elif length == "rest" and r.budget == "plateau" and stale(i):
                active[i] = False
    for i, rec in enumerate(recs):
        rec.steps = len(rec.alpha_dist) - 1
        last = phase[i] == len(plan_phases[i]) - 1
        rec.converged = bool(not rec.diverged and last and plan_phases[i][phase[i]][1] == "rest" and stale(i))
        rec.capped = bool(not rec.diverged and rec.steps >= r.max_steps and not rec.converged)
        rec.unstable = bool(not rec.diverged and rec.val_risk[-1] > R0[i] * (1 + UNSTABLE_RTOL))
        rec.final_alpha, rec.final_B = alpha[i].copy(), B[i].copy()
        if record:
            rec.snapshots[rec.steps] = (alpha[i].copy(), B[i].copy())
    return recs
