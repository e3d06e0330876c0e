"""The proof procedures of theory/proofs.py on false variants of their claims, each failing at the step in question.

checks/test_proofs_all_d.py runs every procedure on its claim (PASS) and on one false variant (FAIL).  A step that
no such variant reaches could be weakened unseen; mutmut's runs over the procedures' mutants (docs/mutation.md)
found such steps, and each test here reaches one.  Some steps guard against a derivation of theory.symbolic that
is not what it is now (a P(y = -1) that is not a Moebius function of p, a risk
that is not a quadratic in beta): those tests replace the derivation, for the test only (``derived``), by a false
or a different one and clear the proofs' caches before and after.

Each test calls the procedure itself (mutmut credits a call made in a module fixture to the first test using it).
"""
from __future__ import annotations

import sys

import pytest
import sympy as sp

from theory import proofs
d, p, x = proofs.symbolic.d, proofs.symbolic.p, proofs.X


@pytest.fixture
def derived(monkeypatch):
    """``derived(name, expr)``: theory.symbolic's derivation ``name`` returns ``expr`` for the rest of the test."""

    def use(name, expr):
        monkeypatch.setattr(proofs.symbolic, name, lambda *args, **kwargs: expr)
        proofs.clear_caches()

    proofs.clear_caches()
    yield use
    proofs.clear_caches()  # before monkeypatch restores the derivations: no proof of a replaced one stays cached


def _assert_labelled(result):
    """The result's claim, method, domain and shown text are non-empty strings (app/commands/prove.py formats them)."""
    for label in (result.claim, result.method, result.domain, result.shown):
        assert isinstance(label, str) and label, result


def _step_containing(result, part):
    """The one step of ``result`` that contains ``part``."""
    found = [s for s in result.steps if part in s]
    assert len(found) == 1, (part, result.steps)
    return found[0]


def _step(result, start):
    """The one step of ``result`` that starts with ``start``."""
    found = [s for s in result.steps if s.startswith(start)]
    assert len(found) == 1, (start, result.steps)
    return found[0]


# ----------------------------------------------------------------------------------------------
# prove_balancing_p


def test_balancing_p_states_each_step_it_showed():
    proofs.clear_caches()
    r = proofs.prove_balancing_p()
    assert r.passed
    assert _step(r, "0 < p = ").endswith(": shown")


def test_balancing_root_outside_0_1_fails_at_the_range_step(derived):
    """P(y = -1) = p x / (p x + x + 1) (x = d - 1) is Moebius with its 1/2-root at p = d/(d-1) > 1: the gap and
    the uniqueness steps hold, and only the range step 0 < p < 1 (its p < 1 half) refuses it."""
    derived("prob_no_marked", p * (d - 1) / (p * (d - 1) + d))
    r = proofs.prove_balancing_p(d / (d - 1))
    assert not r.passed
    assert r.steps[0].endswith("simplifies to 0")
    assert _step(r, "0 < p = ").endswith(": not shown")
    assert _step(r, "P(y=-1) = ").endswith(": shown")


def test_balancing_p_refuses_a_non_moebius_p_with_two_roots(derived):
    """P(y = -1) = 1/2 + (p x - 1)(p x - 2) / (2 x^2) has the 1/2-roots p = 1/x and p = 2/x, both in (0, 1) for
    d > 3: p = 1/x is not the only root.  Its numerator is quadratic in p: no Moebius argument applies (not even
    one that reads only the linear and constant coefficients), so uniqueness is not shown."""
    derived("prob_no_marked", sp.Rational(1, 2) + (p * (d - 1) - 1) * (p * (d - 1) - 2) / (2 * (d - 1) ** 2))
    r = proofs.prove_balancing_p(1 / (d - 1))
    assert not r.passed
    assert r.steps[0].endswith("simplifies to 0") and _step(r, "0 < p = ").endswith(": shown")
    assert r.steps[-1] == "P(y=-1) is not a Moebius function of p: uniqueness not shown"


def test_balancing_p_proves_an_affine_p(derived):
    """P(y = -1) = (p + 1)(d - 1) / (2 d) is Moebius with c = 0 (an affine function, determinant a e = x (2x + 2)
    nonzero): p = 1/(d - 1) is its only 1/2-root, and the proof must show it (the determinant a e - b c read
    with the right coefficients)."""
    derived("prob_no_marked", (p + 1) * (d - 1) / (2 * d))
    r = proofs.prove_balancing_p(1 / (d - 1))
    assert r.passed, r.steps
    assert _step(r, "P(y=-1) = ").endswith(": shown")


def _affine_with_root(p0):
    """P(y = -1) = (1 + p - p0) / 2: affine in p (determinant nonzero, denominator constant), its only 1/2-root p0."""
    return (1 + p - p0) / 2


