"""Study 2 (key-query-value parameterisation): the simulator against the (alpha, beta) simulator, the chain
rule against finite differences of the exact risk, the summary on a tiny grid, and the lag calls on synthetic
ratios against Table 1's practical band."""
import numpy as np
import pytest

from numerics.experiments import verdicts
from numerics.scope import kqv
from numerics.theorem.series import SeriesEvaluator
from numerics.theorem.training import Trainer, attention_then_output, joint, three_phase
from theory.setting import Setting

D = 5


@pytest.fixture(scope="module")
def evaluator():
    return SeriesEvaluator(Setting(D), tol=1e-13)


@pytest.mark.parametrize("plan", [three_phase(1.0, 40.0, 1.0, 12), attention_then_output(3.0, 0.8, 9),
                                  joint(1.5, 15, eta_attention=4.0)], ids=lambda p: p.name)
def test_m1_frozen_query_value_is_the_alpha_beta_trajectory(evaluator, plan):
    """m = 1, q = v = 1 held fixed, K = V = 0: alpha = K^T q = K, so GD on (K, V) is GD on (alpha, beta) from
    zero, step for step (the output phases of the reference are in closed form, here iterated)."""
    theta0 = np.zeros((6, 1))
    theta0[2, 0] = theta0[5, 0] = 1.0
    ours = kqv.KQVTrainer(evaluator, qv_step=0.0).run(plan, theta0)
    ref = Trainer(evaluator).run(plan)
    assert ours["steps"] == [pt.step for pt in ref.points]
    want = np.array([[pt.alpha_a, pt.alpha_b, pt.beta_a, pt.beta_b] for pt in ref.points])
    assert np.abs(want).max() > 0.1  # the plan moves
    np.testing.assert_allclose(ours["params"], want, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ours["risk"], ref.risks(), rtol=1e-9, atol=1e-12)


def test_chain_rule_matches_finite_differences_of_the_exact_risk(evaluator):
    """The directional derivative of R(alpha(theta), beta(theta)) along a random direction equals the
    gradient's inner product with it; rows k_b and v_b stand for d - 1 tied columns, so their per-column
    gradient counts d - 1 times (a missing factor, or a wrong sum in q or v, breaks this)."""
    rng = np.random.default_rng(3)
    theta = rng.normal(0, 0.7, size=(6, 3))
    weights = np.array([1, D - 1, 1, 1, D - 1, 1])[:, None]
    e = evaluator.evaluate_symmetric(*kqv.functional(theta))
    g = kqv.kqv_gradient(theta, [float(x) for x in e.grad_alpha], [float(x) for x in e.grad_beta], D)
    for _ in range(3):
        delta = rng.normal(size=theta.shape)
        h = 1e-5
        up = float(evaluator.evaluate_symmetric(*kqv.functional(theta + h * delta)).risk)
        down = float(evaluator.evaluate_symmetric(*kqv.functional(theta - h * delta)).risk)
        fd = (up - down) / (2 * h)
        assert abs(fd) > 1e-3
        assert abs(float((weights * g * delta).sum()) - fd) <= 1e-7 * max(1.0, abs(fd))


def test_trained_query_is_not_the_alpha_beta_trajectory(evaluator):
    """With q and v trained (qv_step = 1) the map alpha = K^T q gives a preconditioned GD, not the (alpha, beta)
    one: the control that the frozen-query test is not vacuous."""
    theta0 = np.zeros((6, 1))
    theta0[2, 0] = theta0[5, 0] = 1.0
    plan = joint(1.0, 10)
    ours = kqv.KQVTrainer(evaluator, qv_step=1.0).run(plan, theta0)
    ref = Trainer(evaluator).run(plan)
    want = np.array([ref.final.alpha_a, ref.final.alpha_b, ref.final.beta_a, ref.final.beta_b])
    assert np.abs(np.array(ours["params"][-1]) - want).max() > 1e-3


def test_initialisation_is_symmetric_seeded_and_small():
    a, b = kqv.initial_state(4, 0.01, 7), kqv.initial_state(4, 0.01, 7)
    assert a.shape == (6, 4) and np.array_equal(a, b)
    assert not np.array_equal(a, kqv.initial_state(4, 0.01, 8))
    assert np.abs(a).max() < 0.1


