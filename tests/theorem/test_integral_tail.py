"""The integral representation's tail target is relative to the integral: J_{j,k}(u) is of order u^-(k+1) for
u > 1, so the tail beyond the cut-off V is bounded by 2^-bits u^-(k+1), not by 2^-bits.  An absolute target
keeps every ball an enclosure but loses digits: up to (k+1) log2(u) bits of J_{k+1,k}, which the Taylor models
use up to k = order + 3.  The loss shows where the cut-off is set by the target, u up to about e^5 (beyond,
V = 1 already puts the tail far below any target)."""
import pytest
from flint import arb

from numerics.contexts import ArbContext
from numerics.theorem.integral import IntegralEvaluator
from theory.setting import Setting

PREC = 132
"""The working bits of the default evaluator: 30 digits and 32 guard bits."""
ORDERS = range(9)
"""J_{m+1,m} for the m a Taylor model of order 5 uses."""
GAPS = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0)


def _integrals(tail_bits=None):
    """(gap, m, u, J_{m+1,m}(u)) over GAPS and ORDERS, by an evaluator at PREC bits."""
    ev = IntegralEvaluator(Setting(50), prec_bits=PREC, tail_bits=tail_bits)
    with ArbContext(PREC) as ctx:
        _, qpi, x, X, _ = ev._constants(ctx)
        for gap in GAPS:
            u = arb(gap).exp()
            for m in ORDERS:
                yield gap, m, u, ev._integral(m + 1, m, u, qpi, x, X, PREC)


def test_the_integrals_keep_the_working_digits_at_large_attention_gaps():
    """At every u the ball's radius is within a few bits of 2^-PREC relative to its value (an unscaled tail
    target loses 12 bits of J_{6,5} at u = e^2 and 21 bits of J_{9,8} at u = e^3)."""
    worst = max((float(J.rad()) / abs(float(J.mid())), gap, m) for gap, m, _, J in _integrals())
    assert worst[0] < 2.0 ** -(PREC - 16), worst


@pytest.mark.parametrize("tail_bits", [20, 40])
def test_a_short_range_tail_is_bounded_relative_to_the_integral(tail_bits):
    """With tail_bits b, the radius (the tail bound plus the integration's 2^-PREC) is at most 2^-b u^-(k+1)
    for u > 1: scaled back by u^(k+1), as the risk and gradients use it, the tail costs at most b bits."""
    for gap, m, u, J in _integrals(tail_bits):
        scaled = J.rad() * u.upper() ** (m + 1)
        assert scaled <= 2.0 ** -tail_bits * (1 + 2.0 ** -20), (gap, m, float(scaled))
        assert J.rad() > 0 and J.mid() > 0
