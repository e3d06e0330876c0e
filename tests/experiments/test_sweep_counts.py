"""Counts over independent evidence in the sweep: the configuration a verdict rests on (``sweep.configuration``)
collapses the readings that differ only in what its units ignore, identifies OR at d with occurrence at d/2
and even pairs across d, and each refusal names the plan that caused it (``sweep.refusal_cause``)."""
from __future__ import annotations

import pytest

from numerics import units
from numerics.experiments import readings
from numerics.experiments import sweep
from numerics.experiments import verdicts

LAG = "attention lags output under joint GD (displacement)"
MATCH = "three-phase matches joint GD"


@pytest.fixture(scope="module")
def shipped():
    return sweep.plan(readings.load())


def _readings(p, d, row):
    return [r for (r, dd, name) in p.rows if (dd, name) == (d, row)]


def _configs(p, d, row, claim, plans=("three_phase", "joint")):
    return {r: sweep.configuration(p, r, d, {"row": row, "claim": claim, "plans": list(plans)})
            for r in _readings(p, d, row)}


def test_the_schedule_axis_collapses_for_the_lag_and_not_for_the_comparison(shipped):
    """The 36 readings of the axes at d = 25 are 12 joint-GD configurations (3 schedules each), and the
    long-budget reading is one more; the comparison reads three-phase, which the schedule changes, so its 37
    readings stay 37."""
    lag = _configs(shipped, 25, "occurrence", LAG)
    assert len(lag) == 37 and len(set(lag.values())) == 13
    # readings that differ in the schedule alone share the lag configuration; another axis does not
    assert lag["k2=1/shared/gd/plateau"] == lag["k2=plateau/shared/gd/plateau"] == lag["k2=20/shared/gd/plateau"]
    assert lag["k2=plateau/shared/gd/plateau"] != lag["k2=plateau/separate/gd/plateau"]
    assert lag["k2=plateau/shared/gd/plateau"] != lag["k2=plateau/shared/adam/plateau"]
    match = _configs(shipped, 25, "occurrence", MATCH)
    assert len(set(match.values())) == 37
    # attention-only against three-phase also reads joint GD (the margin is a share of output-only minus joint)
    comp = _configs(shipped, 25, "AND (H=2)", "attention-only is competitive (matches three-phase)",
                    ("attention_only", "three_phase"))
    assert comp["k2=plateau/shared/gd/plateau"] != comp["k2=plateau/separate/gd/plateau"]
    # the claim is part of the configuration: two claims on the same units are counted apart
    func = _configs(shipped, 25, "occurrence", LAG.replace("displacement", "function"))
    assert not set(func.values()) & set(lag.values())


def test_a_schedule_that_extends_the_rows_seeds_is_its_own_lag_configuration():
    """A row found bimodal (under any plan) takes more seeds for every plan, joint GD's included, so two
    schedules share the lag's configuration only while they extend the row alike, draw by draw."""
    p = sweep.plan(readings.load())
    row = "SLR"
    lag = _configs(p, 25, row, LAG)
    one, plateau = "k2=1/shared/gd/plateau", "k2=plateau/shared/gd/plateau"
    assert lag[one] == lag[plateau]
    p.extended[((one, 25, row), 0)] = ["three_phase"]          # bimodal under k2=1's three-phase, draw 0
    lag = _configs(p, 25, row, LAG)
    assert lag[one] != lag[plateau]
    p.extended[((plateau, 25, row), 0)] = ["output_only"]      # the same seeds, whichever plan was bimodal
    assert _configs(p, 25, row, LAG)[one] == _configs(p, 25, row, LAG)[plateau]
    p.extended[((plateau, 25, row), 1)] = ["joint"]            # another draw extended under k2=plateau alone
    assert _configs(p, 25, row, LAG)[one] != _configs(p, 25, row, LAG)[plateau]


def test_a_row_the_cell_lacks_is_part_of_the_configuration(shipped):
    """A row whose units failed under one reading refuses its every claim there: that reading's lag is not
    the evidence of a reading whose row is whole, though joint GD's units are the same; "least lag" reads
    every row of the cell, so a missing other row changes its configuration too."""
    one, plateau = "k2=1/shared/gd/plateau", "k2=plateau/shared/gd/plateau"
    claim = {"row": "SLR", "claim": LAG, "plans": ["joint"]}
    whole = sweep.configuration(shipped, plateau, 25, claim, {})
    assert sweep.configuration(shipped, one, 25, claim, {}) == whole
    assert sweep.configuration(shipped, one, 25, claim, {"SLR": ["three_phase search failed"]}) != whole
    assert sweep.configuration(shipped, one, 25, claim, {"ICL": ["joint search failed"]}) == whole
    least = {"row": "even_pairs", "claim": verdicts.LEAST + " (displacement: smallest t_half ratio of all rows)",
             "plans": ["joint"]}
    assert sweep.configuration(shipped, one, 25, least, {"ICL": ["x"]}) != \
        sweep.configuration(shipped, one, 25, least, {})


