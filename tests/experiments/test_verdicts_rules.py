"""The decision rules of ``verdicts`` on synthetic seed sets: "matches" as non-inferiority against a margin
fixed in advance (a bimodal or wide seed set is undecided, never a match by its spread), the lag band at its
edges, the combination of repeated tuning draws, and the claims a row's model class cannot test."""
from __future__ import annotations

import statistics

import numpy as np

from numerics.experiments import verdicts
from tests.experiments.test_verdicts import _ep, _lag, _row, _stat


def _seeds(values):
    """Risk statistics of a seed set with its per-seed values, as ``runner`` records them."""
    return {"mean": float(np.mean(values)), "std": float(np.std(values, ddof=1)), "n": len(values),
            "values": list(values)}


def _match(three, joint, output_only=0.25, **changes):
    row = _row("SLR", **{"plans.three_phase.risk": _seeds(three), "plans.joint.risk": _seeds(joint),
                         "plans.output_only.risk": _stat(output_only), **changes})
    return {v["claim"]: v for v in verdicts.assess({"rows": {"SLR": row}})}["three-phase matches joint GD"]


SLR_THREE = [0.014, 0.212, 0.019, 0.245, 0.233]
"""Three-phase on five seeds, three of them at the output-only level: bimodal."""
SLR_JOINT = [0.017, 0.0171, 0.0169, 0.017, 0.017]


def test_a_bimodal_seed_set_does_not_match_by_its_spread():
    """Excess 0.128 with 3 SE 0.158 against the margin 0.1 x 0.233: a margin of max(3 SE, share x effect) would
    call it a match; the interval [-0.03, 0.285] straddles the margin, so it is undecided, with its count."""
    v = _match(SLR_THREE, SLR_JOINT)
    assert v["verdict"] == "undecided"
    assert v["excess"] > v["margin"] and v["interval"][0] < v["margin"] < v["interval"][1]
    assert v["seeds_within"] == [2, 5] and "2/5 seeds within margin" in v["evidence"]
    assert "bimodal" not in v["evidence"]
    v = _match(SLR_THREE, SLR_JOINT, **{"plans.three_phase.bimodal": True})
    assert v["evidence"].endswith("; bimodal seeds: three phase") and v["verdict"] == "undecided"


def test_a_straddling_seed_set_is_undecided_and_a_clear_one_is_decided():
    # every seed at the output-only level: clearly not a match (lower bound above the margin)
    v = _match([0.21, 0.22, 0.23, 0.22, 0.22], SLR_JOINT)
    assert v["verdict"] == "does not hold" and v["seeds_within"] == [0, 5]
    # a clear match: every seed within 0.005 of joint, the margin 0.0233
    v = _match([0.018, 0.02, 0.019, 0.021, 0.02], SLR_JOINT)
    assert v["verdict"] == "holds" and v["seeds_within"] == [5, 5]
    assert v["interval"][1] <= v["margin"]
    # the same mean excess with a wide spread: straddles
    spread = [0.0, 0.04, 0.0, 0.04, 0.015]
    assert statistics.mean(spread) < 0.017 + 0.0233
    v = _match(spread, SLR_JOINT)
    assert v["verdict"] == "undecided" and v["interval"][0] < v["margin"] < v["interval"][1]


def test_a_plan_clearly_better_than_its_reference_matches_and_does_not_fall_short():
    v = _match([0.001, 0.002, 0.001, 0.0015, 0.001], [0.2, 0.21, 0.19, 0.2, 0.2], output_only=0.5)
    assert v["excess"] < 0 and v["verdict"] == "holds"
    row = _row("AND", **{"plans.three_phase.risk": _seeds([0.001, 0.002, 0.001]),
                         "plans.joint.risk": _seeds([0.2, 0.21, 0.19]), "plans.output_only.risk": _stat(0.5)})
    got = {v["claim"]: v["verdict"] for v in verdicts.assess({"rows": {"AND": row}})}
    assert got["three-phase falls short of joint GD"] == "does not hold"


def test_the_count_falls_back_to_the_seeds_test_risk_and_is_absent_without_either():
    row = _row("SLR", **{"plans.three_phase.seeds": [{"test_risk": 0.01, "curve": {"risk": [0.5]}},
                                                     {"test_risk": 0.3, "curve": {"risk": [0.5]}}]})
    assert verdicts.seeds_within(row, "three_phase", "joint", 0.029) == (1, 2)
    assert verdicts.seeds_within(_row("SLR"), "three_phase", "joint", 0.029) is None
    # within: risk minus the reference mean at most the margin (on it counts)
    row = _row("SLR", **{"plans.three_phase.risk": _seeds([0.25, 0.5]), "plans.joint.risk": _stat(0.125)})
    assert verdicts.seeds_within(row, "three_phase", "joint", 0.125) == (1, 2)


