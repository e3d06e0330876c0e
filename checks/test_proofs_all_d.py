"""The closed-form claims proved for every d >= 3 (theory/proofs.py), and a mutation control for each.

Every proof procedure is run twice: on the claim (it must PASS) and on a false variant of the claim
(it must FAIL).  A procedure that could pass a false claim proves nothing, so the controls are what
make the PASS lines worth reading.
"""
from __future__ import annotations

from fractions import Fraction

import pytest
import sympy as sp

from theory import proofs as proofs_module
EXPECTED = ["balancing_p", "phase1_signs", "output_floor_positive", "floor_is_infimum", "kappa_positive",
            "kappa_positive", "regime_positive", "attention_only", "attention_only"]


@pytest.fixture(scope="module", autouse=True)
def proofs():
    proofs_module.clear_caches()  # computed here, by the code as it is now (not reused from another test's run)
    return proofs_module.all_proofs()


@pytest.fixture(scope="module")
def controls():
    return proofs_module.mutation_controls()


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
    x = proofs_module.X
    ok, steps = proofs_module.li2_lower_bound(sp.polylog(2, 1 - 1 / x) ** 2, x, 1)
    assert not ok and "does not enter linearly" in steps[-1]


def test_the_li2_lemma_is_checked_on_the_whole_interval():
    ok, text = proofs_module.polylog2_bounds_lemma()
    assert ok and "contains all of [0, 1]" in text


def test_branch_and_bound_looks_inside_each_box():
    """f = (x - 5/2)^2 - 1/100 is positive at both ends of [2, 9] and at every dyadic left end a
    left-end-only procedure would evaluate first, but negative on (2.4, 2.6): the bound must not pass."""
    x = proofs_module.X
    ok, steps = proofs_module.branch_and_bound((x - sp.Rational(5, 2)) ** 2 - sp.Rational(1, 100), x, Fraction(2), Fraction(9))
    assert not ok and steps[0].startswith("counterexample"), steps


def test_kappa_bnb_covers_d_from_3():
    r = proofs_module.prove_kappa_positive_bnb()
    assert r.passed and r.domain == "all real d >= 3"
    assert any("cover every d >= 3: yes" in s for s in r.steps)


def test_floor_infimum_and_balancing_root_are_proved():
    inf = proofs_module.prove_floor_is_infimum()
    assert inf.passed and any("det H > 0" in s for s in inf.steps)
    bal = proofs_module.prove_balancing_p()
    assert bal.passed and any("one root in (0, 1): shown" in s for s in bal.steps)
    assert proofs_module.prove_attention_only("logistic").passed and not proofs_module.prove_attention_only("logistic", sp.Rational(1, 2)).passed


def test_prove_positive_is_sound_on_small_cases():
    x = proofs_module.X
    assert proofs_module.prove_positive(x - 1 - sp.log(x))[0]          # ln x < x - 1 for x > 1
    assert not proofs_module.prove_positive(sp.log(x) - (x - 1) / 2)[0]  # false for large x
    assert not proofs_module.prove_positive(-(x - 1) ** 2)[0]


def test_branch_and_bound_finds_a_counterexample_and_certifies_a_true_bound():
    x = proofs_module.X
    ok, steps = proofs_module.branch_and_bound(sp.polylog(2, 1 - 1 / x) - sp.Rational(1, 4), x, Fraction(2), Fraction(9))
    assert ok, steps
    ok, steps = proofs_module.branch_and_bound(sp.polylog(2, 1 - 1 / x) - 1, x, Fraction(2), Fraction(9))
    assert not ok and steps[0].startswith("counterexample")


def test_constant_sign_uses_balls_not_floats():
    assert proofs_module.constant_sign(sp.log(3) - 1) == 1
    assert proofs_module.constant_sign(sp.Integer(6) - 5 * sp.log(3)) == 1
    assert proofs_module.constant_sign(sp.log(2) + sp.log(3) - sp.log(6)) == 0
    assert proofs_module.constant_sign(1 - sp.log(10) / sp.log(9)) == -1


def test_docs_proofs_md_is_current(proofs, controls):
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "docs" / "proofs.md"
    assert path.read_text() == proofs_module.proofs_markdown(proofs, controls), \
        "docs/proofs.md is stale: run `python3 -m app.commands.prove --d 3 --all-d --proofs-doc docs/proofs.md`"


