"""Semantic tests of the experiments' verdict logic: the Table 1 verdicts (``verdicts``), the extending step-size
grid (``grid``) and the lag measures (``lag``), on synthetic rows, scores and curves whose answers are known.

Thresholds are tested at their boundary with binary-exact numbers (a point on a strict threshold is on the
side the criterion names), so a relaxed or tightened comparison, a changed constant or a dropped term fails
a test; docs/mutation.md lists the mutmut run over these three modules.
"""
from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from numerics.experiments import engine
from numerics.experiments import lag as lag_module
from numerics.experiments import runner
from numerics.experiments import sweep
from numerics.experiments import verdicts
from numerics.experiments.grid import TIE_RTOL, GridSearch

# ------------------------------------------------------------------------------------------------ rows


def _stat(mean, std=0.0, n=1):
    return {"mean": mean, "std": std, "n": n}


def _lag(ta, tb, ratio, res=1):
    """A lag measure: t_half statistics of attention and output, the ratio statistics, the resolution."""
    return {"t_half_att": ta, "t_half_out": tb, "ratio": ratio, "resolution": res}


def _row(name="occurrence", task=None, **changes):
    """A synthetic results row (risks 0.01, output-only 0.3, start risk 0.5, an exact ceiling, attention
    lagging by a factor 4 under the displacement measure); ``changes`` maps dotted paths to new values."""
    seeds = [{"curve": {"risk": [0.5, 0.1]}}]
    plan = {"risk": _stat(0.01), "seeds": seeds, "diverged": [], "capped": [], "not_converged": [],
            "truncation_bound": 0.0, "search": {"all_diverged": False, "edge": [], "insensitive": False}}
    row = {"name": name, "task": task or name, "plans": {p: copy.deepcopy(plan) for p in runner.PLANS},
           "ceiling": {"lower": 0.0, "upper": 0.0, "best_risk": 0.0, "kind": "construction"},
           "lag": {"displacement": _lag(_stat(40), _stat(10), _stat(4.0))}}
    row["plans"]["output_only"]["risk"]["mean"] = 0.3
    for path, value in changes.items():
        obj = row
        keys = path.split(".")
        for k in keys[:-1]:
            obj = obj[k]
        obj[keys[-1]] = value
    return row


# ------------------------------------------------------------------------------------------------ verdicts


def test_standard_error_of_a_mean():
    assert verdicts._se(_stat(0.0, 2.0, 4)) == 1.0
    assert verdicts._se(_stat(0.0, 2.0, 2)) == 2.0 / math.sqrt(2)
    assert verdicts._se(_stat(0.0, 5.0, 1)) == 0.0  # one run has no standard error


def test_capacity_tolerance_is_a_share_of_the_starting_risk_and_its_boundaries():
    """Starting risk 1, so tol = 0.05 exactly: upper - best = tol is representable, lower - best = tol is
    undecided (not 'not representable'), and each side beyond it is decided."""
    def cap(lower, upper, best=0.0, start=1.0, **extra):
        return verdicts.capacity(_row(**{"plans.three_phase.seeds": [{"curve": {"risk": [start]}}],
                                  "ceiling": {"lower": lower, "upper": upper, "best_risk": best, "kind": "LP",
                                              **extra}}))

    ok, why = cap(0.0, 0.05)
    assert ok is True
    assert why == "ceiling risk in [0, 0.05] against the task's best 0 (tolerance 0.05; LP)"
    assert cap(0.0, 0.0625)[0] is None
    assert cap(0.0, 0.5, start=10.0)[0] is True  # tol = 0.5: the tolerance scales with the starting risk
    assert cap(0.25, 0.25, best=0.25)[0] is True  # measured from the best value, not from 0
    ok, why = cap(0.05, 0.5)
    assert ok is None and why.startswith("capacity undecided: ceiling risk in [0.05, 0.5]")
    ok, why = cap(0.0625, 0.5)
    assert ok is False and why.startswith("not representable: ceiling risk in [0.0625, 0.5]")
    assert cap(0.3, 0.5, best=0.25)[0] is None  # lower - best = 0.05 = tol
    assert cap(0.3125, 0.5, best=0.25)[0] is False
    # no kind recorded: the parenthesis still closes
    row = _row(ceiling={"lower": 0.0, "upper": 0.0, "best_risk": 0.0})
    assert verdicts.capacity(row)[1].endswith("(tolerance 0.025; )")


def test_capacity_without_a_ceiling_or_a_starting_risk_is_undecided():
    assert verdicts.capacity(_row(ceiling=None)) == (None, "no capacity ceiling computed")
    assert verdicts.capacity(_row(ceiling={})) == (None, "no capacity ceiling computed")
    assert verdicts.capacity(_row(ceiling={"error": "LP failed"})) == (None, "no capacity ceiling computed (LP failed)")
    row = _row()
    for p in row["plans"].values():
        p["seeds"] = [{"curve": {"risk": []}}, {"curve": {"risk": [None, 0.2]}}]
    assert verdicts.capacity(row) == (None, "no starting risk to scale the capacity tolerance")


def test_starting_risk_is_the_first_recorded_risk_of_the_first_run_that_has_one():
    row = _row()
    for p in row["plans"].values():
        p["seeds"] = []
    row["plans"]["joint"]["seeds"] = [{"curve": {"risk": []}}, {"curve": {"risk": [None, 0.2]}},
                                      {"curve": {"risk": [0.75, 0.5]}}, {"curve": {"risk": [0.25]}}]
    assert verdicts._start_risk(row) == 0.75
    row["plans"]["joint"]["seeds"] = []
    assert verdicts._start_risk(row) is None


def test_artefacts_name_every_reason_once():
    row = _row()
    assert verdicts.artefacts(row, ("three_phase", "joint")) == []
    three = row["plans"]["three_phase"]
    three["search"] = {"all_diverged": False, "edge": ["att high", "out low"], "insensitive": False}
    three["diverged"] = [3]
    three["unstable"] = [1]
    three["not_converged"] = [3, 4]  # seed 3 diverged: not also "not converged"
    assert verdicts.artefacts(row, ("three_phase", "joint")) == [
        "three phase: chosen step at an untried grid edge (att high, out low)",
        "three phase: diverged on seeds [3]",
        "three phase: ended above its starting risk (unstable) on seeds [1]",
        "three phase: not converged within the budget on seeds [4]"]
    assert verdicts.artefacts(row, ("joint",)) == []  # only the plans asked about
    # a plan whose every step diverged gets that one reason
    three["search"]["all_diverged"] = True
    row["plans"]["joint"]["not_converged"] = [0]
    assert verdicts.artefacts(row, ("three_phase", "joint")) == [
        "three phase: every step size diverged on the tuning seeds",
        "joint: not converged within the budget on seeds [0]"]
    # an unrepresentable row: the capacity reason comes first
    row["ceiling"] = {"lower": 0.25, "upper": 0.5, "best_risk": 0.0, "kind": "LP"}
    assert verdicts.artefacts(row, ())[0].startswith("not representable: ")
    row["ceiling"] = None
    assert verdicts.artefacts(row, ()) == ["no capacity ceiling computed"]


# exact binary numbers: se = sqrt((0.1875/2)^2 + (0.25/2)^2) = 5/32, 3 se = 15/32; margin 0.1 x 1.25
EXACT = {"plans.three_phase.risk": _stat(0.65625, 0.1875, 4), "plans.joint.risk": _stat(0.125, 0.25, 4),
         "plans.output_only.risk": _stat(1.375)}


