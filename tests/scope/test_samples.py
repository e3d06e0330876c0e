"""Study 5 (sample-complexity constant): the fits recover known constants and shapes on synthetic data, the
crossing rule, and one unit at a tiny size."""
import math

import numpy as np
import pytest

from numerics.scope import samples

DS = np.array([5, 10, 20, 50, 100, 200])


def test_fit_recovers_a_known_constant_exactly():
    Ns = 7.0 * DS * np.log(DS)
    fit = samples.fit_constant(DS, Ns)
    assert fit["C"] == pytest.approx(7.0, rel=1e-12)
    assert fit["rms_log_residual"] < 1e-12


def test_fit_recovers_constant_and_shape_under_noise():
    """log-normal noise of 10 %: the 95 % interval covers the true C, and d ln d beats d and d^2; the same
    data read as N = C d gives a wrong shape, so the shape comparison can fail."""
    rng = np.random.default_rng(0)
    covered = 0
    for _ in range(40):
        Ns = 7.0 * DS * np.log(DS) * np.exp(rng.normal(0, 0.1, len(DS)))
        fit = samples.fit_constant(DS, Ns)
        covered += fit["C_low"] <= 7.0 <= fit["C_high"]
        rms = {s: samples.fit_constant(DS, Ns, s)["rms_log_residual"] for s in samples.SHAPES}
        assert min(rms, key=rms.get) == "d ln d"
    assert covered >= 34  # 95 % nominal: 38 expected of 40
    Ns = 3.0 * DS * DS
    rms = {s: samples.fit_constant(DS, Ns, s)["rms_log_residual"] for s in samples.SHAPES}
    assert min(rms, key=rms.get) == "d^2"
    assert samples.fit_power(DS, Ns)["b"] == pytest.approx(2.0, abs=1e-9)


def test_smallest_n_takes_the_first_n_from_which_every_larger_one_succeeds():
    grid = [(10, 0, 20), (20, 19, 20), (40, 15, 20), (80, 18, 20), (160, 20, 20)]
    assert samples.smallest_n(grid, 0.9) == {"N": 80, "N_below": 40, "censored": None}
    assert samples.smallest_n(grid[:3], 0.9)["censored"] == "above"
    assert samples.smallest_n(grid[3:], 0.9)["censored"] == "below"


def test_wilson_interval():
    lo, hi = samples.wilson(18, 20)
    assert lo < 0.9 < hi and 0.6 < lo and hi < 1
    assert samples.wilson(20, 20)[1] == pytest.approx(1.0)


def test_units_and_one_unit():
    cfg = samples.config(True) | {"d": [5], "c_grid": [1.0, 1.1], "seeds": 2, "test_size": 500}
    us = samples.units(cfg)
    assert list(us) == ["d=5 N=9"]  # equal N is one unit
    r = samples.unit(us["d=5 N=9"])
    assert len(r["reached"]) == 2 and r["N"] == math.ceil(5 * math.log(5))
    assert all(x > 0 for x in r["test_risk"])


def test_summary_on_constructed_results():
    cfg = samples.config(True) | {"d": [5, 10, 20], "c_grid": [1.0, 2.0, 4.0, 8.0], "seeds": 10}
    results = {}
    for name, a in samples.units(cfg).items():
        k = 10 if a["N"] >= 4 * a["d"] * math.log(a["d"]) - 1 else 3
        results[name] = {"N": a["N"], "reached": [True] * k + [False] * (10 - k), "test_risk": [1e-3] * 10}
    s = samples.summarise(cfg, results)
    assert [r["N"] for r in s["table"]] == [math.ceil(4 * d * math.log(d)) for d in (5, 10, 20)]
    fit = s["verdict"]["fits"]["d ln d"]
    assert 2.0 < fit["C"] < 4.0 and s["verdict"]["best_shape"] == "d ln d"
