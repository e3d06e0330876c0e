"""The lag map (``numerics.experiments.lag_map``): the crossover rho* bracketed by decided grid points (a
crossing, none, intervals straddling 1 in between), the side of the risk-optimal rho, a seed's ratio interval
from its resolution, the grid's rho = 1, the readout's start at each scale, and a run that resumes from a
partial store."""
from __future__ import annotations

import math

import numpy as np
import pytest

from numerics import units
from numerics.experiments import lag_map
from numerics.experiments import runner
from theory.validation import SettingError


def test_crossover_bracketed_by_the_points_either_side():
    c = lag_map.crossover([0.25, 1, 4, 16], ["lags", "lags", "leads", "leads"])
    assert c["bracketed"] and c["bracket"] == [1, 4] and c["rho_star"] == 2.0
    assert c["direction"] == "lags to leads" and len(c["crossings"]) == 1


def test_crossover_not_bracketed():
    c = lag_map.crossover([0.25, 1, 4, 16], ["lags", "lags", "undecided", "lags"])
    assert not c["bracketed"] and c["rho_star"] is None and c["bracket"] is None and c["direction"] == "lags"
    assert lag_map.crossover([1, 4], ["undecided", "undecided"])["direction"] == "undecided"


def test_straddling_intervals_widen_the_bracket():
    """Points whose intervals contain 1 are skipped: the bracket runs from the last point decided on one side
    to the first decided on the other."""
    c = lag_map.crossover([0.25, 1, 4, 16, 64], ["lags", "undecided", "undecided", "leads", "leads"])
    assert c["bracket"] == [0.25, 16] and c["rho_star"] == pytest.approx(2.0)
    two = lag_map.crossover([1, 4, 16, 64], ["leads", "lags", "lags", "leads"])
    assert [x["bracket"] for x in two["crossings"]] == [[1, 4], [16, 64]] and two["direction"] == "leads to lags"


def test_side_and_cell_intervals():
    assert [lag_map.side(*iv) for iv in ((1.01, 3), (0.2, 0.99), (0.9, 1.1), (1, 2))] == \
        ["lags", "leads", "undecided", "undecided"]
    # t_half(att) = 10 located to within 2 steps, t_half(out) = 5: the ratio lies in [8/5, 10/3]
    assert lag_map.seed_interval({"t_half_att": 10, "t_half_out": 5, "resolution": 2}) == (8 / 5, 10 / 3)
    assert lag_map.seed_interval({"t_half_att": 10, "t_half_out": 2, "resolution": 2})[1] == math.inf
    assert lag_map.seed_interval({"t_half_att": None, "t_half_out": 2, "resolution": 0}) is None

    def seed(ta, to):
        return {"lag": {"m": {"t_half_att": ta, "t_half_out": to, "resolution": 0, "ratio": ta / to}}}
    cell = lag_map.cell_ratio([seed(12, 10), seed(30, 10)], "m")
    assert (cell["low"], cell["high"], cell["mean"], cell["side"]) == (1.2, 3.0, 2.1, "lags")
    assert lag_map.cell_ratio([seed(12, 10), seed(8, 10)], "m")["side"] == "undecided"   # seeds disagree


def test_remainder_share_is_the_largest_over_seeds():
    seeds = [{"lag": {"attribution": {"remainder": -0.1, "total": 2.0}}},
             {"lag": {"attribution": {"remainder": 0.3, "total": 2.0}}}, {"lag": {}}]
    assert lag_map.remainder_share(seeds) == 0.15
    assert lag_map.remainder_share([{"lag": {}}]) is None


def test_risk_optimal_side():
    opt = lag_map.risk_optimal([0.25, 1, 4], [0.3, 0.2, None], ["lags", "leads", "lags"])
    assert opt == {"rho": 1, "risk": 0.2, "side": "leads"}


def test_the_grid_has_rho_one():
    assert 1.0 in lag_map.RHOS and 1.0 in lag_map.MapConfig.quick().rhos
    with pytest.raises(SettingError, match="include 1"):
        lag_map.MapConfig.quick(rhos=(0.25, 4.0)).validate()
    with pytest.raises(SettingError, match="increasing"):
        lag_map.MapConfig.quick(rhos=(4.0, 1.0)).validate()
    with pytest.raises(SettingError, match="plain GD"):
        lag_map.MapConfig.quick(reading=lag_map.MapConfig.quick().reading.with_(optimizer="adam")).validate()
    cells = lag_map.cells(lag_map.MapConfig.quick(tasks=("occurrence",)))
    assert {rho for _, rho, _ in cells} == set(lag_map.MapConfig.quick().rhos)


def test_maps_of_other_grids_share_their_common_cells():
    small = lag_map.plan(lag_map.MapConfig.quick(tasks=("occurrence",), rhos=(1.0, 4.0), start_scales=(0.0,)))
    wide = lag_map.plan(lag_map.MapConfig.quick(tasks=("occurrence", "OR"), rhos=(0.25, 1.0, 4.0)))
    assert small[("occurrence", 1.0, 0.0)][0] == wide[("occurrence", 1.0, 0.0)][0]
    other_d = lag_map.plan(lag_map.MapConfig.quick(tasks=("occurrence",), d=9, rhos=(1.0,), start_scales=(0.0,)))
    assert other_d[("occurrence", 1.0, 0.0)][0] != small[("occurrence", 1.0, 0.0)][0]


def test_start_scales_the_readout_symmetrically():
    cfg = lag_map.MapConfig.quick(tasks=("OR",)).run_config()
    row = runner.Row.of(cfg, "OR")
    a0, b0 = lag_map.start(row, 3, 0.0)
    assert not a0.any() and not b0.any()
    a, b = lag_map.start(row, 3, 0.1)
    assert not a.any() and b.std() > 0
    assert np.all(b[:, 0] == b[:, 1]) and np.all(b[:, 2:] == b[:, 2:3])   # OR: a, b alike; unmarked alike
    a2, b2 = lag_map.start(row, 3, 1.0)
    assert np.allclose(b2, 10 * b)                                        # the same draw, ten times larger


class _InProcess:
    """A cluster whose client runs the units in threads of this process (connect counts its calls)."""

    def __init__(self):
        self.connected = 0
        self.client = None

    def connect(self):
        from distributed import Client

        self.connected += 1
        self.client = Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=":0")
        return self.client

    def close(self):
        if self.client is not None:
            self.client.close()


@pytest.mark.slow
def test_resumes_after_a_partial_store(tmp_path):
    """A store holding some of the cells: a run computes only the others, and a run over the complete store
    starts no cluster and gives the same map."""
    reading = lag_map.MapConfig.quick().reading.with_(max_steps=40)
    cfg = lag_map.MapConfig.quick(tasks=("occurrence",), rhos=(1.0, 4.0), start_scales=(0.0,), reading=reading)
    p = lag_map.plan(cfg)
    store = units.Store(tmp_path)
    first = next(iter(p.values()))
    store.put(first[0], first[1], units.run_unit(first[1]))
    cluster = _InProcess()
    summary, outcome = lag_map.run_map(cfg, store, cluster)
    assert outcome.reused == [first[0]] and len(outcome.trained) == 1 and cluster.connected == 1
    again, outcome2 = lag_map.run_map(cfg, store, _InProcess())
    assert len(outcome2.reused) == 2 and not outcome2.trained
    assert again["rows"] == summary["rows"]
    occ = summary["rows"]["occurrence"]["scales"]["0.0"]
    assert set(occ["measures"]) == {"displacement", "function", "alignment", "attribution"}
    assert occ["missing"] == []
