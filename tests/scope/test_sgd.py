"""Study 3 (stochastic gradients): a mini-batch step is the population step up to its sampling error, the
held-out estimate agrees with the exact risk, and the study summarises on a tiny grid."""
import numpy as np

from numerics.theorem.montecarlo import estimate, sample_counts
from numerics.scope import sgd
from numerics.theorem.series import SeriesEvaluator
from numerics.theorem.training import Plan, Phase, Trainer
from theory.setting import Setting

S = Setting(4)


def test_one_minibatch_output_step_is_the_population_step_within_its_sampling_error():
    """beta after one output step of size eta on b strings is -eta times the batch mean gradient; its
    deviation from the exact population step is within 5 standard errors (a wrong sign, scale or layer
    fails by far more)."""
    ev = SeriesEvaluator(S)
    plan = Plan("one step", (Phase("output", "output", 2.0, 1),))
    b = 20_000
    rng = np.random.default_rng([0, b, 0, 0])
    test = sample_counts(S, 500, np.random.default_rng(9))[1]
    run = sgd.sgd_run(S, plan, b, rng, test, Trainer(ev))
    pop = Trainer(ev).run(plan).final
    want = np.array([pop.beta_a] + [pop.beta_b] * (S.d - 1))
    counts = sample_counts(S, b, np.random.default_rng([0, b, 0, 0]))[1]
    se = 2.0 * estimate(S, np.zeros(S.d), np.zeros(S.d), counts=counts).grad_beta_se
    assert np.abs(want).min() > 20 * se.max()
    assert np.all(np.abs(np.array(run["final_beta"]) - want) <= 5 * se)
    assert run["final_alpha"] == [0.0] * S.d


def test_held_out_estimate_agrees_with_the_exact_risk():
    ev = SeriesEvaluator(S)
    alpha, beta = [0.7, 0.0, 0.0, 0.0], [1.2, -0.4, -0.4, -0.4]
    exact = float(ev.evaluate(alpha, beta).risk)
    plan = Plan("none", (Phase("output", "output", 0.0, 1),))
    test = sample_counts(S, 50_000, np.random.default_rng(4))[1]
    run = sgd.sgd_run(S, plan, 1, np.random.default_rng(1), test, Trainer(ev))
    assert run["final_beta"] == [0.0] * S.d  # a zero step leaves zero
    est = estimate(S, alpha, beta, counts=test)
    assert abs(est.risk - exact) <= 4 * est.risk_se


def test_tiny_study():
    cfg = sgd.config(True) | {"d": 4, "batch": [1, 64], "batch_scan": [1, 64, 1024], "seeds": 2, "steps": 20,
                              "test_size": 300}
    us = sgd.units(cfg)
    assert set(us) == {"population"} | {f"b={b} seed={s}" for b in (1, 64, 1024) for s in (0, 1)}
    assert us["b=1024 seed=0"]["plans"] == ["three_phase"] and len(us["b=1 seed=0"]["plans"]) == 5
    results = {n: sgd.unit(a) for n, a in us.items()}
    assert results["b=64 seed=1"] == sgd.unit(us["b=64 seed=1"])  # deterministic given its args
    s = sgd.summarise(cfg, results)
    assert s["verdict"]["population_three_phase"] <= cfg["epsilon"]
    assert len(s["table"]) == 10 and [x["batch"] for x in s["scan"]] == [1, 64, 1024]
    assert all(0 <= x["rate_low"] <= x["reached"] / x["seeds"] <= x["rate_high"] <= 1 for x in s["scan"])