def test_branch_and_bound_refuses_what_it_cannot_certify():
    """f = (x - 5/2)^2 is >= 0 but 0 at x = 5/2, which no dyadic midpoint of [2, 9] hits: the boxes
    around it never certify f > 0, so the budget runs out, and that is a failure, not a proof.  f = 0
    (an exact zero ball) is not > 0 either: its first midpoint is a counterexample."""
    x = proofs_module.X
    ok, steps = proofs_module.branch_and_bound((x - sp.Rational(5, 2)) ** 2, x, Fraction(2), Fraction(9), max_boxes=200)
    assert not ok and steps[0].startswith("undecided after 200 boxes"), steps
    ok, steps = proofs_module.branch_and_bound(x - x, x, Fraction(2), Fraction(9))
    assert not ok and steps[0].startswith("counterexample"), steps


def test_sign_on_and_prove_positive_on_known_functions():
    """The sign of each factor on x > a, and prove_positive at each of its exits: every factor positive; a
    limit at a+ below 0; the derivative chain (log x - (x - 1)/2 rises, then falls: its second derivative
    fails); and the differentiation budget spent (depth 0) is a failure, never a proof."""
    x = proofs_module.X
    assert proofs_module._sign_on(x - 1, x, 1) == 1 and proofs_module._sign_on(-(x + 1), x, 1) == -1
    assert proofs_module._sign_on((x + 1) * (1 - x) * (2 - x) ** 2, x, 3) == -1 and proofs_module._sign_on(x - 2, x, 1) is None
    assert proofs_module._sign_on(-3 / (x + 1), x, 1) == -1 and proofs_module._sign_on(sp.Integer(0) * x, x, 1) is None
    assert proofs_module._is_zero(sp.log(x) * (x + 1) - x * sp.log(x) - sp.log(x)) and not proofs_module._is_zero(x - 1)
    assert proofs_module.constant_sign(sp.pi - 3) == 1 and proofs_module.constant_sign(3 - sp.pi) == -1 and proofs_module.constant_sign(sp.Integer(0)) == 0
    assert proofs_module.prove_positive((x - 1) * (x + 2))[0]
    assert proofs_module.prove_positive(sp.log(x))[0] and proofs_module.prove_positive(-(x + 1) * (x - 1 - sp.log(x)))[0] is False
    ok, steps = proofs_module.prove_positive(x - 2)
    assert not ok and "not shown >= 0" in steps[-1]
    ok, steps = proofs_module.prove_positive(sp.log(x) - (x - 1) / 2)
    assert not ok and steps
    g = sp.expand(x - 1 - sp.log(x))  # > 0 on x > 1, but not factor by factor
    assert proofs_module.prove_positive(g)[0]
    ok, steps = proofs_module.prove_positive(g, depth=0)
    assert not ok and steps == [f"could not show {g} > 0 for x > 1"]
    ok, steps = proofs_module.prove_positive((x + 1) * g, depth=0)
    assert not ok and "have sign 1" in steps[0]


def test_kappa_proofs_refuse_a_kappa_of_another_form_or_negative_at_zero():
    """A kappa that is not eta_1 (A + B eta_1) / den (a cubic term) is refused, not proved; a kappa whose
    Q(0) = A is negative (kappa < 0 for small eta_1) fails its Q(0) step."""
    d, e = proofs_module.symbolic.d, proofs_module.symbolic.eta1
    cubic = e * (d - 2 + e ** 2) / (d - 1)
    negative_at_zero = e * (2 - d + e / d) / (d - 1)
    for kappa in (cubic, negative_at_zero):
        assert not proofs_module.prove_kappa_positive_symbolic(kappa).passed
    ok, Q_end, steps = proofs_module._kappa_endpoints(cubic, 1)
    assert not ok and Q_end is None and steps[0].startswith("kappa not of the form")
    ok, Q_end, steps = proofs_module._kappa_endpoints(negative_at_zero, 1)
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


# ----------------------------------------------------------------------------------------------
# mutation-testing follow-ups (docs/mutation.md, theory/proofs.py): each test below targets mutants
# that survived mutmut; every one was applied by hand and seen to fail here