def test_excess_margin_and_slack():
    row = _row(**EXACT)
    assert verdicts.excess(row, "three_phase", "joint") == (0.53125, 0.125, 0.0)
    row["plans"]["three_phase"]["truncation_bound"] = 0.0625
    row["plans"]["joint"]["truncation_bound"] = 0.125
    assert verdicts.excess(row, "three_phase", "joint")[2] == 0.1875
    row["plans"]["joint"]["truncation_bound"] = None  # a sampled plan has none
    assert verdicts.excess(row, "three_phase", "joint")[2] == 0.0625
    # the rounding allowance of either plan adds to the slack
    row["plans"]["three_phase"]["rounding_bound"] = 0.015625
    row["plans"]["joint"]["rounding_bound"] = 0.0078125
    assert verdicts.excess(row, "three_phase", "joint")[2] == 0.0859375
    row["plans"]["three_phase"]["rounding_bound"] = row["plans"]["joint"]["rounding_bound"] = None
    assert verdicts.excess(row, "joint", "three_phase")[:2] == (-0.53125, 0.125)
    # the margin is a share of the attention effect alone, whatever its sign, never of the seed spread
    row["plans"]["output_only"]["risk"] = _stat(-1.125)
    assert verdicts.excess(row, "three_phase", "joint")[1] == 0.125
    row["plans"]["three_phase"]["risk"] = _stat(0.65625, 8.0, 4)
    assert verdicts.excess(row, "three_phase", "joint")[1] == 0.125


def test_excess_interval_is_z_standard_errors_plus_the_slack():
    iv = verdicts.excess_interval(_row(**EXACT), "three_phase", "joint")
    m = verdicts.margin_interval(_row(**EXACT))
    assert iv == {"excess": 0.53125, "se": 0.15625, "margin": 0.125, "slack": 0.0, "lower": 0.0625, "upper": 1.0,
                  "margin_lower": m["lower"], "margin_upper": m["upper"]}
    iv = verdicts.excess_interval(_row(**EXACT, **{"plans.joint.truncation_bound": 0.0625}), "three_phase", "joint")
    assert (iv["lower"], iv["upper"]) == (0.0, 1.0625)


def _compare(want=True, **changes):
    return verdicts._compare(_row(**{**EXACT, **changes}), "three_phase", "joint", want, "the claim")


PRECISE_MARGIN = {"plans.joint.risk": _stat(0.125, 0.0, 4), "plans.three_phase.risk": _stat(0.65625, 0.3125, 4)}
"""EXACT with joint GD's spread moved to three-phase: the excess interval is the same (3 SE = 15/32), and the
margin's interval is the point 0.125 (output-only and joint GD without spread)."""


def test_compare_is_a_non_inferiority_test_against_the_margin():
    """excess 0.53125 in [0.0625, 1.0] (3 SE = 0.46875) against the margin 0.125: the interval straddles it,
    so neither "matches" nor "falls short" is decided; moved above the margin it is decided against matching,
    below it for matching; on the margin exactly it is undecided either way.  Joint GD without spread here
    (``PRECISE_MARGIN``), so the margin's own interval is the point 0.125."""
    v = _compare(**PRECISE_MARGIN)
    assert v == {"row": "occurrence", "claim": "the claim", "plans": ["three_phase", "joint"],
                 "verdict": "undecided", "reasons": ["the excess interval overlaps the margin's interval"],
                 "excess": 0.53125, "margin": 0.125, "interval": [0.0625, 1.0], "margin_interval": [0.125, 0.125],
                 "seeds_within": None,
                 "evidence": "three phase 0.656 vs joint 0.125: excess 0.531 in [0.0625, 1] (±3 SE), margin 0.125 in "
                             "[0.125, 0.125]"}
    assert _compare(want=False, **PRECISE_MARGIN)["verdict"] == "undecided"
    # lower bound 0.625 - 0.46875 = 0.15625 above the margin: three-phase falls short
    worse = {**PRECISE_MARGIN, "plans.three_phase.risk": _stat(0.75, 0.3125, 4)}
    assert _compare(**worse)["verdict"] == "does not hold"
    assert _compare(want=False, **worse)["verdict"] == "holds"
    # lower bound exactly on the margin: undecided
    assert _compare(**{**PRECISE_MARGIN, "plans.three_phase.risk": _stat(0.71875, 0.3125, 4)})["verdict"] == "undecided"
    # the population slack widens the interval: a lower bound above the margin by 1/32 comes back to it
    assert _compare(**worse, **{"plans.three_phase.truncation_bound": 0.03125})["verdict"] == "undecided"
    assert _compare(**worse, **{"plans.three_phase.truncation_bound": 0.03})["verdict"] == "does not hold"
    # upper bound on the margin: matches (precise seeds, excess 0.125 - 0 = margin)
    precise = {"plans.three_phase.risk": _stat(0.25), "plans.joint.risk": _stat(0.125)}
    v = _compare(**precise)
    assert v["verdict"] == "holds" and v["interval"] == [0.125, 0.125] and v["margin_interval"] == [0.125, 0.125]
    assert _compare(want=False, **precise)["verdict"] == "does not hold"
    assert _compare(**precise, **{"plans.three_phase.rounding_bound": 2.0 ** -20})["verdict"] == "undecided"
    # EXACT's joint GD spread (3 SE 0.375 on the effect) widens the margin to about [0.0875, 0.1625]: the lower
    # bound 0.15625 of ``worse`` with that spread is inside it, so undecided
    assert _compare(**{"plans.three_phase.risk": _stat(0.78125, 0.1875, 4)})["verdict"] == "does not hold"
    assert _compare(**{"plans.three_phase.risk": _stat(0.75, 0.1875, 4)})["verdict"] == "undecided"


def test_margin_interval_is_a_share_of_the_effects_interval():
    """The effect 1.25 (output-only 1.375 minus joint GD 0.125) with SE sqrt(0.09375^2 + 0.125^2) = 5/32, so
    |effect| in [1.25 - 15/32, 1.25 + 15/32] = [0.78125, 1.71875]; the margin's interval is 0.1 x that.  The two
    plans' population slack widens it; three-phase's does not (it is not in the margin)."""
    spread = {"plans.output_only.risk": _stat(1.375, 0.1875, 4), "plans.joint.risk": _stat(0.125, 0.25, 4)}
    share = verdicts.MATCH_SHARE
    assert verdicts.margin_interval(_row(**spread)) == {"margin": share * 1.25, "se": 0.15625, "slack": 0.0,
                                                        "lower": share * 0.78125, "upper": share * 1.71875}
    slack = {"plans.output_only.truncation_bound": 0.0625, "plans.joint.rounding_bound": 0.03125,
             "plans.three_phase.truncation_bound": 0.5, "plans.three_phase.quadrature_estimate": 0.5}
    m = verdicts.margin_interval(_row(**spread, **slack))
    assert (m["slack"], m["lower"], m["upper"]) == (0.09375, share * 0.6875, share * 1.8125)
    m = verdicts.margin_interval(_row(**spread, **{"plans.output_only.quadrature_estimate": 0.125}))
    assert (m["slack"], m["lower"]) == (0.125, share * 0.65625)
    # the sign of the effect does not matter: output-only below joint GD gives the same interval
    assert verdicts.margin_interval(_row(**{**spread, "plans.output_only.risk": _stat(-1.125, 0.1875, 4)})) == \
        verdicts.margin_interval(_row(**spread))
    # an effect within its own error: |effect| in [0, 0.125 + 15/32], never below 0
    m = verdicts.margin_interval(_row(**{**spread, "plans.output_only.risk": _stat(0.25, 0.1875, 4)}))
    assert (m["lower"], m["upper"]) == (0.0, share * 0.59375)


def _margin_case(three, output_std, want=True, **changes):
    """Three-phase at ``three`` against joint GD at 0.125 (both without spread, so the excess interval is the
    point three - 0.125) with the margin 0.1 x 1.25 = 0.125 of an output-only mean 1.375 spread by
    ``output_std`` over 4 seeds (SE output_std / 2)."""
    return _compare(want, **{"plans.three_phase.risk": _stat(three, 0.0, 4), "plans.joint.risk": _stat(0.125, 0.0, 4),
                             "plans.output_only.risk": _stat(1.375, output_std, 4), **changes})


