"""The model class a Table 1 row tests its claims in: the attention-only plan's fixed readout on AND, the
even-pairs embedding under which no single token carries the label, and what the row records of both."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from numerics.experiments import capacity
from numerics.experiments import runner
from numerics.experiments import tasks
from numerics.model import Model, Params
from theory.validation import SettingError

AO_RATE = {"att": 4.0}
"""An attention step size the quick search chooses for one-head AND at d = 8 under the fixed readout."""


def _and_row(readout: str, heads: int = 1, **kw) -> runner.Row:
    cfg = runner.Config.quick(tasks=("AND",), and_heads=(heads,), attention_only_readout=readout, jobs=1, **kw)
    return runner.Row.of(cfg, "AND", heads)


def test_fixed_readout_lets_attention_only_leave_the_half_level_on_and():
    """On one-head AND (d = 8, exact population) attention-only with the fixed readout ends well below the
    risk 1/2 that the zero readout pins it to; with the "small" readout it stays at 1/2."""
    fixed = runner.report_seed(_and_row("fixed"), 0, {"attention_only": AO_RATE})["attention_only"]
    assert fixed["test_risk"] < 0.45 and fixed["test_acc"] > 0.6
    small = runner.report_seed(_and_row("small"), 0, {"attention_only": AO_RATE})["attention_only"]
    assert small["test_risk"] >= 0.49


def test_fixed_readout_never_moves_and_other_plans_are_untouched():
    """The attention-only run keeps the fixed readout bit for bit at every recorded step while its attention
    moves; the other plans' runs are the same bits under either readout setting."""
    chosen = {"attention_only": AO_RATE, "joint": {"out": 0.5}, "output_only": {"out": 0.5}}
    row = _and_row("fixed", heads=2, attention_only_readout_scale=0.7)
    recs, _ = runner._train(row, 0, [runner._program(p, r, {}) for p, r in chosen.items()], record=True)
    ao = recs[0]
    B0 = runner.attention_only_readout(row)
    assert np.array_equal(np.unique(B0), [-0.35, 0.35])  # scale / H, + on a and b, - elsewhere
    assert all(np.array_equal(B, B0) for _, B in ao.snapshots.values())
    assert ao.alpha_dist[-1] > 0.1
    small, _ = runner._train(_and_row("small", heads=2), 0, [runner._program(p, r, {}) for p, r in chosen.items()],
                             record=True)
    for a, b in zip(recs[1:], small[1:]):
        assert np.array_equal(a.final_alpha, b.final_alpha) and np.array_equal(a.final_B, b.final_B)
    assert not np.array_equal(ao.final_B, small[0].final_B)


def test_row_records_its_model_class():
    cfg = runner.Config.quick(tasks=("AND", "even_pairs", "OR"), and_heads=(2, 1), jobs=1)
    got = {r.name: runner.model_class(r) for r in runner.rows(cfg)}
    assert got["AND (H=1)"] == {"attention_only_readout": "fixed", "attention_only_readout_scale": 1.0,
                                "even_pairs_embedding": None, "label_in_single_token": None}
    assert got["OR"]["attention_only_readout"] == "small" and got["OR"]["attention_only_readout_scale"] == 0.0
    assert got["even_pairs"]["even_pairs_embedding"] == "ends"
    assert got["even_pairs"]["label_in_single_token"] is False
    small = runner.Config.quick(tasks=("AND", "even_pairs"), attention_only_readout="small",
                                even_pairs_embedding="query", jobs=1)
    got = {r.name: runner.model_class(r) for r in runner.rows(small)}
    assert got["AND (H=2)"]["attention_only_readout_scale"] == small.init_scale
    assert got["AND (H=1)"]["attention_only_readout_scale"] == 0.0
    assert got["even_pairs"]["label_in_single_token"] is True
    with pytest.raises(SettingError, match="attention_only_readout"):
        runner.Config.build(attention_only_readout="large")
    with pytest.raises(SettingError, match="attention_only_readout_scale"):
        runner.Config.build(attention_only_readout_scale=0.0)


def test_label_in_single_token_by_enumeration():
    """The first token carries the label under "query"; under "ends" (and "adjacent") no single token does."""
    assert tasks.label_in_single_token("query") is True
    assert tasks.label_in_single_token("ends") is False
    assert tasks.label_in_single_token("adjacent") is False