def test_sign_on_needs_both_numerator_and_denominator_signs():
    """1/(log(x + 1) - 2) changes sign at x = e^2 - 1: SymPy decides neither it nor its expansion, so
    _sign_on reaches its numerator/denominator step, where the numerator (1) is positive and the
    denominator undecided: the sign is undecided (None), not the numerator's sign, not -1, not an error."""
    x = proofs_module.X
    assert proofs_module._sign_on(1 / (sp.log(x + 1) - 2), x, 1) is None
    assert proofs_module._sign_on((x + 1) / (sp.log(x + 1) - 2), x, 1) is None


def test_prove_positive_respects_its_start_point_and_its_budget():
    """prove_positive works on x > a at every level of its derivative chain, spends one unit of ``depth`` per
    differentiation, refuses an infinite limit at a+, and reports each outcome in its steps."""
    x = proofs_module.X
    # -1/2 at x = 2, 1/2 at x = 1, derivative 2x - 4 > 0 only for x > 2: no proof on x > 1
    ok, steps = proofs_module.prove_positive(x ** 2 - 4 * x + sp.Rational(7, 2))
    assert not ok and "derivative not shown positive" in steps[0] and "not shown >= 0" in steps[-1], steps
    # (x^2 - 1)/2 - x log x > 0 for x > 1 needs two differentiations (then 1 - 1/x > 0)
    g = (x ** 2 - 1) / 2 - x * sp.log(x)
    ok, steps = proofs_module.prove_positive(g, depth=1)
    assert not ok and steps[-1].endswith("could not show x - log(x) - 1 > 0 for x > 1"), steps
    ok, steps = proofs_module.prove_positive(g, depth=2)
    assert ok and len(steps) == 3 and all("not shown" not in s and "could not" not in s for s in steps), steps
    assert "its value at 1+ is 0 >= 0 and its derivative is > 0" in steps[0]
    # log(x - 1) -> -oo at 1+: the limit is not a finite value >= 0, whatever its sign
    ok, steps = proofs_module.prove_positive(-sp.log(x - 1) - x)
    assert not ok and steps == ["-x - log(x - 1) at x = 1+ is oo: not shown >= 0"], steps
    # a positive parameter y: x - 1 - log x + y (x - 1)^2 > 0 for x > 1 and every y > 0 (derivative in x)
    y = sp.Symbol("y", positive=True)
    ok, steps = proofs_module.prove_positive(x - 1 - sp.log(x) + y * (x - 1) ** 2)
    assert ok and "derivative is > 0" in steps[0], steps


def test_kappa_form_and_q0_are_checked_on_all_of_x_above_1():
    """The symbolic kappa proof is for all real d > 2 (x > 1): a denominator 2d - 5 changes sign at
    d = 5/2, so kappa is refused; Q(0) = d - 3 is negative for d in (2, 3), so Q(0) fails. The steps record
    the linear form first."""
    d, e = proofs_module.symbolic.d, proofs_module.symbolic.eta1
    Q, steps = proofs_module._kappa_linear(e * (1 + e) / (2 * d - 5))
    assert Q is None and steps[0].startswith("kappa not of the form"), steps
    ok0, Qd, steps = proofs_module._kappa_endpoints(e * (d - 3 + e) / (d - 1), 1)
    assert not ok0 and sp.expand(Qd - (2 * proofs_module.X - 1)) == 0
    assert steps[0].startswith("kappa = eta_1 Q(eta_1) / |den|") and steps[1] == "Q(0):", steps
    assert steps[2].endswith("not shown >= 0"), steps


def test_kappa_proof_steps_start_with_the_linear_form(proofs):
    symbolic = proofs[4]
    assert symbolic.claim == "kappa_positive" and symbolic.steps[0].startswith("kappa = eta_1 Q(eta_1) / |den|")
    assert symbolic.steps[1] == "Q(0):"


def test_li2_must_enter_linearly_with_a_coefficient_free_of_polylogs():
    x = proofs_module.X
    li = sp.polylog(2, 1 - 1 / x)
    assert proofs_module._split_li2(li * sp.polylog(2, 1 / x) + 1) is None
    assert proofs_module._split_li2(3 * li + x) == (3, x)


