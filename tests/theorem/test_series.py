"""Structural properties of the exact series evaluator."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numerics.theorem.series import SeriesEvaluator
from theory.setting import Setting
from theory.validation import SettingError


def test_bound_tracks_tolerance():
    s = Setting(6)
    loose = SeriesEvaluator(s, tol=1e-4).evaluate_symmetric(0.5, 0, 1, -1)
    tight = SeriesEvaluator(s, tol=1e-12).evaluate_symmetric(0.5, 0, 1, -1)
    assert loose.omitted_mass <= 1e-4 and tight.omitted_mass <= 1e-12
    assert tight.risk_bound < loose.risk_bound
    # the loose value is really off by more than the tight bound, and within its own bound
    assert abs(float(loose.risk) - float(tight.risk)) <= loose.risk_bound + tight.risk_bound
    assert abs(float(loose.risk) - float(tight.risk)) > tight.risk_bound


@given(shift=st.floats(-50, 50), d=st.integers(3, 6))
@settings(max_examples=15)
def test_softmax_shift_invariance_and_zero_sum_attention_gradient(shift, d):
    ev = SeriesEvaluator(Setting(d))
    a = ev.evaluate_symmetric(0.7, -0.3, 1.2, -0.8)
    b = ev.evaluate_symmetric(0.7 + shift, -0.3 + shift, 1.2, -0.8)
    assert abs(float(a.risk) - float(b.risk)) <= 1e-12
    # per-coordinate gradients: marked + (d - 1) * unmarked = 0
    assert abs(float(a.grad_alpha[0]) + (d - 1) * float(a.grad_alpha[1])) <= 1e-12


def test_full_and_symmetric_interfaces_agree():
    d = 5
    ev = SeriesEvaluator(Setting(d))
    full = ev.evaluate([0.4] + [-0.1] * (d - 1), [1.1] + [-0.7] * (d - 1))
    sym = ev.evaluate_symmetric(0.4, -0.1, 1.1, -0.7)
    assert full.risk == pytest.approx(float(sym.risk), abs=1e-15)
    assert full.grad_beta[3] == pytest.approx(float(sym.grad_beta[1]), abs=1e-15)
    assert full.grad_alpha[0] == pytest.approx(float(sym.grad_alpha[0]), abs=1e-15)


def test_permuting_unmarked_symbols_permutes_gradients():
    ev = SeriesEvaluator(Setting(3))
    a = ev.evaluate([0.2, 0.5, -0.4], [0.9, -0.3, 0.1])
    b = ev.evaluate([0.2, -0.4, 0.5], [0.9, 0.1, -0.3])
    assert float(a.risk) == pytest.approx(float(b.risk), abs=1e-13)
    assert float(a.grad_beta[1]) == pytest.approx(float(b.grad_beta[2]), abs=1e-13)
    assert float(a.grad_alpha[2]) == pytest.approx(float(b.grad_alpha[1]), abs=1e-13)


def test_gradient_matches_finite_differences():
    ev = SeriesEvaluator(Setting(4, loss="logistic"))
    x = np.array([0.3, -0.2, 0.8, -0.5])
    g = ev.evaluate_symmetric(*x)
    h = 1e-5
    # d/d alpha_a of R with alpha_b held: per-coordinate derivative for the marked coordinate
    num_aa = (float(ev.evaluate_symmetric(x[0] + h, *x[1:]).risk) - float(ev.evaluate_symmetric(x[0] - h, *x[1:]).risk)) / (2 * h)
    assert num_aa == pytest.approx(float(g.grad_alpha[0]), abs=1e-8)
    # moving all unmarked beta together changes R by (d - 1) * per-coordinate gradient
    num_bb = (float(ev.evaluate_symmetric(x[0], x[1], x[2], x[3] + h).risk)
              - float(ev.evaluate_symmetric(x[0], x[1], x[2], x[3] - h).risk)) / (2 * h)
    assert num_bb == pytest.approx(3 * float(g.grad_beta[1]), abs=1e-8)


def test_degenerate_d2_every_string_has_length_one():
    """d = 2 under the default law: p = 1, n = 1; attention is irrelevant and beta = (1, -1) is exact."""
    ev = SeriesEvaluator(Setting(2))
    res = ev.evaluate([3.0, -1.0], [1.0, -1.0])
    assert res.omitted_mass == 0 and abs(float(res.risk)) <= res.risk_bound
    assert all(abs(float(g)) <= res.grad_bound for g in res.grad_alpha)


def test_nonnegative_variant_has_the_empty_string_floor():
    s = Setting(4, lengths="nonnegative")
    res = SeriesEvaluator(s).evaluate_symmetric(30.0, 0.0, 1.0, -1.0)
    floor = float(s.p_value) / 2
    assert float(res.risk) >= floor - res.risk_bound
    assert float(res.risk) - floor < 1e-6


def test_docstring_example_runs():
    import doctest

    import numerics.theorem.series

    assert doctest.testmod(numerics.theorem.series).failed == 0


def test_contexts_and_flags():
    s = Setting(4)
    assert SeriesEvaluator(s, backend="mp").context == "mp"  # the old keyword is an alias
    assert not SeriesEvaluator(s).evaluate_symmetric(0.2, 0, 1, -1).certified
    res = SeriesEvaluator(s, context="arb", tol=1e-15).evaluate_symmetric(0.2, 0, 1, -1)
    assert res.certified and all(g.rad() <= res.grad_bound * (1 + 1e-12) for g in res.grad_alpha + res.grad_beta)
    with pytest.raises(SettingError, match="squared"):
        SeriesEvaluator(Setting(4, loss="logistic")).quadratic_moments(0.0, 0.0)
    with pytest.raises(SettingError, match="prec_bits"):
        SeriesEvaluator(s, context="arb", prec_bits=10)


def test_terms_grow_linearly_in_d():
    """Only the needed count range is enumerated: 4x the alphabet costs about 4x the terms, not 16x."""
    small = SeriesEvaluator(Setting(100)).evaluate_symmetric(0.5, 0, 1, -1).terms
    large = SeriesEvaluator(Setting(400)).evaluate_symmetric(0.5, 0, 1, -1).terms
    assert large < 5 * small


@pytest.mark.parametrize("lengths", ["positive", "nonnegative"])
def test_arb_weights_and_omitted_mass_enclose_the_exact_rationals(lengths):
    """Every enumerated weight is a ball around its exact rational P(n) multinomial(counts), and the
    omitted-mass ball contains 1 - (their exact sum + P(n = 0)), computed here in Fractions."""
    from fractions import Fraction
    from math import comb

    from flint import arb, fmpq

    from numerics.contexts import ArbContext

    s = Setting(4, lengths=lengths)
    p, lo, d = s.p_value, (1 if lengths == "positive" else 0), 4
    enum = SeriesEvaluator(s, context="arb", tol=1e-6)._enum([1, d - 1])
    total = p if lo == 0 else Fraction(0)
    with ArbContext(400):  # the exact rationals as far narrower balls than the weights
        for (c, r), w in zip(enum.counts.tolist(), enum.weights):
            n = c + r
            exact = p * (1 - p) ** (n - lo) * comb(n, c) * Fraction(1, d) ** c * Fraction(d - 1, d) ** r
            assert w.contains(arb(fmpq(exact.numerator, exact.denominator)))
            total += exact
        gap = 1 - total
        assert 0 < gap <= 1e-6 and enum.omitted.contains(arb(fmpq(gap.numerator, gap.denominator)))


def test_negative_binomial_fast_path_equals_scipy_stats():
    """series uses the Boost ufuncs behind scipy.stats.nbinom directly (import time): same values."""
    from scipy.stats import nbinom

    from numerics.theorem.series import _nbinom

    pmf, isf = _nbinom()
    rng = np.random.default_rng(0)
    k, n, q = rng.integers(0, 3000, 2000), rng.integers(1, 60, 2000) + 0.0, rng.uniform(1e-3, 0.5, 2000)
    assert np.array_equal(pmf(k, n, q), nbinom.pmf(k, n, q))
    y = 10 ** rng.uniform(-22, -1, 2000)
    assert np.array_equal(isf(y, n, q), nbinom.isf(y, n, q))


def test_float_enumeration_from_the_disk_cache_is_bit_identical(tmp_path, monkeypatch):
    """The float enumeration read back from the disk cache equals the one built (counts, weights, omitted
    mass, bit for bit) and the one built without a cache; a corrupt file is rebuilt, an enumeration above
    FLOAT_CACHE_TERMS is not stored, and at most max_files values are kept (the least recently used go)."""
    import time

    from theory.cache import file_value

    from numerics.theorem import series
    monkeypatch.setenv("OCC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("OCC_NO_CACHE", raising=False)
    args = (20, Fraction(1, 19), 1, (1, 19), 1e-12, ("float",), 3_000_000)

    def fresh(a=args):
        series._enumeration.cache_clear()
        return series._enumeration(*a)

    try:
        cold = fresh()
        files = list(tmp_path.glob("value-series-*.pickle"))
        assert len(files) == 1
        warm = fresh()
        monkeypatch.setenv("OCC_NO_CACHE", "1")
        uncached = fresh()
        monkeypatch.delenv("OCC_NO_CACHE")
        files[0].write_bytes(b"not a pickle")
        rebuilt = fresh()
        for other in (warm, uncached, rebuilt):
            assert np.array_equal(other.counts, cold.counts) and np.array_equal(other.weights, cold.weights)
            assert other.omitted == cold.omitted and other.weights.dtype == float
        assert len(cold.counts) > 1000
        monkeypatch.setattr(series, "FLOAT_CACHE_TERMS", 1000)
        fresh((21,) + args[1:])
        assert len(list(tmp_path.glob("value-series-*.pickle"))) == 1
    finally:
        series._enumeration.cache_clear()
    for i in range(4):
        assert file_value("numerics.theorem.series", ("test", i), lambda: i, keep=lambda v: True, max_files=2) == i
        time.sleep(0.05)  # distinct modification times (the file system's clock is coarse)
    assert file_value("numerics.theorem.series", ("test", 3), lambda: -1, keep=lambda v: True, max_files=2) == 3
    assert file_value("numerics.theorem.series", ("test", 0), lambda: -1, keep=lambda v: True, max_files=2) == -1


@pytest.mark.slow  # a subprocess
def test_a_start_with_the_enumeration_cached_does_not_import_scipy_special(tmp_path):
    """The regime's moments from a warm cache need no scipy.special (a third of the main job's start-up);
    the cold start imports it to build the weights."""
    import os
    import subprocess
    import sys

    code = ("import sys; from numerics.theorem.series import SeriesEvaluator; from theory.setting import Setting; "
            "m = SeriesEvaluator(Setting(20)).quadratic_moments(0.0, 0.0); "
            "print('scipy.special' in sys.modules, repr(m.M[0][0]))")
    env = dict(os.environ, OCC_CACHE_DIR=str(tmp_path))
    env.pop("OCC_NO_CACHE", None)
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
            .stdout.split() for _ in range(2)]
    assert runs[0][0] == "True" and runs[1][0] == "False"
    assert runs[0][1] == runs[1][1]
