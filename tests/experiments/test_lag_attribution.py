"""The attribution measure (``lag.attribution``): each block's first-order part of the risk decrease along
a path.  On a quadratic risk the higher-order term of every step is known in closed form, so the remainder is
checked against it; a frozen block gets no share and no half time; the parts and half times are the same
when a block is expressed in other linear coordinates, where the displacement's half time is not."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from numerics.experiments import lag
from numerics.experiments import runner

RNG = np.random.default_rng(7)
M = RNG.standard_normal((5, 5))
H = M @ M.T / 5 + np.eye(5)          # Hessian of the quadratic risk in (alpha (2), B (3)) stacked
TARGET = RNG.standard_normal(5)


def _risk_and_grad(alpha, B):
    x = np.concatenate([np.ravel(alpha), np.ravel(B)]) - TARGET
    g = H @ x
    return 0.5 * x @ g, g[:2].reshape(np.shape(alpha)), g[2:].reshape(np.shape(B))


def _gd_path(lr_att, lr_out, steps):
    alpha, B = np.zeros(2), np.zeros(3)
    path = [(alpha, B)]
    for _ in range(steps):
        _, ga, gB = _risk_and_grad(alpha, B)
        alpha, B = alpha - lr_att * ga, B - lr_out * gB
        path.append((alpha, B))
    return path


def test_parts_and_remainder_add_up_to_the_decrease():
    path = _gd_path(0.3, 0.2, 40)
    res = lag.path_attribution(path, _risk_and_grad)
    r0, rT = _risk_and_grad(*path[0])[0], _risk_and_grad(*path[-1])[0]
    assert res["total"] == r0 - rT
    exact = Fraction(r0) - Fraction(rT) - Fraction(res["att"]) - Fraction(res["out"])
    assert abs(exact - Fraction(res["remainder"])) <= Fraction(abs(res["remainder"])) * Fraction(2) ** -50
    # a quadratic's step changes R by g . step + step' H step / 2 exactly: the remainder is minus the sum of
    # the second-order terms (a dropped sign or term in the parts moves it by far more than rounding)
    second = math.fsum(0.5 * s @ H @ s for s in (np.concatenate([a1 - a0, b1 - b0])
                                                for (a0, b0), (a1, b1) in zip(path, path[1:])))
    assert res["remainder"] == pytest.approx(-second, rel=1e-10)
    assert res["att"] > 0 and res["out"] > 0
    assert res["share_att"] + res["share_out"] + res["remainder"] / res["total"] == pytest.approx(1, abs=1e-14)


def test_a_frozen_block_gets_no_share():
    res = lag.path_attribution(_gd_path(0.0, 0.2, 30), _risk_and_grad)
    assert res["att"] == 0 and res["share_att"] == 0
    assert res["t_half_att"] is None and res["ratio"] is None
    assert res["t_half_out"] is not None and res["share_out"] > 0.5


def test_half_times_of_cumulative_parts():
    res = lag.attribution([10.0, 6.0, 3.0, 1.0, 0.0], [0.0, 0.0, 2.0, 1.0], [4.0, 3.0, 0.0, 0.0])
    # attention: cumulative 0, 0, 0, 2, 3 (half of 3 first reached at t = 3); readout: 0, 4, 7 (half at t = 1)
    assert (res["t_half_att"], res["t_half_out"], res["ratio"]) == (3, 1, 3.0)
    assert res["remainder"] == 0.0


def test_invariant_under_a_linear_change_of_coordinates():
    """The same path in coordinates phi = A^-1 alpha (gradient A^T g, move A^-1 step): every part is kept;
    the displacement's half time, which measures |phi_t - phi_0|, is not."""
    # the attention's first coordinate moves over steps 0-10, its second over steps 10-20
    path = [(np.array([min(t, 10) / 10, max(t - 10, 0) / 10]), np.full(3, t / 20)) for t in range(21)]
    A = np.diag([1.0, 40.0])
    Ainv = np.linalg.inv(A)

    def in_phi(phi, B):
        r, ga, gB = _risk_and_grad(A @ phi, B)
        return r, A.T @ ga, gB

    res = lag.path_attribution(path, _risk_and_grad)
    res_phi = lag.path_attribution([(Ainv @ a, b) for a, b in path], in_phi)
    for k in ("att", "out", "total"):
        assert res_phi[k] == pytest.approx(res[k], rel=1e-12)
    assert (res_phi["t_half_att"], res_phi["t_half_out"]) == (res["t_half_att"], res["t_half_out"])

    def disp_half(points):
        dist = [np.linalg.norm(p - points[0]) for p in points]
        return lag.t_half(list(range(len(points))), dist)
    assert disp_half([a for a, _ in path]) != disp_half([Ainv @ a for a, _ in path])


def test_gd_attribution_on_the_exact_population_is_the_runs_decrease():
    """Joint GD from zero on the exact occurrence population: the readout's part comes first (the attention's
    gradient vanishes while the readout is zero), and the parts add up to the decrease."""
    cfg = runner.Config.quick(tasks=("occurrence",))
    row = runner.Row.of(cfg, "occurrence")
    data = runner.make_data(row, 0)
    a0, b0 = runner.initial_params(row, 0)
    res = lag.gd_attribution(a0, b0, 2.0, 2.0, 60, data.train, data.val, row.loss)
    assert res["total"] > 0
    assert res["att"] + res["out"] + res["remainder"] == pytest.approx(res["total"], rel=1e-12)
    assert res["t_half_out"] < res["t_half_att"]
    frozen = lag.gd_attribution(a0, b0, 0.0, 2.0, 60, data.train, data.val, row.loss)
    assert frozen["att"] == 0 and frozen["t_half_att"] is None