def test_tiny_study_summary():
    cfg = kqv.config(True) | {"d": 4, "m": [1], "scale": [1.0], "seeds": 2, "steps": 30}
    results = {name: kqv.unit(args) for name, args in kqv.units(cfg).items()}
    assert len(results) == 2
    s = kqv.summarise(cfg, results)
    row = s["table"][0]
    assert row["plans"]["joint"]["risk"]["n"] == 2
    v = s["verdict"]
    assert v["units"] == 2 and set(v["lag_calls"]) == {"displacement", "function"}
    for meas in ("displacement", "function"):
        assert row["lag"][meas]["call"] in kqv.LAG_OUTCOMES
    # output-only keeps the attention at its start: its floor there bounds its risk from below
    for r in results.values():
        oo = r["plans"]["output_only"]
        assert oo["final_risk"] >= oo["floor_at_final_attention"] - 1e-9
        assert oo["final_params"][:2] == r["init_params"][:2]


def _lag_results(ratios: list[float], t_half_out: float, resolution: int = 1) -> tuple[dict, dict]:
    """A one-cell configuration and synthetic results whose joint-GD lag has ``ratios`` over seeds (one seed
    each), t_half(output) = ``t_half_out`` and t_half(attention) = ratio x t_half(output), under both measures."""
    cfg = {**kqv.config(True), "d": 4, "m": [1], "scale": [0.5], "seeds": len(ratios)}
    plan = {"diverged": False, "final_risk": 0.1, "risk_bound": 0.0, "floor_at_final_attention": 0.05,
            "steps": [0, 1], "risk": [0.5, 0.1], "phase_ends": []}
    results = {}
    for name, a in kqv.units(cfg).items():
        r = ratios[a["seed"]]
        lag = {"t_half_att": r * t_half_out, "t_half_out": t_half_out, "resolution": resolution, "ratio": r}
        results[name] = {"regime": {}, "plans": {p: dict(plan) for p in kqv.PLANS}}
        results[name]["plans"]["joint"]["lag"] = {meas: dict(lag) for meas in kqv.MEASURES}
    return cfg, results


def _cell(ratios, t_half_out, resolution=1):
    s = kqv.summarise(*_lag_results(ratios, t_half_out, resolution))
    return s, s["table"][0]["lag"]["function"]


def test_a_two_percent_lag_is_no_appreciable_lag():
    """Ratio 1.02 +- 0.005 over three seeds, attention 5 steps later at resolution 1: its interval
    [1.003, 1.037] is above 1 (a comparison with 1 alone would call it a lag) but inside the band [0.8, 1.25],
    so the call is "no appreciable lag" and the claim "attention lags" does not hold."""
    s, cell = _cell([1.015, 1.02, 1.025], 250.0)
    assert cell["ratio"]["mean"] == pytest.approx(1.02) and cell["ratio"]["std"] == pytest.approx(0.005)
    lo, hi = cell["interval"]
    assert 1.0 < lo < 1.01 and 1.03 < hi < 1.04
    assert cell["call"] == "no appreciable lag" and cell["verdict"] == "does not hold"
    assert cell["band"] == [0.8, 1.25]
    assert s["verdict"]["lag_calls"]["function"] == {"attention lags": 0, "no appreciable lag": 1,
                                                     "attention leads": 0, "undecided": 0, "refused": 0}
    assert s["verdict"]["lag_rule"] == {"z": 3.0, "band": [0.8, 1.25], "rule": verdicts.rules()["lags"],
                                        "from_recorded_summary": False}


def test_a_ratio_of_1_6_lags_and_one_straddling_the_band_is_undecided():
    _, cell = _cell([1.58, 1.6, 1.62], 100.0)
    assert cell["interval"][0] > 1.25 and cell["call"] == "attention lags" and cell["verdict"] == "holds"
    # 1.3 +- 0.05: the interval [1.19, 1.41] crosses 1.25 (against 1 alone it would be a lag)
    _, cell = _cell([1.25, 1.3, 1.35], 100.0)
    assert cell["interval"][0] < 1.25 < cell["interval"][1] and cell["call"] == "undecided"
    _, cell = _cell([0.58, 0.6, 0.62], 100.0)
    assert cell["interval"][1] < 0.8 and cell["call"] == "attention leads" and cell["verdict"] == "does not hold"