def test_the_li2_lemma_checks_the_sum_and_its_condition(monkeypatch):
    """The lemma reads SymPy's summation: the sum must be Li_2(z) and its condition must hold on all of
    [0, 1]. With SymPy's summation replaced: an unconditional Li_2(z) is accepted; a condition covering only
    part of [0, 1] (|z| < 1/2, or z >= 1/2, which holds at z = 1), or another function, is refused."""
    z = proofs_module._Z
    rest = sp.Sum(z ** proofs_module._K / proofs_module._K ** 2, (proofs_module._K, 1, sp.oo))
    ok, text = proofs_module.polylog2_bounds_lemma()
    assert ok and "contains all of [0, 1]: shown;" in text
    cases = [(sp.polylog(2, z), True),
             (sp.Piecewise((sp.polylog(2, z), sp.Abs(z) < sp.Rational(1, 2)), (rest, True)), False),
             (sp.Piecewise((sp.polylog(2, z), z >= sp.Rational(1, 2)), (rest, True)), False),
             (sp.Piecewise((sp.polylog(3, z), sp.Abs(z) <= 1), (rest, True)), False)]
    for summed, expected in cases:
        monkeypatch.setattr(proofs_module.sp, "summation", lambda *args, _s=summed: _s)
        ok, text = proofs_module.polylog2_bounds_lemma()
        assert ok is expected, (summed, text)
    monkeypatch.undo()
    monkeypatch.setattr(proofs_module.sp, "summation", lambda *args: cases[1][0])
    assert proofs_module.polylog2_bounds_lemma()[1].split(": ")[1].startswith("not shown;")


def test_result_keeps_every_field_and_reads_ok_as_pass_or_fail():
    R = proofs_module.ProofResult
    assert proofs_module._result("c", "m", "all real d > 2", "s", True, ["a", "b"]) == R("c", "m", "all real d > 2", "s", "PASS", ("a", "b"))
    assert proofs_module._result("c", "m", "all d >= 3", "s", False, []) == R("c", "m", "all d >= 3", "s", "FAIL", ())
    # the range of eta_1 a kappa proof states: eta1_max = d itself, or a multiple for the controls
    assert [proofs_module._range_label(k) for k in (1, 2, 10)] == ["eta1_max = d", "2 eta1_max = 2 d", "10 eta1_max = 10 d"]


def _arb_sign(expr):
    ball = proofs_module.constant_ball(expr)
    return 1 if ball > 0 else -1 if ball < 0 else None


def test_the_false_kappa_controls_are_false_where_their_docstrings_say():
    """Each false kappa is eta_1 Q(eta_1) with Q linear, as the proofs need; `kappa_false_near_d3` is positive
    at eta_1 = d - 1 for every d and negative at eta_1 = d only near d = 3 (its root is d = 3.0265...);
    `kappa_false_at_d` is positive on (0, d - 1] and negative at eta_1 = d for every d, with a positive Li_2
    coefficient there. Signs from arb balls at points of d (the proofs' controls, not a proof)."""
    d, e = proofs_module.symbolic.d, proofs_module.symbolic.eta1
    R = sp.Rational
    near3, at_d = proofs_module.kappa_false_near_d3(), proofs_module.kappa_false_at_d()
    for kappa in (near3, at_d):
        assert kappa.subs(e, 0) == 0 and sp.simplify(sp.diff(kappa, e, 3)) == 0
        assert proofs_module._kappa_linear(kappa)[0] is not None
    q_near3, q_at_d = sp.cancel(near3 / e), sp.cancel(at_d / e)
    everywhere = (3, R(61, 20), 4, 10, 1000, 10 ** 8)
    for dv in everywhere:
        assert _arb_sign(q_near3.subs({d: dv, e: 0})) == 1 and _arb_sign(q_near3.subs({d: dv, e: dv - 1})) == 1
        assert _arb_sign(q_at_d.subs({d: dv, e: 0})) == 1 and _arb_sign(q_at_d.subs({d: dv, e: dv - 1})) == 1
        assert _arb_sign(q_at_d.subs({d: dv, e: dv})) == -1, dv
    assert [_arb_sign(q_near3.subs({d: dv, e: dv})) for dv in (3, R(302, 100))] == [-1, -1]
    assert [_arb_sign(q_near3.subs({d: dv, e: dv})) for dv in (R(31, 10), R(7, 2), 4, 10, 10 ** 8)] == [1] * 5
    split = proofs_module._split_li2(sp.expand(at_d.subs(e, d).subs(d, proofs_module.X + 1)))
    assert split is not None and proofs_module._sign_on(split[0], proofs_module.X, 1) == 1
    # near d = 3 only: the branch and bound's tail bound (Li_2 >= 0, for d >= 10) applies, so only the boxes fail
    split = proofs_module._split_li2(sp.expand(near3.subs(e, d).subs(d, proofs_module.X + 1)))
    assert split is not None and proofs_module._sign_on(split[0], proofs_module.X, 9) == 1


