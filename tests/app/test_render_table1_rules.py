"""Table 1 pages state the decision rules the verdicts are judged by, OR's identity with occurrence at d/2,
and how many tuning draws give each verdict."""
from __future__ import annotations

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
