"""The closed-form claims proved for every d >= 3 (theory/proofs.py), and a mutation control for each.

Every proof procedure is run twice: on the claim (it must PASS) and on a false variant of the claim
(it must FAIL).  A procedure that could pass a false claim proves nothing, so the controls are what
make the PASS lines worth reading.
"""
from __future__ import annotations

from fractions import Fraction

import pytest
import sympy as sp

from theory import proofs as P

EXPECTED = ["balancing_p", "phase1_signs", "output_floor_positive", "floor_is_infimum", "kappa_positive",
            "kappa_positive", "regime_positive", "attention_only", "attention_only"]


@pytest.fixture(scope="module", autouse=True)
def proofs():
    P.clear_caches()  # computed here, by the code as it is now (not reused from another test's run)
    return P.all_proofs()


@pytest.fixture(scope="module")
def controls():
    return P.mutation_controls()


def test_every_all_d_proof_passes(proofs):
    assert [r.claim for r in proofs] == EXPECTED
    assert [r.shown.endswith(f"({loss} loss)") for r, loss in zip(proofs[-2:], ("squared", "logistic"))] == [True] * 2
    failed = [(r.claim, r.method, r.steps) for r in proofs if not r.passed]
    assert not failed, failed
    assert all(r.steps for r in proofs) and all(isinstance(s, str) and s for r in proofs for s in r.steps)


def test_every_mutation_control_fails(controls):
    assert len(controls) == 15
    passed = [name for name, r in controls if r.status != "FAIL"]
    assert not passed, f"a proof procedure passed a false claim: {passed}"


def test_controls_fail_for_the_stated_reason(controls):
    by_name = dict(controls)
    bnb = by_name["kappa on 0 < eta_1 <= 10 eta1_max, branch and bound"]
    assert any(s.startswith("counterexample") for s in bnb.steps)
    log10 = by_name["c(d) with log10 instead of ln (c(3) < 0)"]
    assert any("not shown >= 0" in s for s in log10.steps)


def test_kappa_controls_fail_at_the_step_they_target(controls):
    """Each false kappa variant is caught by the step built for it, not by an unrelated one: the
    branch and bound finds the counterexample near d = 3 (so it must start at d = 3), the endpoint
    eta_1 = d is where the variant fails (true at d - 1), and the Li_2 step refuses a negative coefficient."""
    by_name = dict(controls)
    near3 = by_name["a kappa false only for d in [3, 3.1), branch and bound"]
    found = [Fraction(s.split("(")[1].split(")")[0]) for s in near3.steps if s.startswith("counterexample")]
    assert found and 2 <= found[0] < 3, near3.steps  # x = d - 1 in [2, 3): d in [3, 4)
    at_d = by_name["a kappa false only at eta_1 = d (true at d - 1), branch and bound"]
    assert any(s.startswith("counterexample") for s in at_d.steps)
    li2 = by_name["Li_2 step on 1 - Li_2(1 - 1/x) > 0 (false for large x; coefficient -1)"]
    assert any("not shown positive" in s for s in li2.steps)
    flipped = by_name["kappa with the sign of Li_2 flipped, symbolic"]
    assert any("not shown positive" in s for s in flipped.steps)


def test_the_li2_step_needs_li2_to_enter_linearly():
    x = P.X
    ok, steps = P.li2_lower_bound(sp.polylog(2, 1 - 1 / x) ** 2, x, 1)
    assert not ok and "does not enter linearly" in steps[-1]


def test_the_li2_lemma_is_checked_on_the_whole_interval():
    ok, text = P.polylog2_bounds_lemma()
    assert ok and "contains all of [0, 1]" in text


def test_branch_and_bound_looks_inside_each_box():
    """f = (x - 5/2)^2 - 1/100 is positive at both ends of [2, 9] and at every dyadic left end a
    left-end-only procedure would evaluate first, but negative on (2.4, 2.6): the bound must not pass."""
    x = P.X
    ok, steps = P.branch_and_bound((x - sp.Rational(5, 2)) ** 2 - sp.Rational(1, 100), x, Fraction(2), Fraction(9))
    assert not ok and steps[0].startswith("counterexample"), steps


def test_kappa_bnb_covers_d_from_3():
    r = P.prove_kappa_positive_bnb()
    assert r.passed and r.domain == "all real d >= 3"
    assert any("cover every d >= 3: yes" in s for s in r.steps)


def test_floor_infimum_and_balancing_root_are_proved():
    inf = P.prove_floor_is_infimum()
    assert inf.passed and any("det H > 0" in s for s in inf.steps)
    bal = P.prove_balancing_p()
    assert bal.passed and any("one root in (0, 1): shown" in s for s in bal.steps)
    assert P.prove_attention_only("logistic").passed and not P.prove_attention_only("logistic", sp.Rational(1, 2)).passed


def test_prove_positive_is_sound_on_small_cases():
    x = P.X
    assert P.prove_positive(x - 1 - sp.log(x))[0]          # ln x < x - 1 for x > 1
    assert not P.prove_positive(sp.log(x) - (x - 1) / 2)[0]  # false for large x
    assert not P.prove_positive(-(x - 1) ** 2)[0]


def test_branch_and_bound_finds_a_counterexample_and_certifies_a_true_bound():
    x = P.X
    ok, steps = P.branch_and_bound(sp.polylog(2, 1 - 1 / x) - sp.Rational(1, 4), x, Fraction(2), Fraction(9))
    assert ok, steps
    ok, steps = P.branch_and_bound(sp.polylog(2, 1 - 1 / x) - 1, x, Fraction(2), Fraction(9))
    assert not ok and steps[0].startswith("counterexample")


