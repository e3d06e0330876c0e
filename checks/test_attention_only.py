"""Check of the claim ``attention_only`` of theory/claims.py (its statement is printed by
``python3 -c "from theory.claims import claim; print(claim('attention_only'))"`` and rendered in README.md).

At beta = 0 the output f is 0 whatever alpha is, and df/dalpha_k = w_k (beta_k - f) = 0: the attention
gradient vanishes identically (1/2 for the squared loss, log 2 for the logistic loss stays the risk).
"""
from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from checks.strategies import evaluator, examples, lengths_st
from numerics.theorem.training import Trainer, attention_only
from theory.claims import claim

CLAIM = claim("attention_only")

losses = st.sampled_from(["squared", "logistic"])


@given(d=st.integers(2, 30), eta=st.floats(1e-3, 1e6), T=st.integers(0, 40), lengths=lengths_st, loss=losses)
@examples(30)
def test_attention_only_risk_stays_at_initial_value(d, eta, T, lengths, loss):
    initial = 0.5 if loss == "squared" else math.log(2)
    traj = Trainer(evaluator(d, lengths, loss)).run(attention_only(eta, T))
    for pt in traj.points:
        assert (pt.alpha_a, pt.alpha_b, pt.beta_a, pt.beta_b) == (0.0, 0.0, 0.0, 0.0)
        assert abs(pt.risk - initial) <= pt.risk_bound


@given(d=st.integers(3, 5), values=st.lists(st.floats(-20, 20), min_size=3, max_size=3), loss=losses)
@examples(15)
def test_attention_gradient_vanishes_at_zero_output_for_any_attention(d, values, loss):
    alpha = [values[0], values[1]] + [values[2]] * (d - 2)
    res = evaluator(d, "positive", loss).evaluate(alpha, [0.0] * d)
    assert all(g == 0.0 for g in res.grad_alpha)
    initial = 0.5 if loss == "squared" else math.log(2)
    assert abs(float(res.risk) - initial) <= res.risk_bound


def test_control_attention_gradient_is_nonzero_once_output_moved():
    """Control: the vanishing is due to beta = 0, not to the evaluator."""
    res = evaluator(4).evaluate_symmetric(0.0, 0.0, 0.25, -0.1)
    assert abs(float(res.grad_alpha[0])) > 100 * res.grad_bound