def test_matches_needs_the_excess_below_the_margins_lower_bound():
    """Excess 0.125, on the point margin: the point rule calls it a match.  With output-only spread 0.5 over 4
    seeds (3 SE 0.75) the margin is in [0.05, 0.2], which the excess is inside: undecided.  The same excess
    with tight output-only seeds (spread 2^-10) is still undecided (it is on the margin, and the margin's lower
    bound is below it), and an excess 0.0625 with the margin in about [0.1156, 0.1344] holds."""
    v = _margin_case(0.25, 0.5)
    assert v["excess"] == v["margin"] == v["interval"][1] == 0.125
    assert v["margin_interval"][0] < 0.125 < v["margin_interval"][1]
    assert v["verdict"] == "undecided" and v["reasons"] == ["the excess interval overlaps the margin's interval"]
    assert "margin 0.125 in [0.05, 0.2]" in v["evidence"]
    assert _margin_case(0.25, 2.0 ** -10)["verdict"] == "undecided"
    # tight seeds: the excess's upper bound below the margin's lower bound, holds
    v = _margin_case(0.1875, 0.0625)
    assert v["verdict"] == "holds" and v["interval"][1] <= v["margin_interval"][0]
    # the same excess with the wide output-only spread: the margin's lower bound 0.05 is below it
    assert _margin_case(0.1875, 0.5)["verdict"] == "undecided"
    # the margin's seeds decide nothing about the count: it stays on the point margin
    row = _row(**{"plans.three_phase.risk": {**_stat(0.1875, 0.0, 4), "values": [0.1875, 0.25, 0.25, 0.5]},
                  "plans.joint.risk": _stat(0.125, 0.0, 4), "plans.output_only.risk": _stat(1.375, 0.5, 4)})
    assert verdicts.seeds_within(row, "three_phase", "joint", 0.125) == (3, 4)
    v = verdicts._compare(row, "three_phase", "joint", True, "the claim")
    assert v["seeds_within"] == [3, 4] and v["verdict"] == "undecided"


def test_falls_short_needs_the_excess_above_the_margins_upper_bound():
    """The mirror: excess 0.1875 above the point margin 0.125 falls short on the point rule; with output-only
    spread 0.5 the margin reaches 0.2, so it is undecided for both claims; with tight seeds (margin up to about
    0.1344) three-phase falls short and does not match."""
    for want in (True, False):
        assert _margin_case(0.3125, 0.5, want)["verdict"] == "undecided"
    assert _margin_case(0.3125, 0.0625, want=False)["verdict"] == "holds"
    assert _margin_case(0.3125, 0.0625, want=True)["verdict"] == "does not hold"
    # non-inferiority shown under the margin's lower bound: falls short does not hold
    assert _margin_case(0.1875, 0.0625, want=False)["verdict"] == "does not hold"


def test_the_margins_bounds_are_the_boundaries():
    """Joint GD at 0 (so the excess is three-phase's risk, no rounding in the difference): an excess on the
    margin's lower bound matches, one just above it is undecided; an excess on the margin's upper bound is
    undecided, one just above it does not match."""
    base = {"plans.joint.risk": _stat(0.0, 0.0, 4), "plans.output_only.risk": _stat(1.25, 0.25, 4)}
    lo, hi = (verdicts.margin_interval(_row(**base))[k] for k in ("lower", "upper"))
    assert 0 < lo < hi

    def verdict(three):
        return _compare(**base, **{"plans.three_phase.risk": _stat(three, 0.0, 4)})["verdict"]

    assert verdict(lo) == "holds"
    assert verdict(float(np.nextafter(lo, 1))) == "undecided"
    assert verdict(hi) == "undecided"
    assert verdict(float(np.nextafter(hi, 1))) == "does not hold"


def test_joint_gds_spread_enters_the_margin_as_well_as_the_excess():
    """Joint GD spread 5/128 over 4 seeds (3 SE 0.05859375) and excess 0.0625: the excess's upper bound
    0.12109375 is below the point margin 0.125 but above the margin's lower bound 0.1 x (1.25 - 0.05859375),
    about 0.1191: undecided; the margin's interval without joint GD's standard error would call it a match."""
    v = _compare(**{"plans.three_phase.risk": _stat(0.1875, 0.0, 4), "plans.joint.risk": _stat(0.125, 0.0390625, 4),
                    "plans.output_only.risk": _stat(1.375, 0.0, 4)})
    assert v["interval"][1] == 0.12109375 < v["margin"]
    assert v["verdict"] == "undecided"
    # spread 1/32 (3 SE 0.046875): upper bound 0.109375 below the margin's lower bound, about 0.1203: holds
    v = _compare(**{"plans.three_phase.risk": _stat(0.1875, 0.0, 4), "plans.joint.risk": _stat(0.125, 0.03125, 4),
                    "plans.output_only.risk": _stat(1.375, 0.0, 4)})
    assert v["verdict"] == "holds"


def test_a_plan_clearly_better_matches_whatever_the_margins_spread():
    """The margin's lower bound is floored at 0 (|effect| is never negative): three-phase below joint GD by
    0.03125 matches even when the effect 0.125 is within its own error (output-only spread 0.5, 3 SE 0.75)."""
    v = _compare(**{"plans.three_phase.risk": _stat(0.09375, 0.0, 4), "plans.joint.risk": _stat(0.125, 0.0, 4),
                    "plans.output_only.risk": _stat(0.25, 0.5, 4)})
    assert v["margin_interval"][0] == 0.0 and v["verdict"] == "holds"


def test_one_sampled_seed_of_a_margin_plan_decides_nothing():
    """On a row trained on samples, output-only (or, for attention-only against three-phase, joint GD) with one
    seed gives the margin no standard error: the comparison is undecided, as for one seed of a compared plan."""
    many = {p: _stat(0.01, 0.001, 5) for p in ("plans.three_phase.risk", "plans.joint.risk",
                                                "plans.attention_only.risk")}
    row = _row(exact=False, **many, **{"plans.output_only.risk": _stat(0.3, 0.0, 1)})
    v = verdicts._compare(row, "three_phase", "joint", True, "the claim")
    assert v["verdict"] == "undecided" and v["reasons"] == [verdicts.ONE_SEED]
    row = _row(exact=False, **many, **{"plans.output_only.risk": _stat(0.3, 0.001, 5)})
    assert verdicts._compare(row, "three_phase", "joint", True, "the claim")["verdict"] == "holds"
    row["plans"]["joint"]["risk"] = _stat(0.01, 0.0, 1)
    v = verdicts._compare(row, "attention_only", "three_phase", True, "the claim")
    assert v["verdict"] == "undecided" and v["reasons"] == [verdicts.ONE_SEED]


def test_compare_is_refused_on_artefacts_of_any_plan_it_reads():
    for plan in ("three_phase", "joint", "output_only"):
        name = plan.replace("_", " ")
        v = _compare(**{f"plans.{plan}.diverged": [2]})
        assert v["verdict"] == "refused" and v["evidence"] == "", plan
        assert v["reasons"] == [f"{name}: diverged on seeds [2]"]
        v = _compare(**{f"plans.{plan}.risk": _stat(None)})
        assert v["verdict"] == "refused" and v["reasons"] == [f"{name}: no finite held-out risk"], plan
        assert _compare(**{f"plans.{plan}.risk": _stat(math.nan)})["reasons"] == [f"{name}: no finite held-out risk"]
    assert _compare(**{"plans.attention_only.diverged": [2]})["verdict"] == "undecided"
    v = _compare(**{"ceiling": None, "plans.joint.risk": _stat(None)})
    assert v["reasons"] == ["no capacity ceiling computed", "joint: no finite held-out risk"]


def _competitive(row):
    return verdicts._compare(row, "attention_only", "three_phase", True, verdicts.COMPETITIVE)