@pytest.mark.parametrize("p0", [1 / (d - 2), (d - 3) / (d - 1)])
def test_balancing_p_range_is_shown_on_all_of_d_gt_2(derived, p0):
    """p0 = 1/(d - 2) is > 1 for 2 < d < 3 (its p < 1 half fails there), p0 = (d - 3)/(d - 1) is < 0 there (its
    0 < p half fails); both lie in (0, 1) for d > 3.  The gap and uniqueness steps hold; the range step must refuse
    them on all of x = d - 1 > 1 (with d = x + 1, both halves on x > 1, not x > 2), and the proof FAIL."""
    derived("prob_no_marked", _affine_with_root(p0))
    r = proofs.prove_balancing_p(p0)
    assert not r.passed
    assert r.steps[0].endswith("simplifies to 0")
    assert _step(r, "0 < p = ").endswith(": not shown")
    assert _step(r, "P(y=-1) = ").endswith(": shown")


def test_balancing_p_determinant_must_be_nonzero_on_all_of_d_gt_2(derived):
    """P(y = -1) = ((d - 3)(d - 1) p + 2) / (2 (d - 1)) is affine in p with the 1/2-root 1/(d - 1), but at d = 3 it is
    1/2 for every p: there the root is not unique.  Its determinant 2 x^2 (x - 2) vanishes at x = 2; the uniqueness
    step must refuse it (its sign read on x > 1 with d = x + 1, and every condition required), and say so."""
    derived("prob_no_marked", ((d - 3) * (d - 1) * p + 2) / (2 * (d - 1)))
    r = proofs.prove_balancing_p(1 / (d - 1))
    assert not r.passed
    assert r.steps[0].endswith("simplifies to 0") and _step(r, "0 < p = ").endswith(": shown")
    assert _step(r, "P(y=-1) = ").endswith(": not shown")


@pytest.mark.parametrize("pm, p0", [
    # denominator 2x (2p + x - 2): at p = 0 it is 2x (x - 2), negative for 2 < d < 3
    (((d - 1) ** 2 - 2 * (d - 1) + 2) / (2 * (d - 1) * (2 * p + d - 3)), 1 / (d - 1)),
    # denominator 2x - 3p: at p = 1 it is 2x - 3, negative for 2 < d < 5/2
    ((d * p + d - 2) / (2 * (d - 1) - 3 * p), 2 / (2 * d + 3)),
])
def test_balancing_p_denominator_must_keep_its_sign_on_0_1(derived, pm, p0):
    """Moebius functions with the 1/2-root p0 in (0, 1) and a nonzero determinant, whose denominator changes sign
    inside [0, 1] for some 2 < d < 3 (it is negative at p = 0 in the first, at p = 1 in the second): P(y = -1) has a
    pole there, and is not monotone on [0, 1].  The uniqueness step must refuse both (the sign at p = 0 and at p = 1,
    each on x > 1), and the proof FAIL."""
    derived("prob_no_marked", pm)
    r = proofs.prove_balancing_p(p0)
    assert not r.passed
    assert r.steps[0].endswith("simplifies to 0") and _step(r, "0 < p = ").endswith(": shown")
    assert _step(r, "P(y=-1) = ").endswith(": not shown")


def test_balancing_p_refuses_a_denominator_quadratic_in_p(derived):
    """P(y = -1) = p x / (p^2 x^2 - p x + 2) (x = d - 1) has the 1/2-roots p = 1/x and p = 2/x, both in (0, 1) for
    d > 3.  Its numerator is linear in p but its denominator is quadratic: not a Moebius function (the degree of the
    denominator in p must be checked, and be at most 1), so uniqueness is not shown."""
    derived("prob_no_marked", p * (d - 1) / (p**2 * (d - 1) ** 2 - p * (d - 1) + 2))
    r = proofs.prove_balancing_p(1 / (d - 1))
    assert not r.passed
    assert r.steps[0].endswith("simplifies to 0") and _step(r, "0 < p = ").endswith(": shown")
    assert r.steps[-1] == "P(y=-1) is not a Moebius function of p: uniqueness not shown"


@pytest.mark.parametrize("pm, p0", [
    (4 / (3 * p * (d - 1) + 5), 1 / (d - 1)),  # a = 0, b c != 0: determinant -12 x < 0 (decreasing)
    ((1 - p) * d / (2 * (d - 2) * (p + 1)), 1 / (d - 1)),  # a e = -b c: determinant 2 a e = -4 (x - 1)(x + 1) < 0
    ((p * (d - 1) - 1) / (d - 1 - p), (d + 1) / (2 * d - 1)),  # a / e = b c; its denominator at p = 2 is x - 2
])
def test_balancing_p_proves_other_moebius_functions(derived, pm, p0):
    """Moebius functions (a p + b) / (c p + e) with every coefficient nonzero or a = 0, the denominator positive on
    [0, 1], a determinant a e - b c of one sign (negative in the first two: decreasing in p), and one 1/2-root p0 in
    (0, 1): the proof must show each (every coefficient read as the right one, the determinant of either sign
    accepted, the denominator read at p = 0 and p = 1 only)."""
    derived("prob_no_marked", pm)
    r = proofs.prove_balancing_p(p0)
    assert r.passed, r.steps
    assert _step(r, "P(y=-1) = ").endswith(": shown")


def test_balancing_p_result_names_its_method_domain_and_claim():
    proofs.clear_caches()
    r = proofs.prove_balancing_p()
    assert r.passed
    _assert_labelled(r)