def test_or_at_d_is_occurrence_at_half_d_and_even_pairs_does_not_depend_on_d(shipped):
    at50 = _readings(shipped, 50, "OR")
    assert at50
    for claim in (LAG, MATCH):
        orr, occ = _configs(shipped, 50, "OR", claim), _configs(shipped, 25, "occurrence", claim)
        assert all(orr[r] == occ[r] for r in at50), claim
        ep50, ep25 = _configs(shipped, 50, "even_pairs", claim), _configs(shipped, 25, "even_pairs", claim)
        assert all(ep50[r] == ep25[r] for r in at50), claim
        # controls: occurrence at 50 is not occurrence at 25, OR at 50 is not OR at 25
        assert not set(_configs(shipped, 50, "occurrence", claim).values()) & set(occ.values())
        assert not set(orr.values()) & set(_configs(shipped, 25, "OR", claim).values())


def test_canonical_spec_maps_only_even_or_and_even_pairs():
    spec = {"task": "OR", "config": {"d": 50, "batch": 8}, "plan": "joint"}
    assert sweep.canonical_spec(spec) == {"task": "occurrence", "config": {"d": 25, "batch": 8}, "plan": "joint"}
    assert spec["config"]["d"] == 50  # the spec itself is left alone
    assert sweep.canonical_spec({**spec, "config": {"d": 25}})["task"] == "OR"  # odd d: no occurrence at d/2
    assert sweep.canonical_spec({"task": "even_pairs", "config": {"d": 8}})["config"]["d"] is None
    assert sweep.canonical_spec({"task": "SLR", "config": {"d": 8}}) == {"task": "SLR", "config": {"d": 8}}


@pytest.mark.parametrize("reasons, cause", [
    (["three phase: chosen step at an untried grid edge (out high)", "joint: diverged on seeds [1]"], "three-phase"),
    (["joint: diverged on seeds [1]", "three phase: diverged on seeds [1]"], "joint"),
    (["output only: not converged within the budget on seeds [0]"], "output-only"),
    (["attention only: ended above its starting risk (unstable) on seeds [0]"], "attention-only"),
    (["not representable: ceiling risk in [0.05, 0.2] against the task's best 0", "joint: diverged"], "capacity"),
    (["capacity undecided: ceiling risk in [0, 0.2]"], "capacity"),
    (["no capacity ceiling computed"], "capacity"),
    (["training failed: joint search failed: ValueError: x"], "joint"),
    (["training failed: three_phase seed 3 not run"], "three-phase"),
    (["training failed: capacity ceiling not run"], "capacity"),
    (["no function measure for this task"], "measure"),
    (["t_half undefined (a block never moves)"], "measure"),
    (["no other row has a usable ratio"], "other rows"),
    (["joint: no finite held-out risk"], "joint"),
    (["a reason naming no plan"], "other"),
    ([], "other"),
])
def test_each_refusal_names_the_plan_that_caused_it(reasons, cause):
    assert sweep.refusal_cause(reasons) == cause


def test_cell_verdicts_record_the_cause_of_refusals_and_the_plans_of_missing_rows():
    out = sweep.cell_verdicts({"rows": {}, "missing_rows": {"AND (H=2)": ["joint search not run"]}})
    assert {v["verdict"] for v in out} == {"refused"}
    assert {v["cause"] for v in out} == {"joint"}
    plans = {v["claim"]: v["plans"] for v in out}
    assert plans[MATCH.replace("matches", "falls short of")] == ["three_phase", "joint"]
    assert plans["attention-only is competitive (matches three-phase)"] == ["attention_only", "three_phase"]
    assert plans[LAG] == ["joint"]


def test_every_cell_records_the_decision_rules(shipped):
    res = sweep.cell_results(shipped, units.Outcome(), "k2=plateau/shared/gd/plateau", 25)
    assert res["rows"] == {} and res["decision_rules"] == verdicts.rules()