def test_attention_only_comparison_checks_the_margins_joint_gd():
    """Attention-only against three-phase reads joint GD only through the margin, and is checked on it as on
    the compared plans: joint GD with no risk, absent from the row, or tuned at a grid edge refuses the
    verdict (never an exception), with the reason naming joint GD so that the sweep's cause tables count it."""
    assert _competitive(_row(**EXACT))["verdict"] != "refused"
    for changes, why in (({"plans.joint.risk": _stat(None)}, "joint: no finite held-out risk"),
                         ({"plans.joint.search.edge": ["out high"]},
                          "joint: chosen step at an untried grid edge (out high)"),
                         ({"plans.joint.not_converged": [1]}, "joint: not converged within the budget on seeds [1]")):
        v = _competitive(_row(**{**EXACT, **changes}))
        assert v["verdict"] == "refused" and v["reasons"] == [why] and v["evidence"] == "", changes
        assert sweep.refusal_cause(v["reasons"]) == "joint"
    v = _competitive(_row(**{**EXACT, "plans.joint.search.edge": ["out high"]}))
    assert sweep.reason_category(v["reasons"]) == "edge step"
    row = _row(**EXACT)
    del row["plans"]["joint"]
    v = _competitive(row)
    assert v["verdict"] == "refused" and v["reasons"] == ["joint: not run (the row holds no results for it)"]
    assert sweep.refusal_cause(v["reasons"]) == "joint"
    # a whole AND draw with joint GD's risk missing is judged, not raised on: both comparisons are refused
    fixed = {"attention_only_readout": "fixed", "attention_only_readout_scale": 1.0}
    row = _row("AND (H=2)", "AND", model_class=fixed, **EXACT)
    row["plans"]["joint"]["risk"] = _stat(None)
    got = {v["claim"]: v for v in verdicts.assess_draw({"rows": {row["name"]: row}})}
    for claim in (verdicts.COMPETITIVE, verdicts.FALLS_SHORT):
        assert got[claim]["verdict"] == "refused" and got[claim]["reasons"] == ["joint: no finite held-out risk"]


def test_a_plan_missing_from_the_row_refuses_a_lag_verdict():
    row = _row()
    del row["plans"]["joint"]
    v = verdicts.lag_verdict(row, "displacement")
    assert v["verdict"] == "refused" and v["reasons"] == ["joint: not run (the row holds no results for it)"]


def _lag_row(ratio, ta=40.0, tb=10.0, res=1, std=0.0, n=4, **changes):
    return _row(**{"lag.displacement": _lag(_stat(ta, std, n), _stat(tb, std, n), ratio, res), **changes})


def test_lag_verdict_thresholds():
    """The ratio interval mean -+ (3 SE + resolution x (1 + mean) / t_half(output)) against the band
    [0.8, 1.25]: above it attention lags (holds), inside it no appreciable lag, below it attention leads (both
    do not hold), else undecided; on the band's upper edge the interval is not above it."""
    def verdict(*a, **k):
        return verdicts.lag_verdict(_lag_row(*a, **k), "displacement")["verdict"]

    # SE = std / 2 with n = 4; resolution 0 leaves the standard errors alone
    assert verdict(_stat(1.625, 0.24, 4), res=0) == "holds"
    assert verdict(_stat(1.625, 0.25, 4), res=0) == "undecided"  # mean - 3 SE = 1.25 exactly
    assert verdict(_stat(1.25, 0.0, 1), res=0) == "does not hold"  # one run at 1.25: inside the band
    # resolution 4 at t_half(output) 20 widens ratio 1.5 by 4 x 2.5 / 20 = 0.5: [1, 2] straddles 1.25
    assert verdict(_stat(1.5, 0.0, 1), ta=30, tb=20, res=4) == "undecided"
    assert verdict(_stat(1.5, 0.0, 1), ta=30, tb=20, res=1) == "holds"  # [1.375, 1.625]
    assert verdict(_stat(0.5, 0.0, 4), ta=10, tb=20, res=0) == "does not hold"


def test_lag_verdict_record():
    """ratio 1.75, SE 0.125 (3 SE 0.375), resolution 1 at t_half(output) 22: w = 2.75 / 22 = 0.125, so the
    interval is [1.25, 2.25] (touching the band: undecided) and with 2 resolution steps [1.125, 2.375]."""
    v = verdicts.lag_verdict(_lag_row(_stat(1.75, 0.25, 4), std=5.0, res=1, tb=22.0), "displacement")
    assert v == {"row": "occurrence", "claim": "attention lags output under joint GD (displacement)",
                 "measure": "displacement", "plans": ["joint"], "verdict": "undecided", "outcome": "undecided",
                 "reasons": ["the ratio interval straddles an edge of the band"], "ratio": 1.75, "ratio_se": 0.125,
                 "interval": [1.25, 2.25],
                 "evidence": "t_half(attention) 40 ± 5, t_half(output) 22 ± 5, ratio 1.75 ± 0.25 in [1.25, 2.25] "
                             "(±3 SE + resolution 1 steps; band [0.8, 1.25]): undecided"}
    v = verdicts.lag_verdict(_lag_row(_stat(1.75, 0.2, 4), res=1, tb=22.0), "displacement")
    assert (v["verdict"], v["outcome"], v["reasons"]) == ("holds", "attention lags", [])
    v = verdicts.lag_verdict(_lag_row(_stat(1.0, 0.0, 4), res=0, ta=10.0), "displacement")
    assert (v["verdict"], v["outcome"], v["reasons"]) == ("does not hold", "no appreciable lag", [])
    assert v["evidence"].endswith("ratio 1 ± 0 in [1, 1] (±3 SE + resolution 0 steps; band [0.8, 1.25]): "
                                  "no appreciable lag")
    v = verdicts.lag_verdict(_lag_row(_stat(0.5, 0.0, 4), res=0, ta=10.0, tb=20.0), "displacement")
    assert (v["verdict"], v["outcome"]) == ("does not hold", "attention leads")


def test_lag_verdict_refusals():
    row = _lag_row(_stat(4.0))
    v = verdicts.lag_verdict(row, "function")
    assert v["verdict"] == "refused" and v["reasons"] == ["no function measure for this task"]
    assert v["evidence"] == "" and v["claim"] == "attention lags output under joint GD (function)"
    # artefacts of the joint plan come first, then the missing measure
    row["plans"]["joint"]["diverged"] = [1]
    assert verdicts.lag_verdict(row, "function")["reasons"] == ["joint: diverged on seeds [1]",
                                                         "no function measure for this task"]
    v = verdicts.lag_verdict(row, "displacement")
    assert v["verdict"] == "refused" and v["reasons"] == ["joint: diverged on seeds [1]"] and v["evidence"] == ""
    # the other plans do not enter
    row = _lag_row(_stat(4.0), **{"plans.three_phase.diverged": [1]})
    assert verdicts.lag_verdict(row, "displacement")["verdict"] == "holds"
    v = verdicts.lag_verdict(_lag_row(_stat(None, 0.0, 0)), "displacement")
    assert v["verdict"] == "refused" and v["reasons"] == ["t_half undefined (a block never moves)"]
    assert v["evidence"] == ""
    # AND has no alignment measure, even in results recorded with one
    row = _lag_row(_stat(4.0), task="AND")
    row["lag"]["alignment"] = row["lag"]["displacement"]
    assert verdicts.lag_verdict(row, "alignment")["verdict"] == "refused"
    row["task"] = "OR"
    assert verdicts.lag_verdict(row, "alignment")["verdict"] == "holds"


def test_fmt():
    assert verdicts._fmt(_stat(None)) == "n/a"
    assert verdicts._fmt(_stat(12.345, 3.0, 1)) == "12.3"
    assert verdicts._fmt(_stat(12.345, 3.0, 2)) == "12.3 ± 3"


def _claims(rows):
    return [(v["row"], v["claim"], v["verdict"]) for v in verdicts.assess({"rows": {r["name"]: r for r in rows}})]