# ----------------------------------------------------------------------------------------------
# prove_phase1_signs


def test_phase1_signs_states_each_step_it_showed():
    proofs.clear_caches()
    r = proofs.prove_phase1_signs()
    assert r.passed
    assert _step(r, "in eta1_max = ").endswith(": shown")
    assert r.steps[-1].endswith("(= d: shown)")


def test_phase1_eta1_max_needs_1_over_d_to_be_the_largest_on_all_of_d_gt_2(derived):
    """With eta1_max = 1/Max(1/d, 1/d - (d - 3)/d^2), 1/d is the larger term only for d >= 3: on 2 < d < 3 the
    other one is, and eta1_max is not d there.  The gradient signs hold; the step '1/d exceeds the others for
    x > 1' must refuse it (on x > 1, not x > 2, and 1/d - a, not 1/d + a, is the margin), and the proof FAIL."""
    derived("eta1_max", 1 / sp.Max(1 / d, 1 / d - (d - 3) / d**2))
    r = proofs.prove_phase1_signs()
    assert not r.passed
    assert _step(r, "dR/dbeta_a(0) = ").endswith("sign -1") and _step(r, "dR/dbeta_b(0) = ").endswith("sign 1")
    assert _step(r, "in eta1_max = ").endswith(": not shown")


def test_phase1_eta1_max_is_compared_at_the_p_under_test(derived):
    """With eta1_max = 1/Max(1/d, p/2) and p = 1/2, the other term 1/4 exceeds 1/d for d > 4: eta1_max is 4 there,
    not d.  At the default p = 1/(d - 1) the comparison would hold (p/2 < 1/d), so the step must substitute the
    p under test."""
    derived("eta1_max", 1 / sp.Max(1 / d, p / 2))
    r = proofs.prove_phase1_signs(sp.Rational(1, 2))
    assert not r.passed
    assert _step(r, "dR/dbeta_a(0) = ").endswith("sign -1") and _step(r, "dR/dbeta_b(0) = ").endswith("sign 1")
    assert _step(r, "in eta1_max = ").endswith(": not shown")


def test_phase1_gradient_of_beta_a_is_signed_at_the_p_under_test(derived):
    """With dR/dbeta_a(0) = (p (d - 1) - 2)/d, negative at the default p = 1/(d - 1) but 1/d > 0 at p = 3/(d - 1),
    the claim dR/dbeta_a(0) < 0 is false at p = 3/(d - 1) (dR/dbeta_b(0) > 0 and eta1_max = d hold there): the sign
    must be read at the p under test, and the proof FAIL, saying eta1_max = d is not shown."""
    g = proofs.symbolic.zero_init_gradients(proofs.LAW)
    derived("zero_init_gradients", {**g, "grad_beta_a": (p * (d - 1) - 2) / d})
    r = proofs.prove_phase1_signs(3 / (d - 1))
    assert not r.passed
    assert _step(r, "dR/dbeta_a(0) = ").endswith("sign 1") and _step(r, "dR/dbeta_b(0) = ").endswith("sign 1")
    assert _step(r, "in eta1_max = ").endswith(": shown")
    assert r.steps[-1].endswith("(= d: not shown)")


@pytest.mark.parametrize("name, grad, signs_shown", [
    ("grad_beta_a", (3 - d) / d**2, (False, True)),
    ("grad_beta_b", (d - 3) / d**2, (True, False)),
])
def test_phase1_gradient_signs_are_shown_on_all_of_d_gt_2(derived, name, grad, signs_shown):
    """A phase-1 gradient of the right sign only for d > 3, of the wrong one for 2 < d < 3: its sign is not shown on
    x = d - 1 > 1 (it would be on x > 2), and the proof must FAIL."""
    g = proofs.symbolic.zero_init_gradients(proofs.LAW)
    derived("zero_init_gradients", {**g, name: grad})
    r = proofs.prove_phase1_signs()
    assert not r.passed
    sa, sb = _step(r, "dR/dbeta_a(0) = "), _step(r, "dR/dbeta_b(0) = ")
    assert (sa.endswith("sign -1"), sb.endswith("sign 1")) == signs_shown
    assert _step(r, "in eta1_max = ").endswith(": shown")
    assert r.steps[-1].endswith("(= d: not shown)")


def test_phase1_eta1_max_is_evaluated_at_the_p_under_test(derived):
    """With eta1_max = p (d - 1) / Max(1/d, ...) (the derived one times p (d - 1)), eta1_max is d at the default
    p = 1/(d - 1) but d (d - 1)/2 at p = 1/2, where the gradient signs and '1/d is the largest term' hold: the value
    must be taken at the p under test, and the proof FAIL."""
    derived("eta1_max", p * (d - 1) * proofs.symbolic.eta1_max(proofs.LAW))
    r = proofs.prove_phase1_signs(sp.Rational(1, 2))
    assert not r.passed
    assert _step(r, "dR/dbeta_a(0) = ").endswith("sign -1") and _step(r, "dR/dbeta_b(0) = ").endswith("sign 1")
    assert _step(r, "in eta1_max = ").endswith(": shown")
    assert r.steps[-1].endswith("(= d: not shown)")


