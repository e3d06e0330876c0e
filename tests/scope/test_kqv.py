"""Study 2 (key-query-value parameterisation): the simulator against the (alpha, beta) simulator, the chain
rule against finite differences of the exact risk, and the summary on a tiny grid."""
import numpy as np
import pytest

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
        assert row["lag"][meas]["call"] in ("holds", "does not hold", "undecided", "refused")
    # output-only keeps the attention at its start: its floor there bounds its risk from below
    for r in results.values():
        oo = r["plans"]["output_only"]
        assert oo["final_risk"] >= oo["floor_at_final_attention"] - 1e-9
        assert oo["final_params"][:2] == r["init_params"][:2]