def test_assess_speaks_to_the_claims_of_each_task():
    for task in ("occurrence", "OR", "ICL", "SLR"):
        assert [c for _, c, _ in _claims([_row(task)])] == [
            "three-phase matches joint GD", "attention lags output under joint GD (displacement)",
            "attention lags output under joint GD (function)"], task
    row = _row("AND", model_class={"attention_only_readout": "fixed", "attention_only_readout_scale": 1.0})
    row["lag"]["alignment"] = row["lag"]["displacement"]
    assert _claims([row]) == [
        ("AND", "three-phase falls short of joint GD", "does not hold"),
        ("AND", "attention-only is competitive (matches three-phase)", "holds"),
        ("AND", "attention lags output under joint GD (displacement)", "holds"),
        ("AND", "attention lags output under joint GD (function)", "refused")]
    row_short = _row("AND", **{"plans.three_phase.risk": _stat(0.2)})
    assert ("AND", "three-phase falls short of joint GD", "holds") in _claims([row_short])
    v = [v for v in verdicts.assess({"rows": {"AND": row}}) if v["claim"].startswith("attention-only")]
    assert v[0]["evidence"].startswith("attention only 0.01 vs three phase 0.01: excess 0")
    row = _row("OR")
    row["lag"]["alignment"] = row["lag"]["displacement"]
    assert [c for _, c, _ in _claims([row])][-1] == "attention lags output under joint GD (alignment)"
    assert [c for _, c, _ in _claims([_row("parity")])] == [
        "attention lags output under joint GD (displacement)", "attention lags output under joint GD (function)"]
    assert "even_pairs" in verdicts.PAPER_MATCH and verdicts.MEASURES == ("displacement", "function", "alignment")


def _ep(ratio, ta=10.0, tb=10.0, res=1):
    """An even-pairs row with the same measure under displacement and function, in a model where no single
    token carries the label (so its lag claims are testable)."""
    m = _lag(_stat(ta), _stat(tb), ratio, res)
    return _row("even_pairs", **{"lag.displacement": m, "lag.function": copy.deepcopy(m),
                                 "model_class": {"label_in_single_token": False}})


def _ep_claims(rows, measure="displacement"):
    return {c: v for r, c, v in _claims(rows) if r == "even_pairs" and f"({measure}" in c}


NEAR = "attention grows almost as fast as the output under joint GD (displacement: ratio interval inside [0.8, 1.25])"
LEAST = "the lag is least on even pairs (displacement: smallest t_half ratio of all rows)"


def test_even_pairs_almost_as_fast_is_an_equivalence_test_on_the_band():
    """Holds when the ratio interval (3 SE, plus the resolution slack) is inside [0.8, 1.25], ends included;
    does not hold when it lies entirely outside; undecided when it straddles an edge: a precise ratio away
    from 1 but inside the band holds, which a point null (|ratio - 1| <= 3 SE) would refuse."""
    # n = 4, SE = std / 2, resolution 0: [1.125 - 0.125, 1.125 + 0.125] = [1, 1.25]
    assert _ep_claims([_ep(_stat(1.125, 1 / 12, 4), res=0)])[NEAR] == "holds"
    assert _ep_claims([_ep(_stat(1.125, 0.085, 4), res=0)])[NEAR] == "undecided"
    assert _ep_claims([_ep(_stat(1.125, 0.0, 4), res=0)])[NEAR] == "holds"  # 1.125 +- 0: a point null fails it
    assert _ep_claims([_ep(_stat(0.8), res=0)])[NEAR] == "holds"
    assert _ep_claims([_ep(_stat(float(np.nextafter(0.8, 0))), res=0)])[NEAR] == "does not hold"
    assert _ep_claims([_ep(_stat(1.25), res=0)])[NEAR] == "holds"
    assert _ep_claims([_ep(_stat(float(np.nextafter(1.25, 2))), res=0)])[NEAR] == "does not hold"
    assert _ep_claims([_ep(_stat(1.5, 0.5, 4), res=0)])[NEAR] == "undecided"  # [0.75, 2.25]
    # one run: the resolution slack 4 x 2 / 32 = 0.25 takes ratio 1 to [0.75, 1.25]: undecided
    assert _ep_claims([_ep(_stat(1.0), tb=32.0, res=4)])[NEAR] == "undecided"
    assert _ep_claims([_ep(_stat(1.0), tb=32.0, res=2)])[NEAR] == "holds"
    # a refused measure does not stop the other one
    row = _ep(_stat(1.0))
    row["lag"]["displacement"]["ratio"] = _stat(None, 0.0, 0)
    assert _ep_claims([row])[NEAR] == "refused"
    assert _ep_claims([row], "function")[NEAR.replace("displacement", "function")] == "holds"
    # a refused base is refused under both claims' names
    row = _ep(_stat(1.0))
    row["plans"]["joint"]["diverged"] = [0]
    got = _ep_claims([row])
    assert got == {"attention lags output under joint GD (displacement)": "refused", NEAR: "refused",
                   LEAST: "refused"}
    assert [v["reasons"] for v in verdicts.assess({"rows": {"even_pairs": row}}) if v["claim"] == NEAR] == [
        ["joint: diverged on seeds [0]"]]


def test_even_pairs_least_lag_against_the_other_rows():
    ep = _ep(_stat(1.5, 0.0, 4))  # interval [1.5, 1.5]
    assert _ep_claims([ep])[LEAST] == "refused"
    assert [v["reasons"] for v in verdicts.assess({"rows": {"even_pairs": ep}}) if v["claim"] == LEAST] == [
        ["no other row has a usable ratio"]]

    def other(name, mean, std=0.0):
        return _lag_row(_stat(mean, std, 4), name=name, task="occurrence")

    assert _ep_claims([ep, other("a", 1.75), other("b", 3.0)])[LEAST] == "holds"
    assert _ep_claims([ep, other("a", 1.75, 1 / 6)])[LEAST] == "undecided"  # lower end 1.5: touches
    assert _ep_claims([ep, other("a", 1.75), other("b", 1.5)])[LEAST] == "undecided"
    assert _ep_claims([ep, other("a", 1.25, 1 / 6)])[LEAST] == "undecided"  # upper end 1.5: touches
    assert _ep_claims([ep, other("a", 1.25, 0.1), other("b", 3.0)])[LEAST] == "does not hold"
    # the other rows' intervals are 3 SE wide (SE 0.08): [1.51, 1.99] is above 1.5, [1.01, 1.49] below
    assert _ep_claims([ep, other("a", 1.75, 0.16)])[LEAST] == "holds"
    assert _ep_claims([ep, other("a", 1.25, 0.16)])[LEAST] == "does not hold"
    # with one row only, the function measure is still judged
    assert _ep_claims([ep], "function")[LEAST.replace("displacement", "function")] == "refused"
    # the even-pairs interval is 3 SE wide on each side
    assert _ep_claims([_ep(_stat(1.5, 0.5, 4)), other("a", 2.25)])[LEAST] == "undecided"
    assert _ep_claims([_ep(_stat(1.5, 0.4, 4)), other("a", 2.25)])[LEAST] == "holds"
    assert _ep_claims([_ep(_stat(1.5, 0.5, 4)), other("a", 0.75)])[LEAST] == "undecided"
    assert _ep_claims([_ep(_stat(1.5, 0.4, 4)), other("a", 0.75)])[LEAST] == "does not hold"
    # refused rows are left out, and named
    bad = other("c", 0.5)
    bad["plans"]["joint"]["diverged"] = [0]
    v = [v for v in verdicts.assess({"rows": {r["name"]: r for r in (ep, other("a", 3.0), bad)}}) if v["claim"] == LEAST]
    assert [(x["verdict"], x["reasons"]) for x in v] == [("holds", ["rows refused and left out: c"])]
    assert v[0]["evidence"] == "ratios a 3, even pairs 1.5"
    v = [v for v in verdicts.assess({"rows": {r["name"]: r for r in (ep, other("a", 3.0))}}) if v["claim"] == LEAST]
    assert v[0]["reasons"] == []
    bad2 = other("e", 0.5)
    bad2["plans"]["joint"]["diverged"] = [0]
    rows = (ep, other("a", 3.0), other("b", 2.5), bad, bad2)
    v = [v for v in verdicts.assess({"rows": {r["name"]: r for r in rows}}) if v["claim"] == LEAST]
    assert v[0]["evidence"] == "ratios a 3, b 2.5, even pairs 1.5"
    assert v[0]["reasons"] == ["rows refused and left out: c, e"]
    # both measures are judged
    assert set(_ep_claims([ep, other("a", 3.0)], "function")) == {
        "attention lags output under joint GD (function)",
        "the lag is least on even pairs (function: smallest t_half ratio of all rows)",
        "attention grows almost as fast as the output under joint GD (function: ratio interval inside [0.8, 1.25])"}