def test_phase1_signs_result_names_its_method_domain_and_claim():
    proofs.clear_caches()
    r = proofs.prove_phase1_signs()
    assert r.passed
    _assert_labelled(r)


# ----------------------------------------------------------------------------------------------
# prove_output_floor_positive


def test_output_floor_with_a_denominator_of_no_sign_fails_at_that_step():
    """c = 1/(d - 3) is negative for 2 < d < 3: its numerator 1 is positive, its denominator x - 2 is not
    positive on x > 1, and the denominator step says so."""
    proofs.clear_caches()
    r = proofs.prove_output_floor_positive(1 / (d - 3))
    assert not r.passed
    assert _step(r, "D > 0 for x > 1").endswith(": not shown")


def test_output_floor_states_each_step_it_showed():
    """On the derived c(d) (PASS) the denominator step says it was shown, and the result names its method, domain
    and statement (app/commands/prove.py formats the domain and the method with a width: a None there would not print)."""
    proofs.clear_caches()
    r = proofs.prove_output_floor_positive()
    assert r.passed
    assert _step(r, "D > 0 for x > 1").endswith(": shown")
    _assert_labelled(r)


def test_output_floor_needs_the_numerator_positive_on_all_of_d_gt_2():
    """c = ((d - 5/2)^2 - 1/100) / d: D = 100 (x + 1) > 0 and N = 25 (2x - 3)^2 - 1 = 4 (5x - 7)(5x - 8), positive
    at x = 1+ and for x > 8/5 (so on all of x > 2, d > 3) but negative on 7/5 < x < 8/5 (d in (2.4, 2.6)).  The
    numerator step must be on x > 1, not x > 2: it refuses N (its derivative is negative at x = 1+) and the
    proof FAILs."""
    proofs.clear_caches()
    r = proofs.prove_output_floor_positive(((d - sp.Rational(5, 2)) ** 2 - sp.Rational(1, 100)) / d)
    assert not r.passed
    assert _step(r, "D > 0 for x > 1").endswith(": shown")
    assert r.steps[-1].endswith("at x = 1+ is -1: not shown >= 0"), r.steps


# ----------------------------------------------------------------------------------------------
# prove_floor_is_infimum

ba, bb = proofs.symbolic.beta_a, proofs.symbolic.beta_b


def test_floor_infimum_refuses_a_risk_that_is_not_quadratic(derived):
    """A risk of degree 3 in beta (unbounded below) on the symmetric plane: the Hessian argument does not apply,
    and the proof says so and FAILs (as a result of this claim, with its steps)."""
    derived("uniform_attention_risk", ba**3 + bb**2 + sp.Rational(1, 2))
    r = proofs.prove_floor_is_infimum(sp.Rational(1, 2))
    assert not r.passed and r.claim == "floor_is_infimum"
    assert r.steps[0].startswith("R(0, beta) is an expectation of squares")
    assert r.steps[-1] == "R(0, beta) on the symmetric plane has degree 3, not 2"
    _assert_labelled(r)


@pytest.mark.parametrize("risk, minimum", [
    ((ba - 1) ** 2 + bb**2 + sp.Rational(1, 4), sp.Rational(1, 4)),  # no beta_a beta_b term, no beta_b term
    (ba**2 + (bb - 1) ** 2 + sp.Rational(1, 4), sp.Rational(1, 4)),  # no beta_a term
    ((ba - 1) ** 2 + (ba - bb) ** 2 / 2 + 1 / d, 1 / d),
    ((ba - 1) ** 2 + bb**2 - 1, -1),  # no constant term
])
def test_floor_infimum_proves_the_minimum_of_other_convex_quadratics(derived, risk, minimum):
    """The proof on strictly convex quadratics with a known minimum, some without a cross term or a linear term:
    a missing coefficient is 0, and the minimum q0 - b.H^-1 b / 2 is found."""
    derived("uniform_attention_risk", sp.expand(risk))
    r = proofs.prove_floor_is_infimum(minimum)
    assert r.passed, r.steps
    assert _step(r, "q0 - b.H^-1 b / 2 - c(d)").endswith("identically: shown")


@pytest.mark.parametrize("risk, value", [
    (ba**2 - bb**2 + sp.Rational(1, 4), sp.Rational(1, 4)),  # a saddle: stationary value 1/4, infimum -oo
    (ba**2 + ba * bb + sp.Rational(1, 2), sp.Rational(1, 2)),  # no beta_b^2 term: det H = -1, and R -> -oo
    (ba**2 + bb + sp.Rational(1, 2), sp.Rational(1, 2)),  # linear in beta_b: det H = 0 (H singular), R -> -oo
])
def test_floor_infimum_needs_a_positive_definite_hessian(derived, risk, value):
    """A risk that is not strictly convex has no minimum: the claim 'c = inf R' is false for any c, even the
    value that q0 - b.H^-1 b / 2 gives (with the saddle's H, or with the missing beta_b^2 coefficient read as
    anything but 0: as 1, H would be positive definite).  H_11 > 0 holds; the det H step refuses it, whatever the identity step says."""
    derived("uniform_attention_risk", sp.expand(risk))
    r = proofs.prove_floor_is_infimum(value)
    assert not r.passed
    i = r.steps.index("det H > 0:")
    assert "not shown" in " ".join(r.steps[i + 1:-1]) or "could not show" in " ".join(r.steps[i + 1:-1]), r.steps
    assert r.steps[-1].startswith("H is not shown positive definite"), r.steps  # no minimiser from a singular H