def test_each_control_is_the_variant_its_name_says(controls, monkeypatch):
    """The list of controls, name by name: the procedure called and the false variant the name describes
    (the arguments are recorded, not inferred from the result: some results do not show their argument)."""
    sym, d = proofs_module.symbolic, proofs_module.symbolic.d
    c = sym.uniform_attention_min_risk(proofs_module.LAW)
    kap = sym.attention_gap_rate(proofs_module.LAW)
    kap_li2 = kap.replace(sp.polylog, lambda s, z: -sp.polylog(s, z))
    expected = [
        ("p = 1/d instead of 1/(d-1)", "prove_balancing_p", (1 / d,), {}),
        ("p = 1/(d+2): beta1_b > 0", "prove_phase1_signs", (1 / (d + 2),), {}),
        ("c(d) with log10 instead of ln (c(3) < 0)", "prove_output_floor_positive",
         (c.replace(sp.log, lambda a: sp.log(a) / sp.log(10)),), {}),
        ("c(d) + 1/d^2 as the infimum of R(0, beta)", "prove_floor_is_infimum", (c + 1 / d ** 2,), {}),
        ("kappa on 0 < eta_1 <= 10 eta1_max (false at d = 3), symbolic", "prove_kappa_positive_symbolic", (),
         {"range_factor": 10}),
        ("kappa on 0 < eta_1 <= 10 eta1_max, branch and bound", "prove_kappa_positive_bnb", (), {"range_factor": 10}),
        ("kappa with the sign of Li_2 flipped, symbolic", "prove_kappa_positive_symbolic", (kap_li2,), {}),
        ("kappa with the sign of Li_2 flipped, branch and bound", "prove_kappa_positive_bnb", (kap_li2,), {}),
        ("a kappa false only at eta_1 = d (true at d - 1), symbolic", "prove_kappa_positive_symbolic",
         (proofs_module.kappa_false_at_d(),), {}),
        ("a kappa false only at eta_1 = d (true at d - 1), branch and bound", "prove_kappa_positive_bnb",
         (proofs_module.kappa_false_at_d(),), {}),
        ("a kappa false only for d in [3, 3.1), branch and bound", "prove_kappa_positive_bnb", (proofs_module.kappa_false_near_d3(),), {}),
        ("Li_2 step on 1 - Li_2(1 - 1/x) > 0 (false for large x; coefficient -1)", "li2_step_control", (), {}),
        ("Li_2 step on Li_2(z) - z - 1/(100 x) > 0, z = 1 - 1/x (false near x = 1)", "li2_tight_control", (), {}),
        ("u_min > 1 for every epsilon < 13 (false at d = 3)", "prove_regime_positive", (13,), {}),
        ("R(0, 0) = 1/2 under the logistic loss (it is log 2)", "prove_attention_only", ("logistic", sp.Rational(1, 2)), {}),
    ]
    for proc in {proc for _, proc, _, _ in expected}:
        monkeypatch.setattr(proofs_module, proc, lambda *args, _p=proc, **kwargs: (_p, args, kwargs))
    recorded = proofs_module.mutation_controls()
    assert [name for name, _ in recorded] == [name for name, *_ in expected]
    for (name, call), (_, proc, args, kwargs) in zip(recorded, expected):
        assert call == (proc, args, kwargs), name
    monkeypatch.undo()
    assert [name for name, _ in controls] == [name for name, *_ in expected]  # the real list, as computed


def _md_table(lines, heading):
    """The header and rows of the first Markdown table after ``heading``."""
    start = next(i for i in range(lines.index(heading), len(lines)) if lines[i].startswith("| "))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append(line[2:-2].split(" | "))
    assert len(rows[1]) == 1 and set(rows[1][0]) == {"-", "|"}, rows[1]  # the |---|---| line
    return rows[0], rows[2:]