def test_label_and_token_types_against_brute_force():
    """Every string of length 1 to 7: the label counts the ab and ba pairs, and the sampler's token counts
    are the counts of ``even_pairs_token_types`` (checked on sampled strings) for each embedding."""
    for n in range(1, 8):
        for z in itertools.product((0, 1), repeat=n):
            pairs = sum(1 for i in range(n - 1) if z[i] != z[i + 1])
            assert tasks.even_pairs_label(z) == (1 if pairs % 2 == 0 else -1)
            ends = tasks.even_pairs_token_types(z, "ends")
            assert [t for t in ends if t >= 4] == ([6 + z[0]] if n == 1 else [4 + z[0]])
            assert sorted(t for t in ends if t in (2, 3, 6, 7)) == [(6 if n == 1 else 2) + z[-1]]
    for emb in tasks.EVEN_PAIRS_EMBEDDINGS:
        b = tasks.sample_even_pairs(400, np.random.default_rng(3), return_strings=True, embedding=emb)
        for s, counts, y in zip(b.extra["strings"], b.m, b.labels):
            assert np.array_equal(np.bincount(tasks.even_pairs_token_types(s, emb), minlength=b.m.shape[1]), counts)
            assert tasks.even_pairs_label(s) == y


def test_ends_construction_risk_is_the_models_and_vanishes():
    """The two-head construction's closed-form risk equals the model's risk summed over every string up to
    length 12, and falls to 0 as its scale grows; one head is bounded below by (1 - p) / 8."""
    p = tasks.length_parameter("even_pairs", 2)
    alpha, B = capacity.even_pairs_ends_construction(3.0)
    model = Model(2, 8, 1)
    total = 0.0
    for n in range(1, 13):
        for z in itertools.product((0, 1), repeat=n):
            c = np.bincount(tasks.even_pairs_token_types(z, "ends"), minlength=8)[None].astype(float)
            f = model.forward(Params(alpha, B), np.eye(8), c)[0][0, 0]
            total += p * (1 - p) ** (n - 1) / 2 ** n * (f - tasks.even_pairs_label(z)) ** 2 / 2
    assert total == pytest.approx(capacity.even_pairs_ends_construction_risk(3.0, n_max=12), rel=1e-12)
    assert capacity.even_pairs_ends_construction_risk(20.0) < 1e-14
    two = capacity.ceiling("even_pairs", 2, 2, even_pairs_embedding="ends")
    one = capacity.ceiling("even_pairs", 2, 1, even_pairs_embedding="ends")
    assert two.verdict(0.01) == "representable" and one.verdict(0.01) == "not representable"
    assert one.lower == pytest.approx((1 - p) / 8, rel=1e-15)
    assert tasks.even_pairs_heads("ends") == 2 and tasks.even_pairs_heads("query") == 1


def test_one_head_ends_certificate_costs_two_for_any_parameters():
    """The step of the one-head bound: for any one-head parameters and any middle, the four strings
    x m y (x, y in {a, b}) have sum |f - y| >= 2, since c(a m a) + c(b m b) = c(a m b) + c(b m a)."""
    rng = np.random.default_rng(11)
    model = Model(1, 8, 1)
    for _ in range(200):
        params = Params(3 * rng.standard_normal((1, 8)), 3 * rng.standard_normal((1, 8, 1)))
        middle = tuple(rng.integers(0, 2, rng.integers(0, 4)))
        total = 0.0
        for x, y in itertools.product((0, 1), repeat=2):
            z = (x, *middle, y)
            c = np.bincount(tasks.even_pairs_token_types(z, "ends"), minlength=8)[None].astype(float)
            total += abs(model.forward(params, np.eye(8), c)[0][0, 0] - tasks.even_pairs_label(z))
        assert total >= 2 - 1e-12


def test_a_configuration_recorded_before_the_readout_setting_reruns_with_the_small_readout():
    """A results file without ``attention_only_readout`` was trained on the row's start readout: read back, it
    names "small" (so --rerun trains it again and a partial file of it is not resumed under "fixed")."""
    recorded = runner.Config.quick().to_dict()
    del recorded["attention_only_readout"]
    assert runner.Config.from_dict(recorded).attention_only_readout == "small"
    assert runner.resumed_rows(runner.Config.quick(), {"config": recorded, "rows": {"AND (H=1)": {}}}) == {}
    now = runner.Config.quick(attention_only_readout="fixed").to_dict()
    assert runner.Config.from_dict(now).attention_only_readout == "fixed"


def test_fixed_readout_has_the_signs_of_the_first_output_step():
    """The fixed readout's sign on each symbol is that of the first output step from the zero start on AND's
    exact population (minus the readout gradient), so it is the readout every plan that trains the output
    moves to first, not one chosen for attention-only."""
    from numerics.experiments import engine

    row = _and_row("fixed")
    data = runner.make_data(row, 0)
    a0, b0 = runner.initial_params(row, 0)
    _, _, gB, _ = engine.risk_and_grad(a0[None], b0[None], data.val, row.loss, with_f=False)
    step = -gB[0, 0, :, 0]
    assert np.all(step != 0)
    assert np.array_equal(np.sign(runner.attention_only_readout(row)[0, :, 0]), np.sign(step))