def test_floor_infimum_refuses_the_floor_minus_1():
    """c(d) - 1 is not the infimum: the identity step must find q0 - b.H^-1 b / 2 - (c - 1) = 1 not zero."""
    proofs.clear_caches()
    c = proofs.symbolic.uniform_attention_min_risk(proofs.LAW)
    r = proofs.prove_floor_is_infimum(c - 1)
    assert not r.passed
    assert _step(r, "q0 - b.H^-1 b / 2 - c(d)").endswith("identically: not shown")


def test_floor_infimum_states_each_step_it_showed():
    """On the derived risk and c(d) (PASS): the hand-argued reduction to symmetric beta comes first, then the two
    Hessian steps, each shown, then the identity; and the result names its method, domain and statement
    (app/commands/prove.py formats the domain and the method with a width: a None there would not print)."""
    proofs.clear_caches()
    r = proofs.prove_floor_is_infimum()
    assert r.passed
    assert r.steps[0].startswith("R(0, beta) is an expectation of squares"), r.steps
    i, j = r.steps.index("H_11 > 0:"), r.steps.index("det H > 0:")
    assert 0 < i < j and " > 0 for x > 1" in r.steps[i + 1] and " > 0 for x > 1" in r.steps[j + 1], r.steps
    assert _step(r, "q0 - b.H^-1 b / 2 - c(d)").endswith("identically: shown")
    _assert_labelled(r)


@pytest.mark.parametrize("risk, refused, shown", [
    # H_11 = 2/(2x - 3): negative for 2 < d < 5/2 (a pole at d = 5/2), positive for d > 5/2; det H = 1
    (ba**2 / (2 * d - 5) + (2 * d - 5) * bb**2 / 4 + sp.Rational(1, 4), "H_11 > 0:", "det H > 0:"),
    # H_11 = 2; det H = 2(x - 2): negative for 2 < d < 3 (a saddle), positive for d > 3
    (ba**2 + (d - 3) * bb**2 / 2 + sp.Rational(1, 4), "det H > 0:", "H_11 > 0:"),
])
def test_floor_infimum_checks_the_hessian_on_all_of_d_gt_2(derived, risk, refused, shown):
    """Risks whose H is positive definite for d > 3 but not on part of 2 < d < 3 (negative definite, or a saddle:
    R is unbounded below there, so 1/4, the value at beta = 0, is not its infimum for every d > 2).  One Hessian
    step holds on all of x > 1; the other must be checked on x > 1, not x > 2, and refuse it."""
    derived("uniform_attention_risk", sp.expand(risk))
    r = proofs.prove_floor_is_infimum(sp.Rational(1, 4))
    assert not r.passed
    assert r.steps[r.steps.index(refused) + 1].endswith("at x = 1+ is -1: not shown >= 0"), r.steps
    assert " > 0 for x > 1: every factor positive" in r.steps[r.steps.index(shown) + 1], r.steps
    assert r.steps[-1].startswith("H is not shown positive definite"), r.steps


def test_floor_infimum_needs_a_unique_minimiser(derived):
    """R = beta_b^2 + 1/4 does not depend on beta_a: its infimum 1/4 is attained on a whole line, not at a unique
    beta, and H_11 = 0 (a missing beta_a^2 coefficient is 0, not 1): the proof must FAIL."""
    derived("uniform_attention_risk", bb**2 + sp.Rational(1, 4))
    r = proofs.prove_floor_is_infimum(sp.Rational(1, 4))
    assert not r.passed
    h11_steps = " ".join(r.steps[r.steps.index("H_11 > 0:") + 1 : r.steps.index("det H > 0:")])
    assert "could not show 0 > 0" in h11_steps, r.steps
    assert r.steps[-1].startswith("H is not shown positive definite"), r.steps


def test_floor_infimum_refuses_minus_the_floor():
    """-c(d) is not the infimum (c(d) > 0): the identity step must test q0 - b.H^-1 b / 2 - (-c) = 2 c, not
    q0 - b.H^-1 b / 2 + (-c) = 0, in both of its tests (the polynomial one and simplify)."""
    proofs.clear_caches()
    c = proofs.symbolic.uniform_attention_min_risk(proofs.LAW)
    r = proofs.prove_floor_is_infimum(-c)
    assert not r.passed
    assert _step(r, "q0 - b.H^-1 b / 2 - c(d)").endswith("identically: not shown")


