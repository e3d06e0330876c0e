"""Held-out risk by string length: the buckets, the conditioned sampler that fills them, and the risk of a
model that is exactly right in every bucket."""
from __future__ import annotations

import math

import numpy as np
import pytest

from numerics.experiments import runner
from numerics.experiments import tasks
from theory.validation import SettingError


def _row(task: str, **kw) -> runner.Row:
    return runner.Row.of(runner.Config.quick(tasks=(task,), jobs=1, **kw), task)


@pytest.mark.parametrize("task", tasks.TASKS)
def test_buckets_tile_the_lengths_up_to_twenty_means(task):
    """The buckets start at the task's shortest string, follow one another without gap or overlap, and end
    at the last multiple (20) of the mean length, each edge at or above its multiple of the mean."""
    row = _row(task)
    m = tasks.mean_length(task, row.d)
    b = runner.length_buckets(row)
    assert b[0][0] == tasks.shortest_length(task)
    assert all(hi == lo2 for (_, hi), (lo2, _) in zip(b, b[1:]))
    assert all(lo < hi for lo, hi in b)
    assert len(b) == len(row.config.length_multiples)
    assert all(m * f <= hi < m * f + 1 for (_, hi), f in zip(b, row.config.length_multiples))


@pytest.mark.parametrize("task", tasks.TASKS)
def test_conditioned_sampler_draws_the_law_inside_the_bucket(task):
    """Every string drawn for [lo, hi) has its length there, and the lengths' mean is the mean of the
    task's law conditioned on the bucket (within 4 standard errors)."""
    d, lo, hi, N = 10, 30, 90, 3000
    b = tasks.sample_lengths_in(task, d, N, np.random.default_rng(4), lo, hi, even_pairs_embedding="ends")
    n = np.asarray(b.extra["n"])
    assert n.shape == (N,) and n.min() >= lo and n.max() < hi
    p = tasks.length_parameter(task, d)
    k = np.arange(lo, hi)
    w = (1 - p) ** (k - lo)
    mean, var = (w * k).sum() / w.sum(), (w * k * k).sum() / w.sum() - ((w * k).sum() / w.sum()) ** 2
    assert abs(n.mean() - mean) < 4 * math.sqrt(var / N)
    if task == "even_pairs":  # one token per symbol, whatever the length
        b = tasks.sample_lengths_in(task, d, 200, np.random.default_rng(5), lo, hi, even_pairs_embedding="ends")
        assert b.m.sum(axis=1).tolist() == b.extra["n"].tolist()
    with pytest.raises(SettingError, match="length range"):
        tasks.sample_lengths_in(task, d, 5, np.random.default_rng(0), hi, lo)


def test_exactly_right_model_has_no_risk_in_any_bucket():
    """Occurrence: attention s = 40 on a and readout +1 on a, -1 elsewhere is right on every string up to
    rounding (f = -1 without a, 1 - O(n e^-40) with it), so its risk is about 0 in every bucket, lengths
    up to 20 means included; the zero model's is 1/2 in each."""
    row = _row("occurrence")
    d = row.d
    alpha = np.zeros((1, d))
    alpha[0, 0] = 40.0
    B = -np.ones((1, d, 1))
    B[0, 0, 0] = 1.0
    right, zero = runner.length_risk(row, 0, [(alpha, B), (np.zeros((1, d)), np.zeros((1, d, 1)))])
    assert [(x["lo"], x["hi"]) for x in right] == runner.length_buckets(row)
    assert all(x["risk"] < 1e-25 and x["acc"] == 1.0 for x in right)
    assert all(x["risk"] == pytest.approx(0.5, abs=1e-12) for x in zero)


def test_report_seed_records_length_risk_and_the_row_summarises_it():
    """Each plan's seed record holds its bucket risks, and ``length_summary`` gives per bucket the mean over
    seeds and the strings per bucket."""
    row = _row("even_pairs", even_pairs_embedding="query", length_test_size=64)
    chosen = {"three_phase": {"out": 8.0, "att": 8.0}, "joint": {"out": 8.0}, "output_only": {"out": 8.0},
              "attention_only": {"att": 8.0}}
    recs = [runner.report_seed(row, s, chosen) for s in (0, 1)]
    for plan in runner.PLANS:
        per_seed = [r[plan] for r in recs]
        summary = runner.length_summary(row, per_seed)
        assert [(x["lo"], x["hi"]) for x in summary] == runner.length_buckets(row)
        for k, x in enumerate(summary):
            vals = [r["length_risk"][k]["risk"] for r in per_seed]
            assert x["n"] == 64 and x["risk"]["values"] == vals
            if None not in vals:
                assert x["risk"]["mean"] == pytest.approx(np.mean(vals), rel=1e-12)