def test_exit_status():
    assert verdicts.exit_status([{"verdict": "holds"}, {"verdict": "does not hold"}]) == "done"
    assert verdicts.exit_status([]) == "done"
    for bad in ("undecided", "refused"):
        assert verdicts.exit_status([{"verdict": "holds"}, {"verdict": bad}]) == "undecided"


def _verdicts(row):
    return {v["claim"]: v for v in verdicts.assess({"rows": {row["name"]: row}}) if "alignment" not in v["claim"]
            and "function" not in v["claim"]}


def test_verdicts_are_refused_when_they_rest_on_an_artefact():
    base = _verdicts(_row())
    match, lag = "three-phase matches joint GD", "attention lags output under joint GD (displacement)"
    assert base[match]["verdict"] == "holds" and base[lag]["verdict"] == "holds"
    for change, reason in [({"plans.joint.search": {"all_diverged": False, "edge": ["out high"], "insensitive": False}},
                            "edge"),
                           ({"plans.three_phase.diverged": [3]}, "diverged"),
                           ({"plans.joint.unstable": [1]}, "unstable"),
                           ({"plans.joint.not_converged": [0]}, "not converged"),
                           ({"ceiling": {"risk": 0.3, "lower": 0.1, "upper": 0.3, "best_risk": 0.0,
                                         "accuracy": 0.7, "kind": "LP"}}, "not representable"),
                           ({"ceiling": {"risk": 0.3, "lower": 0.0, "upper": 0.3, "best_risk": 0.0,
                                         "accuracy": 0.7, "kind": "LP"}}, "capacity undecided"),
                           ({"ceiling": None}, "no capacity ceiling")]:
        got = _verdicts(_row(**change))
        assert got[match]["verdict"] == "refused" and any(reason in x for x in got[match]["reasons"]), change
    # the lag verdict depends on the joint plan only: an edge of three-phase does not refuse it
    got = _verdicts(_row(**{"plans.three_phase.search": {"all_diverged": False, "edge": ["att high"],
                                                         "insensitive": False}}))
    assert got[lag]["verdict"] == "holds" and got[match]["verdict"] == "refused"
    # decided the other way, and undecided within the resolution
    assert _verdicts(_row(**{"plans.three_phase.risk": {"mean": 0.2, "std": 0.0, "n": 1}}))[match]["verdict"] \
        == "does not hold"
    within = {"t_half_att": {"mean": 11, "std": 0, "n": 1}, "t_half_out": {"mean": 10, "std": 0, "n": 1},
              "ratio": {"mean": 1.1, "std": 0.0, "n": 1}, "resolution": 2}
    assert _verdicts(_row(**{"lag.displacement": within}))[lag]["verdict"] == "undecided"
    spread = {"t_half_att": {"mean": 40, "std": 5, "n": 5}, "t_half_out": {"mean": 10, "std": 1, "n": 5},
              "ratio": {"mean": 1.2, "std": 0.5, "n": 5}, "resolution": 1}
    assert _verdicts(_row(**{"lag.displacement": spread}))[lag]["verdict"] == "undecided"
    spread["ratio"] = {"mean": 0.5, "std": 0.1, "n": 5}
    spread["t_half_att"], spread["t_half_out"] = {"mean": 10, "std": 1, "n": 5}, {"mean": 20, "std": 1, "n": 5}
    assert _verdicts(_row(**{"lag.displacement": spread}))[lag]["verdict"] == "does not hold"
    # the same crossing snapshot on every seed (ratio exactly 1, no spread) is not "no lag": the resolution
    # of 26 steps leaves it open
    tie = {"t_half_att": {"mean": 234, "std": 0, "n": 5}, "t_half_out": {"mean": 234, "std": 0, "n": 5},
           "ratio": {"mean": 1.0, "std": 0.0, "n": 5}, "resolution": 26}
    assert _verdicts(_row(**{"lag.displacement": tie}))[lag]["verdict"] == "undecided"
    tie["t_half_out"] = {"mean": 260, "std": 0, "n": 5}
    tie["ratio"] = {"mean": 0.9, "std": 0.0, "n": 5}
    assert _verdicts(_row(**{"lag.displacement": tie}))[lag]["verdict"] == "undecided"  # 26 steps apart: one gap


# ------------------------------------------------------------------------------------------------ grid


def _search(scores, axes=1, points=3, max_ext=6, flat=0.0):
    g = GridSearch(axes, points, max_ext, flat)
    rounds = 0
    while not g.done:
        g.record({p: scores(p) for p in g.pending})
        rounds += 1
    return g, rounds


def test_grid_first_points():
    assert GridSearch(1, 3, 2).pending == [(-1,), (0,), (1,)]
    assert GridSearch(1, 4, 2).pending == [(-1,), (0,), (1,), (2,)]
    assert GridSearch(1, 1, 2).pending == [(0,)]
    g = GridSearch(2, 3, 2)
    assert g.pending == [(a, b) for a in (-1, 0, 1) for b in (-1, 0, 1)]
    assert g.extensions == {(0, -1): 0, (0, 1): 0, (1, -1): 0, (1, 1): 0}
    assert g.flat == 0.0 and g.tried == {} and not g.done


def test_grid_records_nan_as_diverged_and_scores_as_floats():
    g = GridSearch(1, 3, 0)
    g.record({(-1,): float("nan"), (0,): 1, (1,): None})
    assert g.tried == {(-1,): None, (0,): 1.0, (1,): None} and type(g.tried[(0,)]) is float
    assert g.best() == (0,) and g.done


def test_grid_extension_faces():
    """Best at (1, 0) of the first 3 x 3 grid: the next points are the face one step beyond on axis 0."""
    g = GridSearch(2, 3, 2)
    g.record({p: (p[0] - 5.0) ** 2 + p[1] ** 2 for p in g.pending})
    assert g.best() == (1, 0)
    assert g.pending == [(2, -1), (2, 0), (2, 1)]
    assert g.extensions == {(0, -1): 0, (0, 1): 1, (1, -1): 0, (1, 1): 0}
    g.record({p: (p[0] - 5.0) ** 2 + p[1] ** 2 for p in g.pending})
    assert g.pending == [(3, -1), (3, 0), (3, 1)]
    g.record({p: (p[0] - 5.0) ** 2 + p[1] ** 2 for p in g.pending})
    assert g.done and g.best() == (3, 0) and g.edges() == [(0, 1)]  # two extensions used up


def test_grid_extension_face_is_taken_at_the_best_offset():
    """Minimiser at (2, 1): the first grid's best (1, 1) opens both top edges; then the best (2, 1) opens axis 0
    again (its face: the points at offset 2, not those elsewhere, e.g. not (1, 2)) and axis 1 at (2, 2)."""
    g = GridSearch(2, 3, 6)
    f = lambda p: (p[0] - 2.0) ** 2 + (p[1] - 1.0) ** 2  # noqa: E731
    g.record({p: f(p) for p in g.pending})
    assert g.best() == (1, 1) and g.pending == [(-1, 2), (0, 2), (1, 2), (2, -1), (2, 0), (2, 1)]
    g.record({p: f(p) for p in g.pending})
    assert g.best() == (2, 1) and g.pending == [(2, 2), (3, -1), (3, 0), (3, 1)]


def test_grid_extensions_are_counted_per_side():
    g, rounds = _search(lambda p: -float(p[0]), max_ext=2)
    assert g.best() == (3,) and rounds == 3 and g.edges() == [(0, 1)]
    g, rounds = _search(lambda p: float(p[0]), max_ext=2)
    assert g.best() == (-3,) and rounds == 3 and g.extensions == {(0, -1): 2, (0, 1): 0}
    g, rounds = _search(lambda p: (p[0] - 2.0) ** 2, max_ext=1)
    assert g.best() == (2,) and g.edges() == [(0, 1)]