def test_floor_infimum_identity_falls_back_on_simplify(derived):
    """c = (sin(d)^2 + cos(d)^2) / 4 is 1/4, the minimum of beta_a^2 + beta_b^2 + 1/4, identically; the polynomial
    identity test (_is_zero) does not see it, and simplify must be allowed to decide it on its own."""
    derived("uniform_attention_risk", ba**2 + bb**2 + sp.Rational(1, 4))
    c = (sp.sin(d) ** 2 + sp.cos(d) ** 2) / 4
    assert not proofs._is_zero(proofs._with_x(sp.Rational(1, 4) - c))  # the fallback is what this input reaches
    r = proofs.prove_floor_is_infimum(c)
    assert r.passed, r.steps
    assert _step(r, "q0 - b.H^-1 b / 2 - c(d)").endswith("identically: shown")


# ----------------------------------------------------------------------------------------------
# prove_kappa_positive_symbolic


def test_kappa_symbolic_endpoint_is_shown_on_all_of_d_gt_2():
    """Q(eta_1 = d) = Li_2(z) - z + d - 3 (z = 1 - 1/(d - 1)) is negative for d near 2 (d - 3 -> -1, Li_2(z) - z
    -> 0) and positive from d = 3 on: kappa is false on 2 < d < 3, inside the domain "all real d > 2" the proof
    states. Li_2 >= z gives Q >= x (x - 2) (x + 1) (x = d - 1), positive only for x > 2, so the endpoint step on
    x > 1 must refuse it and the proof FAIL (a step run on x > 2, d > 3, would pass it). ``_kappa_with_end`` is
    in the section of prove_kappa_positive_bnb."""
    proofs.clear_caches()
    z = 1 - 1 / (d - 1)
    r = proofs.prove_kappa_positive_symbolic(_kappa_with_end(sp.polylog(2, z) - z + d - 3))
    assert not r.passed
    assert sp.N((sp.polylog(2, z) - z + d - 3).subs(d, sp.Rational(21, 10))) < 0  # the claim is false at d = 2.1
    assert "Q(0):" in r.steps, r.steps
    i = r.steps.index("Q(0):")
    assert r.steps[i + 1].endswith("every factor positive (x = 1 + t, t > 0)")  # Q(0) > 0 is shown
    assert r.steps[-1].endswith("at x = 1+ is -1: not shown >= 0"), r.steps


def test_kappa_symbolic_reports_each_step_and_the_range_it_ran_on():
    """On 0 < eta_1 <= 10 d (false at d = 3) the proof FAILs, and its result states that range (as
    ``_range_label`` names it) and keeps every step: the linearity step, Q(0), then the endpoint."""
    proofs.clear_caches()
    r = proofs.prove_kappa_positive_symbolic(range_factor=10)
    assert not r.passed
    _assert_labelled(r)
    assert proofs._range_label(10) in r.shown
    assert r.steps[0].startswith("kappa = eta_1 Q(eta_1) / |den|")
    endpoint = f"Q(eta_1 = {proofs._range_label(10)}):"
    assert "Q(0):" in r.steps and endpoint in r.steps, r.steps
    assert r.steps.index("Q(0):") < r.steps.index(endpoint)


# ----------------------------------------------------------------------------------------------
# prove_kappa_positive_bnb


def _kappa_with_end(q_end):
    """kappa = eta_1 (1 + eta_1 (q_end(d) - 1) / d): Q(0) = 1 > 0 and Q(eta_1 = d) = q_end(d)."""
    e = proofs.symbolic.eta1
    return e * (1 + e * (q_end - 1) / d)


def test_kappa_bnb_needs_a_tail_bound_for_large_d():
    """Q(eta_1 = d) = 3/2 - Li_2(1 - 1/(d - 1)): positive for d up to 10 (the boxes certify it), negative for
    large d (Li_2 -> pi^2/6 > 3/2).  Its Li_2 coefficient is negative, so the Li_2 >= 0 tail bound does not
    apply: the proof must FAIL, not rest on the boxes alone."""
    proofs.clear_caches()
    r = proofs.prove_kappa_positive_bnb(_kappa_with_end(sp.Rational(3, 2) - sp.polylog(2, 1 - 1 / (d - 1))))
    assert not r.passed
    assert any(s.startswith("-2*x*polylog") and " > 0 on x in [2, 9]: " in s for s in r.steps), r.steps
    assert "for d >= 10: the Li_2 >= 0 bound does not apply" in r.steps


def test_kappa_bnb_pieces_are_the_boxes_from_d_3_to_10_and_the_tail_from_10():
    """The two pieces the proof reports are the ones it ran: boxes on x in [2, 9] (d in [3, 10], as its method
    says) and the tail bound from x = 9 on; together they cover the domain it states, d >= 3."""
    proofs.clear_caches()
    r = proofs.prove_kappa_positive_bnb()
    assert r.passed
    assert "pieces x in [2, 9] and x >= 9 cover every d >= 3: yes" in r.steps
    assert any(" > 0 on x in [2, 9]: " in s for s in r.steps)
    assert any(s.startswith("for d >= 10: Q >= ") for s in r.steps)
    assert r.method == "branch and bound on d in [3, 10] (arb) + asymptotic bound for d >= 10"
    assert r.domain == "all real d >= 3"