def test_the_band_at_its_edges():
    lo, hi = verdicts.LAG_BAND
    assert (lo, hi) == (0.8, 1.25)
    up, down = float(np.nextafter(hi, 2)), float(np.nextafter(lo, 0))
    assert verdicts.lag_outcome(lo, hi) == "no appreciable lag"
    assert verdicts.lag_outcome(1.0, 1.0) == "no appreciable lag"
    assert verdicts.lag_outcome(down, hi) == "undecided"
    assert verdicts.lag_outcome(lo, up) == "undecided"
    assert verdicts.lag_outcome(up, 3.0) == "attention lags"
    assert verdicts.lag_outcome(hi, 3.0) == "undecided"  # touching 1.25 is not above the band
    assert verdicts.lag_outcome(0.1, down) == "attention leads"
    assert verdicts.lag_outcome(0.1, lo) == "undecided"
    assert verdicts.lag_outcome(0.5, 2.0) == "undecided"


def test_a_precise_small_lag_is_no_appreciable_lag_not_a_lag():
    """ICL at d = 50 in the issue: function ratio 1.06 +- 0.018 over five seeds decided "holds" as a resolved
    lag; against the band it is no appreciable lag."""
    row = _row("ICL", **{"lag.function": _lag(_stat(530.0, 10.0, 5), _stat(500.0, 10.0, 5), _stat(1.06, 0.018, 5), 1)})
    v = verdicts.lag_verdict(row, "function")
    assert (v["verdict"], v["outcome"]) == ("does not hold", "no appreciable lag")
    row["lag"]["function"]["ratio"] = _stat(0.981, 0.002, 5)
    assert verdicts.lag_verdict(row, "function")["outcome"] == "no appreciable lag"


def test_rules_are_recorded_with_their_constants():
    r = verdicts.rules()
    assert (r["z"], r["match_share"], r["lag_band"]) == (3.0, 0.1, [0.8, 1.25])
    assert r["attention_only_readout_min"] == 0.1
    # the comparisons state the margin's own interval and which of its bounds each decision is against
    assert "interval" in r["margin"] and "floored at 0" in r["margin"]
    assert r["matches"].startswith("non-inferiority: holds when excess + z SE + slack <= the margin's lower bound")
    assert "> the margin's upper bound" in r["matches"]
    assert r["falls_short"].startswith("superiority: holds when excess - z SE - slack > the margin's upper bound")
    assert "<= the margin's lower bound" in r["falls_short"]


# ------------------------------------------------------------------------------------------------ tuning draws


def _results(*rows, draws=()):
    return {"rows": {r["name"]: r for r in rows}, "tuning_draws": [{"rows": {r["name"]: r for r in d}} for d in draws]}


def _by_claim(results):
    return {v["claim"]: v for v in verdicts.assess(results)}


MATCH, LAG = "three-phase matches joint GD", "attention lags output under joint GD (displacement)"


def test_one_draw_is_one_of_one():
    got = _by_claim({"rows": {"occurrence": _row()}})
    assert got[MATCH]["verdict"] == "holds" and got[MATCH]["draws_agreeing"] == "1/1"
    assert got[MATCH]["draw_verdicts"] == ["holds"]


def test_draws_that_agree_keep_the_verdict():
    got = _by_claim(_results(_row(), draws=[[_row()], [_row()]]))
    assert got[MATCH]["verdict"] == "holds" and got[MATCH]["draws_agreeing"] == "3/3"
    assert got[LAG]["verdict"] == "holds" and got[LAG]["draws_agreeing"] == "3/3"
    assert verdicts.exit_status([got[MATCH], got[LAG]]) == "done"


def test_draws_that_disagree_depend_on_tuning():
    worse = _row(**{"plans.three_phase.risk": _stat(0.2)})
    got = _by_claim(_results(_row(), draws=[[worse], [_row()]]))
    v = got[MATCH]
    assert v["verdict"] == "depends on tuning" and v["draws_agreeing"] == "2/3"
    assert v["draw_verdicts"] == ["holds", "does not hold", "holds"]
    assert v["evidence"].endswith("tuning draws: draw 1 holds, draw 2 does not hold, draw 3 holds")
    assert got[LAG]["verdict"] == "holds"  # the draws agree on the lag
    assert verdicts.exit_status(list(got.values())) == "undecided"
    # the reported draw in the minority: the count is of the draws giving its verdict
    got = _by_claim(_results(worse, draws=[[_row()], [_row()]]))
    assert got[MATCH]["draws_agreeing"] == "1/3" and got[MATCH]["verdict"] == "depends on tuning"