def test_grid_all_diverged_steps_down_on_every_axis():
    g = GridSearch(2, 3, 2)
    g.record({p: None for p in g.pending})
    assert g.best() is None and g.edges() == []
    assert g.pending == sorted([(-2, -1), (-2, 0), (-2, 1), (-1, -2), (0, -2), (1, -2)])
    assert g.extensions == {(0, -1): 1, (0, 1): 0, (1, -1): 1, (1, 1): 0}
    g.record({p: None for p in g.pending})
    # each face is built from the points at the lowest offset of its axis (the tried set is a cross here)
    assert g.pending == sorted([(-3, -1), (-3, 0), (-3, 1), (-1, -3), (0, -3), (1, -3)])
    assert g.extensions[(0, -1)] == 2
    g.record({p: None for p in g.pending})
    assert g.done and g.best() is None
    # one axis, all diverged: exactly max_ext more rounds
    assert _search(lambda p: None, max_ext=3)[1] == 4
    assert _search(lambda p: None, max_ext=0)[1] == 1
    # the smaller steps are used once they work
    g, _ = _search(lambda p: None if p[0] > -2 else 1.0, max_ext=3)
    assert g.best() == (-2,) and g.tried[(-2,)] == 1.0


def test_grid_best_breaks_ties_towards_the_centre():
    g = GridSearch(1, 3, 0)
    g.record({(-1,): 0.5, (0,): 0.5, (1,): 0.9})
    assert g.best() == (0,)
    g = GridSearch(1, 3, 0)
    g.record({(-1,): 0.5, (0,): 0.9, (1,): 0.5})
    assert g.best() == (-1,)  # then the first in order
    g = GridSearch(2, 3, 0)
    g.record({p: 0.5 if p in ((-1, 1), (0, 1)) else 0.9 for p in g.pending})
    assert g.best() == (0, 1)


def test_grid_insensitive_only_when_every_point_ties():
    g, _ = _search(lambda p: 0.5)
    assert g.insensitive() and g.best() == (0,) and g.edges() == [] and len(g.tried) == 3
    g, _ = _search(lambda p: 0.5 * (1 + 0.4 * TIE_RTOL * p[0]))
    assert g.insensitive()
    g, _ = _search(lambda p: 0.5 * (1 + TIE_RTOL * p[0]))
    assert not g.insensitive()  # spread 2 TIE_RTOL relative
    g, _ = _search(lambda p: -1.0 * (1 + 0.4 * TIE_RTOL * p[0]))  # relative to the magnitude of negative scores
    assert g.insensitive()
    g, _ = _search(lambda p: 1e-301 * (p[0] + 1))  # tiny scores that differ do not tie
    assert not g.insensitive()
    g, _ = _search(lambda p: None if p[0] == 1 else 0.5, max_ext=0)  # a diverged point: not insensitive
    assert not g.insensitive()
    g, _ = _search(lambda p: 0.5, points=2, max_ext=0)  # two points are enough to tie
    assert g.insensitive() and g.best() == (0,) and len(g.tried) == 2
    g, _ = _search(lambda p: 1e9 - p[0], points=2, max_ext=0)  # spread exactly TIE_RTOL x the largest: a tie
    assert 1e9 - (1e9 - 1) == TIE_RTOL * 1e9 and g.insensitive()
    g, _ = _search(lambda p: 0.5, points=1, max_ext=0)  # one point: nothing to tie with
    assert not g.insensitive() and g.best() == (0,) and g.edges() == [(0, -1), (0, 1)]
    g = GridSearch(1, 3, 2)
    g.record({p: 0.5 for p in g.pending})
    assert g.done and g.pending == [] and g.best() == (0,)


def test_grid_flat_edge_on_the_first_of_two_axes():
    """Best (1, 0), its inner neighbour (0, 0) on axis 0 within the flat tolerance: no extension on either axis."""
    g = GridSearch(2, 3, 6, flat=0.25)
    g.record({p: 0.5 - 0.125 * p[0] + p[1] ** 2 for p in g.pending})
    assert g.best() == (1, 0) and g.done and g.edges() == []
    g = GridSearch(2, 3, 6, flat=0.1)
    g.record({p: 0.5 - 0.125 * p[0] + p[1] ** 2 for p in g.pending})
    assert g.edges() == [(0, 1)] and g.pending == [(2, -1), (2, 0), (2, 1)]


def test_grid_flat_edge_boundary():
    g = GridSearch(1, 3, 6, flat=0.25)
    g.record({(-1,): 1.0, (0,): 0.75, (1,): 0.5})  # inner neighbour exactly flat away: closed
    assert g.done and g.edges() == []
    g = GridSearch(1, 3, 6, flat=0.25)
    g.record({(-1,): 1.0, (0,): 0.75, (1,): 0.4375})
    assert g.pending == [(2,)] and g.edges() == [(0, 1)]
    g = GridSearch(1, 3, 6, flat=0.25)
    g.record({(-1,): 1.0, (0,): None, (1,): 0.5})  # a diverged inner neighbour is not flat
    assert g.pending == [(2,)]


# ------------------------------------------------------------------------------------------------ lag


def test_relative_progress():
    assert lag_module.relative_progress([1.0, 2.0, 3.0]).tolist() == [0.0, 0.5, 1.0]
    assert lag_module.relative_progress([3.0, 2.0, 1.0]).tolist() == [0.0, 0.5, 1.0]
    assert lag_module.relative_progress([2.0, 5.0, 2.0]).tolist() == [0.0, 0.0, 0.0]
    assert lag_module.relative_progress([0.0, 1.0, np.inf]).tolist() == [0.0, 0.0, 0.0]
    assert lag_module.relative_progress([0.0, 1.0, np.nan]).tolist() == [0.0, 0.0, 0.0]


def test_crossing_and_its_resolution():
    steps = [0, 10, 30, 60]
    assert lag_module.crossing(steps, [0.0, 1.0, 2.0, 4.0]) == (30, 20)  # progress exactly 1/2 at step 30
    assert lag_module.crossing(steps, [0.0, 1.0, 1.9, 4.0]) == (60, 30)
    assert lag_module.crossing(steps, [0.0, 3.0, 3.0, 4.0]) == (10, 10)
    assert lag_module.crossing(steps, [4.0, 2.0, 0.0, 0.0]) == (10, 10)  # decreasing measures too
    assert lag_module.crossing(steps, [1.0, 1.0, 1.0, 1.0]) == (None, 0)
    assert lag_module.t_half(steps, [0.0, 1.0, 2.0, 4.0]) == 30 and lag_module.t_half(steps, [1.0] * 4) is None
    assert all(type(x) is int for x in lag_module.crossing(np.array(steps), [0.0, 1.0, 2.0, 4.0]))


def test_measures_ratio_and_resolution():
    alpha = [0.0, 0.0, 0.0, 1.0, 2.0]  # t_half 3 (progress 1/2 at index 3), resolution 1
    beta = [0.0, 2.0, 2.0, 2.0, 2.0]  # t_half 1
    func = {"steps": [0, 4, 8, 12], "gain_att": [0.0, 0.0, 1.0, 1.0], "gain_out": [0.0, 1.0, 1.0, 1.0]}
    align = {"steps": [0, 2, 6], "att": [0.0, 0.0, 1.0], "out": [0.0, 1.0, 1.0]}
    got = lag_module.measures(list(range(5)), alpha, beta, func, align)
    assert got == {"displacement": {"t_half_att": 3, "t_half_out": 1, "resolution": 1, "ratio": 3.0},
                   "function": {"t_half_att": 8, "t_half_out": 4, "resolution": 4, "ratio": 2.0},
                   "alignment": {"t_half_att": 6, "t_half_out": 2, "resolution": 4, "ratio": 3.0}}
    got = lag_module.measures(list(range(5)), beta, alpha, func, None)
    assert set(got) == {"displacement", "function"} and got["displacement"]["ratio"] == 1 / 3
    # a block that never moves: no t_half, no ratio; an output crossing at step 0 cannot divide
    got = lag_module.measures(list(range(5)), [0.0] * 5, beta, func, None)
    assert got["displacement"] == {"t_half_att": None, "t_half_out": 1, "resolution": 1, "ratio": None}
    got = lag_module.measures(list(range(5)), beta, [0.0] * 5, func, None)
    assert got["displacement"]["ratio"] is None


