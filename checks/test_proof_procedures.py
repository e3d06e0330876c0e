"""The proof procedures of theory/proofs.py on false variants of their claims, each failing at the step in question.

checks/test_proofs_all_d.py runs every procedure on its claim (PASS) and on one false variant (FAIL).  A step that
no such variant reaches could be weakened unseen; mutmut's sample of the procedures' mutants (docs/mutation.md,
"The proof procedures (a sample)") found such steps, and each test here reaches one.  Some steps guard against a
derivation of theory.symbolic that is not what it is now (a P(y = -1) that is not a Moebius function of p, a risk
that is not a quadratic in beta): those tests replace the derivation, for the test only (``derived``), by a false
or a different one and clear the proofs' caches before and after.

Each test calls the procedure itself (mutmut credits a call made in a module fixture to the first test using it).
"""
from __future__ import annotations

import pytest
import sympy as sp

from theory import proofs as P

d, p, x = P.sym.d, P.sym.p, P.X


@pytest.fixture
def derived(monkeypatch):
    """``derived(name, expr)``: theory.symbolic's derivation ``name`` returns ``expr`` for the rest of the test."""

    def use(name, expr):
        monkeypatch.setattr(P.sym, name, lambda *args, **kwargs: expr)
        P.clear_caches()

    P.clear_caches()
    yield use
    P.clear_caches()  # before monkeypatch restores the derivations: no proof of a replaced one stays cached


def _step(result, start):
    """The one step of ``result`` that starts with ``start``."""
    found = [s for s in result.steps if s.startswith(start)]
    assert len(found) == 1, (start, result.steps)
    return found[0]


# ----------------------------------------------------------------------------------------------
# prove_balancing_p


def test_balancing_p_states_each_step_it_showed():
    P.clear_caches()
    r = P.prove_balancing_p()
    assert r.passed
    assert _step(r, "0 < p = ").endswith(": shown")


def test_balancing_root_outside_0_1_fails_at_the_range_step(derived):
    """P(y = -1) = p x / (p x + x + 1) (x = d - 1) is Moebius with its 1/2-root at p = d/(d-1) > 1: the gap and
    the uniqueness steps hold, and only the range step 0 < p < 1 (its p < 1 half) refuses it."""
    derived("prob_no_marked", p * (d - 1) / (p * (d - 1) + d))
    r = P.prove_balancing_p(d / (d - 1))
    assert not r.passed
    assert r.steps[0].endswith("simplifies to 0")
    assert _step(r, "0 < p = ").endswith(": not shown")
    assert _step(r, "P(y=-1) = ").endswith(": shown")


def test_balancing_p_refuses_a_non_moebius_p_with_two_roots(derived):
    """P(y = -1) = 1/2 + (p x - 1)(p x - 2) / (2 x^2) has the 1/2-roots p = 1/x and p = 2/x, both in (0, 1) for
    d > 3: p = 1/x is not the only root.  Its numerator is quadratic in p: no Moebius argument applies (not even
    one that reads only the linear and constant coefficients), so uniqueness is not shown."""
    derived("prob_no_marked", sp.Rational(1, 2) + (p * (d - 1) - 1) * (p * (d - 1) - 2) / (2 * (d - 1) ** 2))
    r = P.prove_balancing_p(1 / (d - 1))
    assert not r.passed
    assert r.steps[0].endswith("simplifies to 0") and _step(r, "0 < p = ").endswith(": shown")
    assert r.steps[-1] == "P(y=-1) is not a Moebius function of p: uniqueness not shown"


def test_balancing_p_proves_an_affine_p(derived):
    """P(y = -1) = (p + 1)(d - 1) / (2 d) is Moebius with c = 0 (an affine function, determinant a e = x (2x + 2)
    nonzero): p = 1/(d - 1) is its only 1/2-root, and the proof must show it (the determinant a e - b c read
    with the right coefficients)."""
    derived("prob_no_marked", (p + 1) * (d - 1) / (2 * d))
    r = P.prove_balancing_p(1 / (d - 1))
    assert r.passed, r.steps
    assert _step(r, "P(y=-1) = ").endswith(": shown")
