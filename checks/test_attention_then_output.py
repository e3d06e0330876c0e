"""Check of the claim ``attention_then_output`` of theory/claims.py (its statement is printed by
``python3 -c "from theory.claims import claim; print(claim('attention_then_output'))"`` and rendered in README.md).

The output fine-tuning after the null attention step is output-only training, so the floor of
checks/test_output_only.py applies to every step, for every pair of step sizes.
"""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from checks.strategies import evaluator, examples, floor_c, lengths_st, step_st
from numerics.theorem.training import Trainer, attention_then_output, output_only, three_phase
from theory.claims import claim

CLAIM = claim("attention_then_output")


@given(d=st.integers(3, 20), eta_att=st.floats(1e-3, 1e6), eta_out=step_st, T=st.integers(0, 60), lengths=lengths_st)
@examples(30)
def test_attention_first_then_output_stays_above_the_floor(d, eta_att, eta_out, T, lengths):
    traj = Trainer(evaluator(d, lengths)).run(attention_then_output(eta_att, eta_out, T))
    c = floor_c(d, lengths)
    assert traj.points[1].phase == "attention step"
    for pt in traj.points:
        assert pt.alpha_a == 0.0 and pt.alpha_b == 0.0
        assert pt.risk + pt.risk_bound >= c


@given(d=st.integers(3, 12), eta_out=st.floats(0.05, 1.0), T=st.integers(1, 40))
@examples(15)
def test_attention_first_equals_output_only(d, eta_out, T):
    """After its (null) attention step the plan follows the output-only trajectory exactly."""
    tr = Trainer(evaluator(d))
    a = tr.run(attention_then_output(5.0, eta_out, T))
    o = tr.run(output_only(eta_out, T))
    assert [pt.risk for pt in a.points[1:]] == [pt.risk for pt in o.points]


def test_control_attention_after_an_output_step_does_move():
    """Control: swapping the order (output step first) makes the attention step effective and
    lets output fine-tuning go below c(d): it is the three-phase plan."""
    d = 5
    tr = Trainer(evaluator(d))
    traj = tr.run(three_phase(2.5, 80.0, 1.0, 60))
    assert traj.final.alpha_a > 1.0
    assert traj.final.risk + traj.final.risk_bound < floor_c(d)