def test_kappa_bnb_tail_bound_must_be_shown_positive():
    """Q(eta_1 = d) = Li_2(z) + (21 - d)/10: positive for d up to 10 (the boxes certify it), negative for large d
    (Li_2 < pi^2/6 < 2). Its Li_2 coefficient is positive, so the tail bound applies, and it is Q >= the rest,
    which the step prints; that rest is negative for large d, and the tail step must refuse it."""
    proofs.clear_caches()
    kappa = _kappa_with_end(sp.polylog(2, 1 - 1 / (d - 1)) + (21 - d) / 10)
    r = proofs.prove_kappa_positive_bnb(kappa)
    assert not r.passed
    assert "boxes certified by arb" in _step_containing(r, " > 0 on x in [2, 9]: "), r.steps  # not the boxes' FAIL
    rest = proofs._split_li2(proofs._kappa_endpoints(kappa, 1)[1])[1]
    tail = _step(r, "for d >= 10: Q >= ")
    printed = tail[len("for d >= 10: Q >= "):].split(" (Li_2 coefficient")[0]
    bound = sp.sympify(printed, locals={"x": x})
    assert isinstance(bound, sp.Expr) and sp.expand(bound - rest) == 0, tail
    assert r.steps[-2].endswith("not shown >= 0") and r.steps[-1].startswith("pieces "), r.steps


def test_kappa_bnb_reports_each_step_and_the_range_it_ran_on():
    """On 0 < eta_1 <= 10 d (false at d = 3) the proof FAILs, its result states that range (as ``_range_label``
    names it), and it keeps every step: the linearity step and Q(0) before the boxes."""
    proofs.clear_caches()
    r = proofs.prove_kappa_positive_bnb(range_factor=10)
    assert not r.passed
    _assert_labelled(r)
    assert proofs._range_label(10) in r.shown
    assert r.steps[0].startswith("kappa = eta_1 Q(eta_1) / |den|") and "Q(0):" in r.steps
    assert r.steps.index("Q(0):") < r.steps.index(_step_containing(r, "counterexample: f("))  # the boxes' FAIL


# ----------------------------------------------------------------------------------------------
# prove_regime_positive


def test_regime_positive_states_each_step_it_showed():
    """The proof (PASS) keeps every step: B_2 and u_min first, then the bound 4 B_2 - 12 >= 0 and the two proofs it
    rests on; and it names its method, domain and statement (app/commands/prove.py formats the domain and the method with a
    width: a None there would not print)."""
    proofs.clear_caches()
    r = proofs.prove_regime_positive()
    assert r.passed
    assert r.steps[0].startswith("B_2 = ") and r.steps[0].endswith("u_min^2 = 4 B_2 / epsilon"), r.steps
    assert _step(r, "4 B_2 - 12 >= 0 for x >= 2").endswith(":")
    assert _step(r, "kappa > 0 on (0, eta1_max): ").endswith("PASS")
    assert _step(r, "eta1_max = d > 0: ").endswith("PASS")
    _assert_labelled(r)


# ----------------------------------------------------------------------------------------------
# prove_attention_only


def test_attention_only_refuses_an_unknown_loss_by_name():
    proofs.clear_caches()
    with pytest.raises(ValueError, match="'hinge'"):
        proofs.prove_attention_only("hinge")


def test_attention_only_states_a_false_value_not_shown():
    proofs.clear_caches()
    r = proofs.prove_attention_only("squared", sp.Rational(1, 3))
    assert not r.passed and r.steps[-1].endswith("= 1/3: not shown")
    r = proofs.prove_attention_only("squared")
    assert r.passed and r.steps[-1].endswith("= 1/2: shown")


def test_attention_only_default_loss_is_the_squared_loss():
    """The signature's default loss is the squared loss: called without arguments, the proof shows R(0, 0) = 1/2."""
    proofs.clear_caches()
    r = proofs.prove_attention_only()
    assert r.passed and r.steps[-1].endswith("= 1/2: shown")


# ----------------------------------------------------------------------------------------------
# li2_step_control
#
# A control is a false claim that li2_lower_bound must not prove, because of one guard in it. The tests below
# disable or loosen that guard for the test only (``patched``): the control is then (wrongly) proved, so the
# guard is what refuses it; a control that failed either way would no longer exercise the guard.


@pytest.fixture
def patched(monkeypatch):
    """``patched(name, fn)``: theory.proofs' ``name`` is ``fn`` for the rest of the test (caches cleared)."""

    def use(name, fn):
        monkeypatch.setattr(proofs, name, fn)
        proofs.clear_caches()

    proofs.clear_caches()
    yield use
    proofs.clear_caches()  # before monkeypatch restores the functions: no control run with them stays cached


def _refused_on_x_gt_1(patched, control, last_step):
    """Run ``control`` with li2_lower_bound recording its (q, x, a): the control must be refused, its last step
    ending with ``last_step``, its labels stated, and li2_lower_bound called once, on x > 1 (the domain the
    controls state). Returns the q it was called with."""
    calls, real = [], proofs.li2_lower_bound
    patched("li2_lower_bound", lambda q, xx, a: calls.append((q, xx, a)) or real(q, xx, a))
    r = control()
    assert not r.passed
    _assert_labelled(r)
    assert r.steps[-1].endswith(last_step), r.steps
    [(q, xx, a)] = calls
    assert xx == x and a == 1
    return q