def test_proofs_markdown_reports_each_result_and_control(proofs, controls):
    """docs/proofs.md, read back as tables (not compared as text): a row per proof with its method, d range,
    what it shows, its conditions and its status; its steps, long ones cut at 400 characters; a row per
    control with its status; the hand-argued steps and the items checked only at given d. A failed proof and a
    control that passed are written as such (the status comes from each result)."""
    import dataclasses

    failed = dataclasses.replace(proofs[0], status="FAIL", steps=("a" * 399, "b" * 400, "c" * 401))
    results = [failed] + list(proofs[1:])
    passed_control = ("a control that passed", dataclasses.replace(controls[0][1], status="PASS"))
    ctrl = list(controls) + [passed_control]
    lines = proofs_module.proofs_markdown(results, ctrl).splitlines()
    assert lines[0].startswith("# ")
    for i, line in enumerate(lines):  # blocks apart: a heading or paragraph is one line followed by an empty one
        if line and not line.startswith(("|", "1. ")):
            assert i + 1 == len(lines) or lines[i + 1] == "", (i, line, lines[i + 1])
        elif line and not lines[i - 1].startswith("|" if line[0] == "|" else "1. "):
            assert lines[i - 1] == "", (i, lines[i - 1], line)  # a table or a list starts after an empty line

    header, rows = _md_table(lines, "## Proved for all d")
    assert header == ["proof", "used by (theory/claims.py)", "method", "domain", "shown", "conditions", "status"]
    assert rows == [[f"`{r.claim}`", proofs_module.USED_BY[r.claim], r.method, r.domain, r.shown, proofs_module.CONDITIONS[r.claim], r.status]
                    for r in results]
    assert [row[-1] for row in rows] == ["FAIL"] + ["PASS"] * (len(results) - 1)

    steps_at = lines.index("### The steps")
    body = lines[steps_at + 1:lines.index("## Mutation controls (each must FAIL)")]
    groups = []
    for line in body:
        if line.startswith("**`"):
            groups.append((line, []))
        elif line.startswith("1. "):
            assert line[3] == "`" and line[-1] == "`", line
            groups[-1][1].append(line[4:-1])
        else:
            assert line == "", line
    assert groups == [(f"**`{r.claim}`** ({r.method}): {r.shown}.", [s if len(s) < 400 else s[:400] + "..." for s in r.steps])
                      for r in results]
    assert groups[0][1] == ["a" * 399, "b" * 400 + "...", "c" * 400 + "..."]

    header, rows = _md_table(lines, "## Mutation controls (each must FAIL)")
    assert header == ["false variant", "method", "status"]
    assert rows == [[name, r.method, r.status] for name, r in ctrl] and rows[-1][-1] == "PASS"

    header, rows = _md_table(lines, "## Steps argued by hand")
    assert header == ["claim", "step", "where, and what depends on it"]
    assert rows == [[f"`{k}`", item, how] for k, item, how in proofs_module.HAND_ARGUED]
    header, rows = _md_table(lines, "## Checked only at given d")
    assert header == ["claim", "item", "how"]
    assert rows == [[f"`{k}`", item, how] for k, item, how in proofs_module.CHECKED_ONLY_AT_GIVEN_D]
    assert lines[-1] == "| " + " | ".join([f"`{proofs_module.CHECKED_ONLY_AT_GIVEN_D[-1][0]}`", *proofs_module.CHECKED_ONLY_AT_GIVEN_D[-1][1:]]) + " |"


def test_clear_caches_empties_every_proof_cache():
    """After clear_caches every cached procedure of theory.proofs recomputes (its cache is empty); last in the
    file, as it throws the module's cached proofs away."""
    cached = {name: f for name, f in vars(proofs_module).items() if hasattr(f, "cache_info")}
    assert set(cached) == {"prove_balancing_p", "prove_phase1_signs", "prove_output_floor_positive",
                           "prove_floor_is_infimum", "prove_kappa_positive_symbolic", "prove_kappa_positive_bnb",
                           "prove_regime_positive", "prove_attention_only", "li2_step_control", "li2_tight_control"}
    proofs_module.prove_attention_only("squared")
    assert proofs_module.prove_attention_only.cache_info().currsize > 0
    proofs_module.clear_caches()
    assert {name: f.cache_info().currsize for name, f in cached.items()} == dict.fromkeys(cached, 0)