def test_functional_curves_reset_one_block_of_the_final_model():
    """R(alpha_t, B_t), R(alpha_t, B_end) and R(alpha_end, B_t) on a small exact population, against the
    engine's risk of each pair; more than 16 pairs, so the evaluation runs in chunks."""
    d = 6
    cfg = runner.Config.quick(tasks=("occurrence",), d=d)
    test = runner.make_data(runner.Row.of(cfg, "occurrence"), 0).test
    rng = np.random.default_rng(1)
    steps = [0, 3, 5, 9, 12, 20, 31]
    snaps = {s: (rng.standard_normal((1, d)), rng.standard_normal((1, d, 1))) for s in steps}
    got = lag_module.functional_curves(snaps, steps, test, "squared")
    aT, bT = snaps[31]

    def R(a, b):
        return float(engine.risk(a[None], b[None], test, "squared")[0])

    full = [R(*snaps[s]) for s in steps]
    att = [R(snaps[s][0], bT) for s in steps]
    out = [R(aT, snaps[s][1]) for s in steps]
    assert got["steps"] == steps
    np.testing.assert_allclose(got["risk"], full, rtol=1e-12)
    np.testing.assert_allclose(got["risk_attention_at_t"], att, rtol=1e-12)
    np.testing.assert_allclose(got["risk_output_at_t"], out, rtol=1e-12)
    np.testing.assert_allclose(got["gain_att"], [att[0] - x for x in att], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got["gain_out"], [out[0] - x for x in out], rtol=1e-12, atol=1e-14)
    assert got["risk"][-1] == got["risk_attention_at_t"][-1] == got["risk_output_at_t"][-1]
    got = lag_module.functional_curves(snaps, steps, test, "logistic")  # the loss is passed on
    assert got["risk"][0] == pytest.approx(float(engine.risk(snaps[0][0][None], snaps[0][1][None], test, "logistic")[0]),
                                           rel=1e-12)


def test_functional_curves_hold_sixteen_models_at_a_time_not_all_of_them(monkeypatch):
    """At d = 200 ICL's 3n models would hold 0.8 GB at once: the curves stack 16 of them at a time, so the
    memory beyond the snapshots does not grow with their number (the risk itself is stubbed out here; its
    values are checked by the test above)."""
    import tracemalloc
    rng = np.random.default_rng(2)
    snaps = {s: (rng.standard_normal((1, 6)), rng.standard_normal((1, 6, 400))) for s in range(120)}
    one = sum(a.nbytes + b.nbytes for a, b in snaps.values()) / len(snaps)
    sizes = []

    def risk(alphas, Bs, test, loss):
        sizes.append(len(alphas))
        return np.zeros(len(alphas))

    monkeypatch.setattr(lag_module.engine, "risk", risk)
    tracemalloc.start()
    try:
        got = lag_module.functional_curves(snaps, sorted(snaps), None, "squared")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sum(sizes) == 360 and max(sizes) == 16 and len(got["risk"]) == 120
    assert peak < 40 * one  # all 3 x 120 models stacked would be 360 of them


def test_alignment_with_the_ground_truth_directions():
    d = 5
    alpha = np.array([[3.0, 1.0, 0.0, 2.0, 4.0]])  # unmarked mean of occurrence: (1 + 0 + 2 + 4) / 4 = 1.75
    B = np.array([[[2.0], [0.0], [1.0], [1.0], [2.0]]])
    assert lag_module.alignment("occurrence", d, alpha, B) == (1.25, 1.0)
    # OR marks two symbols: gaps (3 - 2, 1 - 2) for attention and (2 - 4/3, 0 - 4/3) for the readout
    assert lag_module.alignment("OR", d, alpha, B) == pytest.approx((0.0, -1 / 3), abs=1e-15)
    two = np.concatenate([alpha, 2 * alpha])
    assert lag_module.alignment("occurrence", d, two, np.concatenate([B, B])) == (3.75, 2.0)  # summed over heads
    assert lag_module.alignment("AND", d, alpha, B) is None
    assert lag_module.alignment("parity", d, alpha, B) is None
    # ICL: the previous-token-is-trigger score minus the other previous-token scores; the readout's diagonal
    # minus its off-diagonal mean
    d = 3
    a = np.array([[9.0, 9.0, 9.0, 5.0, 1.0, 2.0]])
    top = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
    Bi = np.concatenate([top, np.full((2, 3), 100.0)])[None]  # rows below the d x d block do not count
    # diagonal mean 5, off-diagonal mean (45 - 15) / 6 = 5
    assert lag_module.alignment("ICL", d, a, Bi) == (3.5, 0.0)
    Bi[0, 0, 0] = 4.0  # diagonal mean 6, off-diagonal still 5
    assert lag_module.alignment("ICL", d, a, Bi) == pytest.approx((3.5, 1.0), abs=1e-14)
    # SLR: cosines with k* and v*, summed over heads; a zero head contributes 0
    k, v = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    aS = np.array([[3.0, 4.0], [0.0, 0.0]])
    bS = np.array([[[0.0], [2.0]], [[1.0], [0.0]]])
    assert lag_module.alignment("SLR", 2, aS, bS, {"k": k, "v": v}) == pytest.approx((0.6, 1.0), abs=1e-15)
    assert lag_module.alignment("SLR", 2, aS, bS) is None
    # three coordinates and two heads (so heads and coordinates cannot be confused), norms below 1
    k3, v3 = np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])
    a3 = np.array([[0.3, 0.4, 0.0], [0.0, 0.0, 0.0]])
    b3 = np.array([[[0.0], [0.2], [0.0]], [[0.1], [0.0], [0.0]]])
    assert lag_module.alignment("SLR", 3, a3, b3, {"k": k3, "v": v3}) == pytest.approx((0.6, 1.0), abs=1e-15)
    # two heads of ICL: each head's readout against its own diagonal and off-diagonal
    a2 = np.concatenate([a, [[0.0, 0.0, 0.0, 2.0, 2.0, 2.0]]])
    assert lag_module.alignment("ICL", 3, a2, np.concatenate([Bi, 2 * Bi])) == pytest.approx((3.5, 3.0), abs=1e-14)
    # three heads of OR (two marked symbols: more heads than marked symbols)
    three = np.concatenate([alpha, 2 * alpha, 0 * alpha])
    assert lag_module.alignment("OR", 5, three, np.concatenate([B, 2 * B, 0 * B])) == pytest.approx((0.0, -1.0), abs=1e-14)


def test_alignment_curves():
    d = 5
    snaps = {s: (np.full((1, d), float(s)), np.full((1, d, 1), float(s))) for s in (0, 1, 2)}
    snaps[2][0][0, 0] = 5.0
    got = lag_module.alignment_curves("occurrence", d, snaps, [0, 2])
    assert got == {"steps": [0, 2], "att": [0.0, 3.0], "out": [0.0, 0.0]}
    assert lag_module.alignment_curves("AND", d, snaps, [0, 2]) is None
    assert lag_module.alignment_curves("occurrence", d, snaps, [2]) == {"steps": [2], "att": [3.0], "out": [0.0]}
    # d and the task's extra data are passed on (ICL reads d, SLR its directions)
    top = np.array([[4.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
    icl = {0: (np.zeros((1, 6)), np.zeros((1, 5, 3))),
           1: (np.array([[9.0, 9.0, 9.0, 5.0, 1.0, 2.0]]), np.concatenate([top, np.zeros((2, 3))])[None])}
    got = lag_module.alignment_curves("ICL", 3, icl, [0, 1])
    assert got["att"] == [0.0, 3.5] and got["out"] == pytest.approx([0.0, 1.0], abs=1e-14)
    slr = {0: (np.array([[0.3, 0.4]]), np.array([[[0.0], [2.0]]]))}
    got = lag_module.alignment_curves("SLR", 2, slr, [0], {"k": np.array([1.0, 0.0]), "v": np.array([0.0, 1.0])})
    assert got["att"] == pytest.approx([0.6]) and got["out"] == [1.0]