def test_li2_step_control_is_false_and_only_the_coefficient_check_refuses_it(patched):
    """q = 1 - Li_2(1 - 1/x) on x > 1 is false (q(100) < 0: Li_2 -> pi^2/6 > 1). The proof refuses it at the
    Li_2 coefficient check (coefficient -1); with that check alone answering "positive" (for the test only), the
    bound q >= 1 - z = 1/x goes through and the control is proved: the check is what stops it."""
    q = _refused_on_x_gt_1(patched, proofs.li2_step_control, "not shown positive: the lower bound does not apply")
    assert sp.N(q.subs(x, 100)) < 0

    real_sign_on = proofs._sign_on

    def coefficient_check_off(expr, xx, a):
        # the caller's code object: li2_lower_bound (under mutmut, x_li2_lower_bound__mutmut_orig or a mutant)
        return 1 if "li2_lower_bound" in sys._getframe(1).f_code.co_name else real_sign_on(expr, xx, a)

    patched("_sign_on", coefficient_check_off)
    r = proofs.li2_step_control()
    assert r.passed, r.steps


# ----------------------------------------------------------------------------------------------
# li2_tight_control


def test_li2_tight_control_is_refused_only_by_the_bound_li2_ge_z(patched):
    """q = Li_2(z) - z - 1/(100 x), z = 1 - 1/x, is false near x = 1 (Li_2(z) - z ~ z^2/4 -> 0). Its Li_2
    coefficient 1 is positive, and the bound Li_2 >= z leaves q >= -1/(100 x): the positivity step refuses
    that, on x > 1, the domain the control states."""
    q = _refused_on_x_gt_1(patched, proofs.li2_tight_control, "not shown >= 0")
    assert sp.N(q.subs(x, sp.Rational(101, 100))) < 0


@pytest.mark.parametrize("excess, proved", [
    (sp.Rational(1, 100), True),  # >= 1/(100 x) on all of x > 1
    (sp.Rational(199, 20000), False),  # < 1/(100 x) for x < 200/199
    (1 / (100 * x**2), False),  # < 1/(100 x) for every x > 1
])
def test_li2_tight_control_is_proved_by_a_bound_too_large_by_its_margin(patched, excess, proved):
    """With the bound Li_2(z) >= z replaced (for the test only) by the false Li_2(z) >= z + e(x), the lower bound
    is e(x) - 1/(100 x): the control is proved when e(x) > 1/(100 x) for every x > 1 (e = 1/100), and refused when
    e is smaller somewhere (near x = 1, or everywhere): it tells Li_2 >= z from a bound too large by its margin
    1/(100 x), and from no smaller excess."""
    real_split = proofs._split_li2

    def looser(expr):
        split = real_split(expr)
        return None if split is None else (split[0], split[1] + split[0] * excess)

    patched("_split_li2", looser)
    r = proofs.li2_tight_control()
    assert r.passed is proved, r.steps


# ----------------------------------------------------------------------------------------------
# numerics.theorem.certify._alpha0_risk_coefficients (memoised: a test of it clears its cache first)


def test_alpha0_risk_coefficients_rebuild_the_symmetric_risk():
    """The coefficients {(i, j): c_ij} that ArbClosedForms.risk_alpha0 sums as c_ij beta_a^i beta_b^j are those of
    R(0, beta) on the symmetric plane: their sum is R identically, a quadratic in (beta_a, beta_b)."""
    from numerics.theorem import certify
    certify._alpha0_risk_coefficients.cache_clear()
    coeffs = certify._alpha0_risk_coefficients("positive")
    assert all(len(m) == 2 and sum(m) <= 2 for m, _ in coeffs) and (2, 0) in dict(coeffs) and (0, 2) in dict(coeffs)
    rebuilt = sum(c * ba**i * bb**j for (i, j), c in coeffs)
    assert sp.simplify(rebuilt - proofs.symbolic.uniform_attention_risk("positive")) == 0


# ----------------------------------------------------------------------------------------------
# the record of mutmut's last run of the procedures (docs/mutation.md, "The record")


def test_every_recorded_survivor_is_triaged_and_its_killing_test_exists():
    """docs/data/mutation_procedures_rest.json: every survivor carries a verdict; a "killed" one names a test of this
    module and was killed when mutmut ran it again (exit code 1); an equivalent or text-only one survived that rerun
    (0) and carries its reason. No survivor is left open."""
    import json
    from pathlib import Path

    record = json.loads((Path(__file__).parents[1] / "docs" / "data" / "mutation_procedures_rest.json").read_text())
    survivors = {k: v for k, v in record["mutants"].items() if v["status"] == "survived"}
    assert survivors and all("triage" in v for v in survivors.values())
    for name, v in survivors.items():
        t = v["triage"]
        assert t["verdict"] in ("killed", "equivalent", "text"), name
        if t["verdict"] == "killed":
            assert callable(globals().get(t["test"])) and t["test"].startswith("test_"), name
            assert t["rerun_exit_code"] == 1, name
        else:
            assert t["rerun_exit_code"] == 0 and t["reason"].strip(), name