def test_the_interval_is_table_1s_with_its_resolution_term():
    """The recorded interval is ``verdicts.ratio_interval`` (3 SE + the resolution carried to the ratio): at
    1.2 +- 0.005 the interval crosses the band's upper edge only through the resolution term, so a dropped
    resolution term calls the coarse cell "no appreciable lag"."""
    _, fine = _cell([1.195, 1.2, 1.205], 250.0, resolution=1)
    _, coarse = _cell([1.195, 1.2, 1.205], 250.0, resolution=20)
    se = 0.005 / np.sqrt(3)
    assert fine["interval"] == pytest.approx(list(verdicts.ratio_interval(1.2, se, 1, 250.0)))
    assert coarse["interval"] == pytest.approx(list(verdicts.ratio_interval(1.2, se, 20, 250.0)))
    assert fine["call"] == "no appreciable lag" and coarse["call"] == "undecided"


def test_the_calls_read_table_1s_band(monkeypatch):
    """The KQV calls use the band of ``verdicts`` itself: a band whose upper edge (1.001) is below the
    interval's lower end (about 1.003) makes the two-percent lag a lag, so a copy of the band (or a comparison with 1) in this module fails here or above."""
    monkeypatch.setattr(verdicts, "LAG_BAND", (0.99, 1.001))
    _, cell = _cell([1.015, 1.02, 1.025], 250.0)
    assert cell["call"] == "attention lags" and cell["band"] == [0.99, 1.001]


def test_no_ratio_is_refused():
    cfg, results = _lag_results([1.0, 1.0], 100.0)
    for r in results.values():
        del r["plans"]["joint"]["lag"]
    s = kqv.summarise(cfg, results)
    cell = s["table"][0]["lag"]["displacement"]
    assert cell["call"] == "refused" and cell["interval"] is None
    assert s["verdict"]["lag_calls"]["displacement"]["refused"] == 1


def test_decide_lags_calls_a_recorded_summary_again_from_its_statistics():
    """A summary recorded under another rule (calls "holds", no interval) gets the calls ``summarise`` makes
    from the same statistics, its counts with them, and nothing else moves; the recorded summary is kept."""
    fresh = kqv.summarise(*_lag_results([1.015, 1.02, 1.025], 250.0))
    old = {**fresh, "table": [dict(row) for row in fresh["table"]], "verdict": dict(fresh["verdict"])}
    for row in old["table"]:
        row["lag"] = {meas: {k: x[k] for k in ("ratio", "t_half_att", "t_half_out", "resolution")} | {"call": "holds"}
                      for meas, x in row["lag"].items()}
    old["verdict"]["lag_calls"] = {meas: {"holds": 1, "does not hold": 0, "undecided": 0, "refused": 0}
                                   for meas in kqv.MEASURES}
    del old["verdict"]["lag_rule"]
    again = kqv.decide_lags(old)
    assert old["table"][0]["lag"]["function"]["call"] == "holds"
    assert again["table"] == fresh["table"]
    assert again["verdict"]["lag_calls"] == fresh["verdict"]["lag_calls"]
    assert again["verdict"]["lag_rule"] == fresh["verdict"]["lag_rule"] | {"from_recorded_summary": True}
    rest = {k: v for k, v in again["verdict"].items() if k not in ("lag_calls", "lag_rule")}
    assert rest == {k: v for k, v in fresh["verdict"].items() if k not in ("lag_calls", "lag_rule")}
    assert again["curves"] == fresh["curves"]


def test_one_seed_with_a_ratio_leaves_the_cell_undecided():
    """The seeds are random starts: a cell where one seed has a ratio has no spread to judge by, so even a
    ratio far above the band is undecided (as Table 1 refuses to decide on one seed of a sampled row)."""
    _, cell = _cell([3.0], 250.0)
    assert cell["call"] == "undecided" and cell["reason"] == verdicts.ONE_SEED
    _, two = _cell([3.0, 3.1], 250.0)
    assert two["call"] == "attention lags"