def test_constant_sign_uses_balls_not_floats():
    assert P.constant_sign(sp.log(3) - 1) == 1
    assert P.constant_sign(sp.Integer(6) - 5 * sp.log(3)) == 1
    assert P.constant_sign(sp.log(2) + sp.log(3) - sp.log(6)) == 0
    assert P.constant_sign(1 - sp.log(10) / sp.log(9)) == -1


def test_docs_proofs_md_is_current(proofs, controls):
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "docs" / "proofs.md"
    assert path.read_text() == P.proofs_markdown(proofs, controls), \
        "docs/proofs.md is stale: run `python3 -m app.prove --d 3 --all-d --proofs-doc docs/proofs.md`"


def test_branch_and_bound_refuses_what_it_cannot_certify():
    """f = (x - 5/2)^2 is >= 0 but 0 at x = 5/2, which no dyadic midpoint of [2, 9] hits: the boxes
    around it never certify f > 0, so the budget runs out, and that is a failure, not a proof.  f = 0
    (an exact zero ball) is not > 0 either: its first midpoint is a counterexample."""
    x = P.X
    ok, steps = P.branch_and_bound((x - sp.Rational(5, 2)) ** 2, x, Fraction(2), Fraction(9), max_boxes=200)
    assert not ok and steps[0].startswith("undecided after 200 boxes"), steps
    ok, steps = P.branch_and_bound(x - x, x, Fraction(2), Fraction(9))
    assert not ok and steps[0].startswith("counterexample"), steps


def test_sign_on_and_prove_positive_on_known_functions():
    """The sign of each factor on x > a, and prove_positive at each of its exits: every factor positive; a
    limit at a+ below 0; the derivative chain (log x - (x - 1)/2 rises, then falls: its second derivative
    fails); and the differentiation budget spent (depth 0) is a failure, never a proof."""
    x = P.X
    assert P._sign_on(x - 1, x, 1) == 1 and P._sign_on(-(x + 1), x, 1) == -1
    assert P._sign_on((x + 1) * (1 - x) * (2 - x) ** 2, x, 3) == -1 and P._sign_on(x - 2, x, 1) is None
    assert P._sign_on(-3 / (x + 1), x, 1) == -1 and P._sign_on(sp.Integer(0) * x, x, 1) is None
    assert P._is_zero(sp.log(x) * (x + 1) - x * sp.log(x) - sp.log(x)) and not P._is_zero(x - 1)
    assert P.constant_sign(sp.pi - 3) == 1 and P.constant_sign(3 - sp.pi) == -1 and P.constant_sign(sp.Integer(0)) == 0
    assert P.prove_positive((x - 1) * (x + 2))[0]
    assert P.prove_positive(sp.log(x))[0] and P.prove_positive(-(x + 1) * (x - 1 - sp.log(x)))[0] is False
    ok, steps = P.prove_positive(x - 2)
    assert not ok and "not shown >= 0" in steps[-1]
    ok, steps = P.prove_positive(sp.log(x) - (x - 1) / 2)
    assert not ok and steps
    g = sp.expand(x - 1 - sp.log(x))  # > 0 on x > 1, but not factor by factor
    assert P.prove_positive(g)[0]
    ok, steps = P.prove_positive(g, depth=0)
    assert not ok and steps == [f"could not show {g} > 0 for x > 1"]
    ok, steps = P.prove_positive((x + 1) * g, depth=0)
    assert not ok and "have sign 1" in steps[0]


def test_kappa_proofs_refuse_a_kappa_of_another_form_or_negative_at_zero():
    """A kappa that is not eta_1 (A + B eta_1) / den (a cubic term) is refused, not proved; a kappa whose
    Q(0) = A is negative (kappa < 0 for small eta_1) fails its Q(0) step."""
    d, e = P.sym.d, P.sym.eta1
    cubic = e * (d - 2 + e ** 2) / (d - 1)
    negative_at_zero = e * (2 - d + e / d) / (d - 1)
    for kappa in (cubic, negative_at_zero):
        assert not P.prove_kappa_positive_symbolic(kappa).passed
    ok, Q_end, steps = P._kappa_endpoints(cubic, 1)
    assert not ok and Q_end is None and steps[0].startswith("kappa not of the form")
    ok, Q_end, steps = P._kappa_endpoints(negative_at_zero, 1)
    assert not ok and "Q(0):" in steps


def test_constant_sign_leaves_a_hidden_zero_undecided():
    """A constant SymPy does not simplify to 0 but that is 0 (Li_2(1/3) - Li_2(1/9)/6 = pi^2/18 - ln(3)^2/6):
    its ball straddles 0 at every precision, so its sign is undecided (None), never +1 or -1; shifted by
    +-1e-30 it is decided.  Kills a three-valued comparison that reads a straddling ball as signed
    (e.g. ``ball < 1`` or ``not ball > 0`` for ``ball < 0``)."""
    from theory.proofs import constant_sign

    hidden = (sp.polylog(2, sp.Rational(1, 3)) - sp.polylog(2, sp.Rational(1, 9)) / 6 - sp.pi ** 2 / 18
              + sp.log(3) ** 2 / 6)
    assert sp.simplify(hidden) != 0                     # the exact test does not see it: the balls decide
    assert constant_sign(hidden) is None
    assert constant_sign(hidden + sp.Rational(1, 10 ** 30)) == 1
    assert constant_sign(hidden - sp.Rational(1, 10 ** 30)) == -1
    assert constant_sign(sp.Rational(-1, 7)) == -1 and constant_sign(sp.Rational(1, 7)) == 1
