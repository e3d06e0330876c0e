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

EXPECTED = ["balancing_p", "phase1_signs", "output_floor_positive", "kappa_positive", "kappa_positive",
            "regime_positive", "attention_only"]


@pytest.fixture(scope="module")
def proofs():
    return P.all_proofs()


@pytest.fixture(scope="module")
def controls():
    return P.mutation_controls()


def test_every_all_d_proof_passes(proofs):
    assert [r.claim for r in proofs] == EXPECTED
    failed = [(r.claim, r.method, r.steps) for r in proofs if not r.passed]
    assert not failed, failed
    assert all(r.steps for r in proofs)


def test_every_mutation_control_fails(controls):
    assert len(controls) == 9
    passed = [name for name, r in controls if r.status != "FAIL"]
    assert not passed, f"a proof procedure passed a false claim: {passed}"


def test_controls_fail_for_the_stated_reason(controls):
    by_name = dict(controls)
    bnb = by_name["kappa on 0 < eta_1 <= 10 eta1_max, branch and bound"]
    assert any(s.startswith("counterexample") for s in bnb.steps)
    log10 = by_name["c(d) with log10 instead of ln (c(3) < 0)"]
    assert any("not shown >= 0" in s for s in log10.steps)


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
