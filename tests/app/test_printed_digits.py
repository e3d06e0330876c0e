"""Every number ``occ-companion evaluate`` prints is true as printed: for each backend (float series,
mp series, arb series, the arb integral), at random points, the exact risk and every gradient coordinate
lie within the printed bound of the printed value (|exact - printed| <= printed bound), and for ball
output the printed ball contains the exact value.

The exact values come from the integral representation at 40 digits (an arb enclosure of radius
about 1e-40, independent of the series), compared in exact rational arithmetic.
"""
from __future__ import annotations

import contextlib
import io
import re
from fractions import Fraction

from hypothesis import example, given
from hypothesis import strategies as st

from app.cli import main
from app.render.formatting import exact_value, value_and_bound
from checks.strategies import examples
from numerics.theorem.integral import IntegralEvaluator
from theory.setting import Setting

NUM = r"-?[0-9.]+(?:e[-+]?[0-9]+)?"


def _run(argv) -> str:
    """stdout of ``occ-companion argv`` (exit status 0 asserted)."""
    buf, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
        rc = main(argv)
    assert rc == 0, (argv, err.getvalue())
    return buf.getvalue()


def _reference(d, p, alpha, beta):
    res = IntegralEvaluator(Setting(d, p=p), dps=40).evaluate(alpha, beta)
    return [res.risk] + list(res.grad_alpha) + list(res.grad_beta)


def _inside(ref_ball, value: Fraction, bound: Fraction) -> bool:
    """Is the whole reference ball within [value - bound, value + bound]?"""
    mid, rad = exact_value(ref_ball), exact_value(ref_ball.rad())
    return abs(mid - value) + rad <= bound


def _expanded(entries: list[str]) -> list[str]:
    """Printed gradient entries with each run "... (entries i to j equal)" written out: entry i is printed
    before the marker, so the marker stands for j - i more copies of it."""
    out = []
    for e in entries:
        run = re.fullmatch(r"\.\.\. \(entries (\d+) to (\d+) equal\)", e)
        out += [out[-1]] * (int(run.group(2)) - int(run.group(1))) if run else [e]
    return out


def _printed_pairs(out: str):
    """(value, bound) pairs from the plain (float / mp) output: risk, then every gradient coordinate."""
    risk = re.search(rf"risk = ({NUM})  \(\|error\| <= ({NUM})", out)
    grads = [_expanded(re.search(rf"{name} = \[(.*)\]", out).group(1).split(", "))
             for name in ("grad_alpha", "grad_beta ")]
    gbound = re.search(rf"every gradient coordinate: \|error\| <= ({NUM})", out).group(1)
    pairs = [(risk.group(1), risk.group(2))] + [(g, gbound) for gs in grads for g in gs]
    return [(Fraction(v), Fraction(b)) for v, b in pairs]


def _printed_balls(out: str):
    """(mid, rad) pairs from the arb output: '[mid +/- rad]' or an exact 'mid'."""
    risk = re.search(r"risk in (\[[^\]]*\]|" + NUM + ")", out).group(1)
    grads = [re.search(rf"{name} in \[(.*)\]$", out, re.M).group(1) for name in ("grad_alpha", "grad_beta ")]
    balls = [risk] + [b for g in grads
                      for b in _expanded(re.findall(r"\[[^\]]*\]|\.\.\. \(entries \d+ to \d+ equal\)|" + NUM, g))]
    out_pairs = []
    for b in balls:
        m = re.fullmatch(rf"\[(?:({NUM}) )?\+/- ({NUM})\]", b)  # arb prints '[+/- r]' for a ball around 0
        out_pairs.append((Fraction(m.group(1) or 0), Fraction(m.group(2))) if m else (Fraction(b), Fraction(0)))
    return out_pairs


point = st.tuples(st.integers(3, 6), st.sampled_from([None, "0.1", "0.35"]),
                  st.floats(-3, 3), st.floats(-3, 3), st.floats(-2, 2), st.floats(-2, 2))


def _argv(d, p, aa, ab, ba, bb):
    alpha = [aa] + [ab] * (d - 1)
    beta = [ba] + [bb] * (d - 1)
    argv = ["evaluate", "--d", str(d), "--alpha=" + ",".join(map(repr, alpha)), "--beta=" + ",".join(map(repr, beta))]
    return argv + (["--p", p] if p else []), alpha, beta


@examples(4)
@given(pt=point, backend=st.sampled_from([("float", "1e-12"), ("mp", "1e-25")]))
@example(pt=(6, None, 1.0, 0.0, 1.0, -1.0), backend=("float", "1e-12"))  # runs of equal entries, compressed
def test_plain_output_is_within_its_printed_bound(pt, backend):
    argv, alpha, beta = _argv(*pt)
    name, tol = backend
    pairs = _printed_pairs(_run(argv + ["--backend", name, "--tol", tol, "--dps", "30"]))
    p = Fraction(pt[1]) if pt[1] else None
    refs = _reference(pt[0], p, alpha, beta)
    assert len(pairs) == len(refs)
    for (value, bound), ref in zip(pairs, refs):
        assert _inside(ref, value, bound), (name, value, bound, ref)


@examples(4)
@given(pt=point, method=st.sampled_from([["--backend", "arb", "--tol", "1e-20"], ["--method", "integral"]]))
@example(pt=(6, None, 1.0, 0.0, 1.0, -1.0), method=["--backend", "arb", "--tol", "1e-20"])
def test_ball_output_contains_the_exact_value(pt, method):
    argv, alpha, beta = _argv(*pt)
    balls = _printed_balls(_run(argv + method))
    p = Fraction(pt[1]) if pt[1] else None
    refs = _reference(pt[0], p, alpha, beta)
    assert len(balls) == len(refs)
    for (mid, rad), ref in zip(balls, refs):
        assert _inside(ref, mid, rad), (method, mid, rad, ref)


@examples(20)
@given(x=st.floats(-1e6, 1e6), bound=st.floats(1e-30, 1e3), digits=st.integers(3, 40))
def test_value_and_bound_covers_the_rounding(x, bound, digits):
    """Whatever x and bound: |x - printed| + bound <= printed bound, and no digit below the bound's
    half-unit (the last printed place has half-unit <= bound unless the digit cap stops earlier)."""
    text, btext = value_and_bound(x, bound, digits)
    assert abs(Fraction(x) - Fraction(text)) + Fraction(bound) <= Fraction(btext)
    decimals = len(text.split(".")[1]) if "." in text else 0
    if decimals >= 1:  # one place fewer would be too coarse for the bound (or the cap was hit)
        assert Fraction(10) ** -(decimals - 1) / 2 > Fraction(bound) or len(text.strip("-0.")) >= digits - 1


def test_mp_values_are_rounded_in_their_own_precision():
    """The README's mp example: 40 digits asked, 1e-28 bound: about 28 correct decimals, none from a double."""
    (value, bound), *_ = _printed_pairs(_run(["evaluate", "--d", "5", "--alpha", "1,0,0,0,0", "--beta",
                                              "1,-1,-1,-1,-1", "--backend", "mp", "--dps", "40", "--tol", "1e-28"]))
    assert bound < Fraction(1, 10**27) and len(str(value.denominator)) >= 28
    ref = _reference(5, None, [1.0, 0, 0, 0, 0], [1.0, -1, -1, -1, -1])[0]
    assert _inside(ref, value, bound)