def test_one_refused_draw_leaves_the_verdict_open_and_says_why():
    edge = _row(**{"plans.joint.search": {"all_diverged": False, "edge": ["out high"], "insensitive": False}})
    got = _by_claim(_results(_row(), draws=[[_row()], [edge]]))
    for claim in (MATCH, LAG):
        v = got[claim]
        assert v["verdict"] == "depends on tuning" and v["draw_verdicts"] == ["holds", "holds", "refused"]
        assert "draw 3: joint: chosen step at an untried grid edge (out high)" in v["reasons"]
    # a draw without the row is "not run": the claim is refused, and the draw never counts as agreeing
    got = _by_claim(_results(_row(), draws=[[_row("OR")]]))
    assert got[MATCH]["draw_verdicts"] == ["holds", "not run"] and got[MATCH]["verdict"] == "refused"
    assert got[MATCH]["draws_agreeing"] == "1/2" and "draw 2" in got[MATCH]["reasons"][0]
    got = _by_claim(_results(edge, draws=[[_row("OR")]]))
    assert got[MATCH]["verdict"] == "refused" and got[MATCH]["draws_agreeing"] == "1/2"
    # every draw refused: refused, with the reported draw's reasons
    got = _by_claim(_results(edge, draws=[[edge]]))
    assert got[MATCH]["verdict"] == "refused" and got[MATCH]["draws_agreeing"] == "2/2"


# ------------------------------------------------------------------------------------------------ testable


COMPETITIVE = "attention-only is competitive (matches three-phase)"


def _and(**changes):
    return _row("AND", **changes)


def test_attention_only_on_and_is_testable_only_with_an_order_one_fixed_readout():
    ok, why = verdicts.testable(_and(), COMPETITIVE)
    assert not ok and "scale 0.01" in why
    assert "scale 0)" in verdicts.testable(_and(heads=1), COMPETITIVE)[1]   # one head starts at zero
    got = _by_claim({"rows": {"AND": _and()}})
    assert got[COMPETITIVE]["verdict"] == "not testable"
    assert got[COMPETITIVE]["reasons"][0].startswith("attention-only trains from the row's start readout")
    assert got["three-phase falls short of joint GD"]["verdict"] == "does not hold"  # the other claims are judged
    assert verdicts.exit_status(list(got.values())) == "undecided"
    for scale, want in ((0.1, "holds"), (1.0, "holds"), (0.09, "not testable"), (0.01, "not testable")):
        row = _and(model_class={"attention_only_readout": "fixed", "attention_only_readout_scale": scale})
        assert _by_claim({"rows": {"AND": row}})[COMPETITIVE]["verdict"] == want, scale
    # a start readout of order one is not a fixed one: it moves under no plan but is not the claim's readout
    row = _and(model_class={"attention_only_readout": "small", "attention_only_readout_scale": 0.5})
    assert _by_claim({"rows": {"AND": row}})[COMPETITIVE]["verdict"] == "not testable"
    # the key concerns AND only: other tasks' claims are testable whatever it says
    assert verdicts.testable(_row("OR"), COMPETITIVE) == (True, "")


def test_even_pairs_lag_claims_are_testable_only_where_no_single_token_carries_the_label():
    near = "attention grows almost as fast as the output under joint GD (displacement: ratio interval inside [0.8, 1.25])"
    least = "the lag is least on even pairs (displacement: smallest t_half ratio of all rows)"
    other = _row("occurrence", **{"lag.displacement": _lag(_stat(40.0), _stat(10.0), _stat(4.0), 1)})
    for mc, want in (({}, "not testable"), (None, "not testable"), ({"label_in_single_token": True}, "not testable"),
                     ({"label_in_single_token": False}, "holds")):
        ep = _ep(_stat(1.0))
        ep["model_class"] = mc
        if mc is None:
            del ep["model_class"]
        got = {v["claim"]: v for v in verdicts.assess({"rows": {"even_pairs": ep, "occurrence": other}})}
        assert got[near]["verdict"] == want and got[least]["verdict"] == want, mc
        # the lag claim itself stays testable
        lag_ep = [v for v in verdicts.assess({"rows": {"even_pairs": ep}}) if v["claim"] == LAG]
        assert lag_ep[0]["verdict"] != "not testable"
    ep = _ep(_stat(1.0))
    del ep["model_class"]
    ok, why = verdicts.testable(ep, near)
    assert not ok and "'query' embedding the first token alone carries it" in why


def test_a_row_recorded_before_its_model_class_takes_the_runs_embedding():
    """Even-pairs rows recorded before rows carried their model class are judged under the embedding the run
    configured: 'adjacent' carries the label in no single token (the claims are testable), 'query' in the
    first token (they are not), and a run that names none used 'query'."""
    row = _row("even_pairs")
    row.pop("model_class", None)
    for config, want in (({"even_pairs_embedding": "adjacent"}, True), ({"even_pairs_embedding": "query"}, False),
                         ({}, False)):
        filled = verdicts.with_model_class(row, config)
        assert verdicts.testable(filled, verdicts.NEAR_ONE)[0] is want, config


def test_one_seed_of_a_sampled_row_decides_nothing():
    """A sampled row with one seed has no spread: its comparisons and lag are undecided; an exact row's one
    seed is its whole population and decides."""
    for exact, want in ((False, "undecided"), (True, "holds")):
        row = _row(exact=exact)
        for p in row["plans"].values():
            p["risk"] = {**p["risk"], "n": 1, "std": 0.0}
        got = _by_claim({"rows": {"r": row}})
        assert got[MATCH]["verdict"] == want, exact
        if not exact:
            assert got[MATCH]["reasons"] == [verdicts.ONE_SEED]
