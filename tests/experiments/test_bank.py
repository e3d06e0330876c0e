"""The training bank's divergence rule on the validation risk: a run whose validation risk becomes NaN (its
training risk and gradients still finite) is stopped there and marked diverged, and the bank's other runs
go on."""
from __future__ import annotations

import numpy as np
import pytest

from numerics.experiments import bank
from numerics.experiments import engine
from numerics.experiments import runner


def _train(monkeypatch, poison_at: int | None):
    """Two joint-GD runs on the exact occurrence population; with ``poison_at``, the first run's validation
    risk is NaN from that evaluation on (the R0 evaluation is number 0)."""
    cfg = runner.Config.quick(tasks=("occurrence",))
    row = runner.Row.of(cfg, "occurrence")
    data = runner.make_data(row, 0)
    real, calls = engine.risk, []

    def risk(alpha, B, tokens, loss="squared", *args, **kwargs):
        out = np.array(real(alpha, B, tokens, loss, *args, **kwargs), float)
        calls.append(len(out))
        if poison_at is not None and len(calls) - 1 >= poison_at and len(out) == 2:
            out[0] = np.nan
        return out

    monkeypatch.setattr(engine, "risk", risk)
    a0, b0 = runner.initial_params(row, 0)
    programs = [bank.Program("joint", 2.0, 2.0), bank.Program("joint", 2.0, 2.0)]
    return bank.train_bank(np.repeat(a0[None], 2, 0), np.repeat(b0[None], 2, 0), programs, data.train, data.val,
                           "squared", cfg.reading), cfg.reading


def test_a_nan_validation_risk_marks_the_run_diverged(monkeypatch):
    recs, reading = _train(monkeypatch, poison_at=2)
    poisoned, healthy = recs
    assert poisoned.diverged and poisoned.failed and poisoned.final_val == float("inf")
    assert poisoned.steps == 2 * reading.eval_every  # stopped at the evaluation that gave NaN
    assert not healthy.diverged and healthy.steps > poisoned.steps
    assert np.isnan(poisoned.val_risk[-1]) and np.isfinite(healthy.val_risk).all()


def test_without_the_nan_neither_run_diverges(monkeypatch):
    recs, _ = _train(monkeypatch, poison_at=None)
    assert not any(rec.diverged for rec in recs)
    assert recs[0].steps == recs[1].steps
    assert recs[0].val_risk == pytest.approx(recs[1].val_risk)
