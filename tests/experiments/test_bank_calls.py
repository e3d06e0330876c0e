"""Which rows the runner banks: ``runner.RUNS_PER_CALL`` is the decision (a table with its reason, measured on
docs/benchmarks_engine.md, "Banks"), and ``bank.train_bank`` holds it: the runs of an unbanked row take engine
calls of their own on the batch they share, and each gets the bits of the run trained alone."""
from __future__ import annotations

import numpy as np
import pytest

from numerics.experiments import bank
from numerics.experiments import engine
from numerics.experiments import runner
from numerics.experiments import tasks


def test_the_runner_caps_icl_banks_by_d_and_banks_every_other_row_whole():
    """ICL's banks of 16 cost more than their runs one call each from d = 25 on, its banks of 4 above d = 50:
    no cap up to d = 16, 4 runs a call up to d = 50, one above; every other row is banked whole."""
    assert [runner.runs_per_call_at("ICL", d) for d in (3, 16, 17, 25, 50, 51, 100, 200, 400)] == [
        None, None, 4, 4, 4, 1, 1, 1, 1]
    for task in tasks.TASKS:
        if task != "ICL":
            assert all(runner.runs_per_call_at(task, d) is None for d in (5, 25, 50, 100, 200))
    cfg = runner.Config.quick(d=200)
    assert {r.task: runner.runs_per_call(r) for r in runner.rows(cfg)} == {
        t: (1 if t == "ICL" else None) for t in tasks.TASKS}


def _icl_bank(monkeypatch, runs_per_call, programs, sizes=None):
    cfg = runner.Config.quick(tasks=("ICL",), d=5, reading=runner.Config.quick().reading.with_(max_steps=30))
    row = runner.Row.of(cfg, "ICL")
    data = runner.make_data(row, 0)
    if sizes is not None:
        for name in ("risk_and_grad", "risk"):
            real = getattr(engine, name)

            def spy(alpha, *args, _real=real, **kwargs):
                sizes.append(alpha.shape[0])
                return _real(alpha, *args, **kwargs)
            monkeypatch.setattr(engine, name, spy)
    a0, b0 = runner.initial_params(row, 0)
    R = len(programs)
    return bank.train_bank(np.repeat(a0[None], R, 0), np.repeat(b0[None], R, 0), programs, data.train, data.val,
                           row.loss, cfg.reading, runs_per_call=runs_per_call)


PROGRAMS = [bank.Program("joint", 0.5, 0.5), bank.Program("output_only", 0.3, 0.0),
            bank.Program("joint", 2.0, 2.0)]


@pytest.mark.parametrize("cap, largest", [(1, 1), (2, 2), (None, 3)])
def test_no_engine_call_takes_more_runs_than_the_cap(monkeypatch, cap, largest):
    sizes: list = []
    _icl_bank(monkeypatch, cap, PROGRAMS, sizes)
    assert sizes and max(sizes) == largest


def test_an_unbanked_run_has_the_bits_of_the_run_alone(monkeypatch):
    """Each run of a bank of three, stepped one call each, ends with the parameters, curve and steps of the
    same run trained alone (whatever runs share its bank)."""
    together = _icl_bank(monkeypatch, 1, PROGRAMS)
    for i, p in enumerate(PROGRAMS):
        alone = _icl_bank(monkeypatch, 1, [p])[0]
        got = together[i]
        assert got.steps == alone.steps and got.val_risk == alone.val_risk and got.alpha_dist == alone.alpha_dist
        assert np.array_equal(got.final_alpha, alone.final_alpha) and np.array_equal(got.final_B, alone.final_B)


def test_the_runner_hands_the_bank_its_rows_cap(monkeypatch):
    """``runner._train`` passes ``runs_per_call(row)`` to the bank (the table set here at every d)."""
    import math

    monkeypatch.setattr(runner, "RUNS_PER_CALL", {"ICL": ((math.inf, 1),)})
    seen = []
    real = bank.train_bank

    def spy(*args, **kwargs):
        seen.append(kwargs.get("runs_per_call"))
        return real(*args, **kwargs)
    monkeypatch.setattr(bank, "train_bank", spy)
    cfg = runner.Config.quick(d=5, reading=runner.Config.quick().reading.with_(max_steps=12))
    for task, cap in (("ICL", 1), ("SLR", None)):
        seen.clear()
        runner._train(runner.Row.of(cfg, task), 0, [bank.Program("joint", 0.1, 0.1)])
        assert seen == [cap]


def test_calls_of_runs_concatenate_every_per_run_array():
    """``_in_calls`` on a tuple with a None part (no outputs) and on risks alone: the pieces in run order."""
    a, B = np.arange(5.0)[:, None], np.zeros((5, 2))

    def fn(x, y):
        return x[:, 0] * 2, y + x, None
    r, yb, none = bank._in_calls(fn, a, B, 2)
    assert np.array_equal(r, np.arange(5.0) * 2) and np.array_equal(yb, B + a) and none is None
    assert np.array_equal(bank._in_calls(lambda x, y: x[:, 0], a, B, 3), np.arange(5.0))
    with pytest.raises(ValueError):
        bank.train_bank(np.zeros((1, 1, 2)), np.zeros((1, 1, 2, 1)), [PROGRAMS[0]], None, None, "squared",
                        runner.Config.quick().reading, runs_per_call=0)
