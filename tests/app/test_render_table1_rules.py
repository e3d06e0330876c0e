"""Table 1 pages state the decision rules the verdicts are judged by, OR's identity with occurrence at d/2,
and how many tuning draws give each verdict."""
from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.render import table1
from numerics.experiments import verdicts


def test_the_rules_note_states_the_constants_and_whether_they_were_recorded():
    text = table1.rules_note({"decision_rules": verdicts.rules()})
    assert "(as recorded with the results)" in text
    assert "mean ± 3 standard errors" in text and "margin 0.1 x the attention effect" in text
    assert "above [0.8, 1.25] is *attention lags*" in text
    assert "at most the margin's lower bound" in text and "above the margin's upper bound" in text
    assert "(the current rules; the results record none)" in table1.rules_note({})
    other = dict(verdicts.rules(), z=2.0)
    assert "(the current rules; the results record other rules)" in table1.rules_note({"decision_rules": other})


def test_or_is_stated_as_occurrence_at_half_d_where_it_is_reported():
    res = {"config": {"d": 50}, "rows": {"OR": {}, "occurrence": {}}}
    assert table1.identity_note(res).startswith("OR at d = 50 is occurrence at d = 25:")
    assert table1.identity_note({"config": {"d": 50}, "rows": {"occurrence": {}}}) == ""
    assert table1.identity_note({"config": {"d": 25}, "rows": {"OR": {}}}) == ""


def test_the_verdict_table_says_how_many_tuning_draws_give_a_verdict():
    v = {"row": "SLR", "claim": "three-phase matches joint GD", "verdict": "depends on tuning", "evidence": "e",
         "reasons": ["the tuning draws disagree"], "draws_agreeing": "2/3"}
    line = table1.verdict_table([v])[2]
    assert line == ("| SLR | three-phase matches joint GD | *depends on tuning* | e; the tuning draws disagree; "
                    "tuning draws giving it: 2/3 |")
    # one draw (or results that record none): nothing added
    assert table1.verdict_table([v | {"draws_agreeing": "1/1", "verdict": "holds"}])[2].endswith("| e; the tuning "
                                                                                               "draws disagree |")
    w = dict(v, verdict="not testable")
    del w["draws_agreeing"]
    assert "*not testable in this model class*" in table1.verdict_table([w])[2]


@pytest.mark.parametrize("mean, std, shown", [
    (2.21, 2.3, "2.2 ± 2.3"), (88.7, 14.0, "89 ± 14"), (69.1, 32.0, "69 ± 32"), (1.13, 0.021, "1.13 ± 0.021"),
    (0.799, 0.052, "0.799 ± 0.052"), (178.0, 0.0, "178 ± 0"), (0.003, 0.5, "0.00 ± 0.50"), (-2.21, 2.3, "-2.2 ± 2.3"),
    (0.007, 0.5, "0.01 ± 0.50"), (0.19, 0.09, "0.190 ± 0.090"), (7.0, 100.0, "10 ± 100"),
    (1474.0, 390.0, "1470 ± 390"), (12345.0, 1400.0, "12300 ± 1400"), (9.08e-07, 3.8e-07, "9.1e-07 ± 3.8e-07"),
    (9.0e-08, 1.7e-08, "9.0e-08 ± 1.7e-08"), (0.00018, 7e-05, "0.000180 ± 7.0e-05"),
    (4.1e-06, 1.3e-06, "4.1e-06 ± 1.3e-06"), (4e-06, 2.5e-05, "4e-06 ± 2.5e-05"), (1234.5, 0.5, "1230 ± 0.50"),
    (3e-9, 5e-06, "0 ± 5.0e-06"), (101.0, 7.2, "101 ± 7.2"),
])
def test_a_mean_over_seeds_keeps_no_digit_finer_than_its_spread(mean, std, shown):
    assert table1.fmt({"mean": mean, "std": std, "n": 5}) == shown


@given(st.floats(-1e6, 1e6).filter(lambda x: abs(x) > 1e-6), st.floats(1e-6, 1e6), st.sampled_from([3, 4]))
def test_the_printed_mean_is_the_mean_rounded_at_the_spreads_second_digit_or_coarser(mean, std, digits):
    """The printed mean is the mean rounded at the deviation's second significant digit, or at the mean's
    ``digits``-th where that is coarser: within half that unit of the mean, and a whole number of units."""
    text = table1.fmt({"mean": mean, "std": std, "n": 5}, digits)
    shown_mean, shown_std = (float(x) for x in text.split(" ± "))
    assert shown_std == float(f"{std:.2g}")
    unit = 10.0 ** max(math.floor(math.log10(shown_std)) - 1, math.floor(math.log10(abs(mean))) - digits + 1)
    assert abs(shown_mean - mean) <= unit / 2 * (1 + 1e-9)
    assert abs(shown_mean / unit - round(shown_mean / unit)) < 1e-6
    if shown_mean != 0 and abs(shown_mean) < 1e3:   # every digit down to that unit printed, trailing zeros too
        mantissa, _, exp = text.split(" ± ")[0].partition("e")
        decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
        assert 10.0 ** ((int(exp) if exp else 0) - decimals) == pytest.approx(unit, rel=1e-9)
