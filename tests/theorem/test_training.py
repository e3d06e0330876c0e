"""The simulator: output phases iterated in closed form follow the series-gradient descent step by step;
phases, plans and recording behave as documented."""
import numpy as np
import pytest

from numerics.theorem.series import SeriesEvaluator
from numerics.theorem.training import (
    Phase,
    Trainer,
    Trajectory,
    joint,
    output_descent,
    output_only,
    three_phase,
)
from theory.setting import Setting
from theory.validation import SettingError


def _series_descent(evaluator, state, eta, T):
    """Output GD with a series gradient at every step (the definition the closed form must match)."""
    aa, ab, ba, bb = state
    risks = []
    for _ in range(T):
        g = evaluator.evaluate_symmetric(aa, ab, ba, bb).grad_beta
        ba, bb = ba - eta * float(g[0]), bb - eta * float(g[1])
        risks.append(float(evaluator.evaluate_symmetric(aa, ab, ba, bb).risk))
    return (ba, bb), risks


@pytest.mark.parametrize("d,lengths,gap", [(4, "positive", 0.0), (5, "positive", 2.5), (4, "nonnegative", 1.5)])
def test_closed_form_output_phase_matches_series_descent(d, lengths, gap):
    evaluator = SeriesEvaluator(Setting(d, lengths=lengths))
    trainer = Trainer(evaluator)
    start = (gap, 0.0, 0.3, -0.2)  # an output phase from attention gap `gap` and some output weights
    expected, risks = _series_descent(evaluator, start, 0.7, 12)
    got = Trajectory("probe")
    end = trainer._output_closed_form(got, start, Phase("output", "output", 0.7, 12), 0, _Bar())
    assert np.allclose(end[2:], expected, rtol=0, atol=1e-11)
    assert np.allclose([pt.risk for pt in got.points], risks, rtol=0, atol=1e-11)


def _quadratic_loop(M, m, D, eta, beta, T):
    """The output recurrence step by step, every iterate kept (the definition of ``output_descent``)."""
    out = [np.array(beta, dtype=float)]
    for _ in range(T):
        out.append(out[-1] - eta * D * (M @ out[-1] - m))
    return np.array(out)


@pytest.mark.parametrize("d,gap,eta", [(4, 0.0, 1.0), (5, 2.5, 0.7), (10, 6.0, 1.0), (7, 1.0, 1.9)])
def test_output_descent_matches_the_step_by_step_loop(d, gap, eta):
    """The closed form against the loop at every step of a long phase, to 1e-12 relative (on the series
    moments of a real phase 3: slow and fast eigen-directions, an overshooting step at eta = 1.9)."""
    moments = SeriesEvaluator(Setting(d)).quadratic_moments(gap, 0.0)
    M = np.array([[float(x) for x in row] for row in moments.M])
    m = np.array([float(x) for x in moments.m])
    D = np.array([1.0, 1.0 / (d - 1)])
    T = 3000
    loop = _quadratic_loop(M, m, D, eta, [0.3, -0.2], T)
    closed = output_descent(M, m, D, eta, [0.3, -0.2], np.arange(T + 1))
    scale = np.linalg.norm(loop, axis=1, keepdims=True)
    assert np.max(np.abs(closed - loop) / scale) < 1e-12
    risk = lambda b: 0.5 * np.einsum("ti,ij,tj->t", b, M, b) - b @ m + 0.5  # noqa: E731
    # the risk formula cancels terms of order 1 (a few ulp absolute) down to risks of order 1e-4
    assert np.allclose(risk(closed), risk(loop), rtol=1e-12, atol=1e-15)
    # the iterates really move: the phase is not a fixed point, so the comparison has something to catch
    assert np.linalg.norm(loop[-1] - loop[0]) > 0.1 and np.linalg.norm(loop[1] - loop[0]) > 1e-3


def test_output_descent_singular_and_divergent_curvature():
    """lambda = 0 (a flat direction: the iterate moves linearly) and eta lambda > 2 (divergence) follow
    the loop too."""
    M, m, D = np.array([[1.0, 0.0], [0.0, 0.0]]), np.array([0.5, 0.25]), np.array([1.0, 1.0])
    loop = _quadratic_loop(M, m, D, 0.5, [0.0, 0.0], 40)
    assert np.allclose(output_descent(M, m, D, 0.5, [0.0, 0.0], np.arange(41)), loop, rtol=1e-13, atol=1e-15)
    loop = _quadratic_loop(M, m, D, 2.5, [0.1, 0.0], 40)
    assert np.allclose(output_descent(M, m, D, 2.5, [0.1, 0.0], np.arange(41)), loop, rtol=1e-12, atol=0)


def test_long_phase_records_log_spaced_exact_points():
    """max_points keeps a log-spaced subset of a long output phase; each kept point is the loop's iterate
    at that step with its quadratic risk, and the end is a fresh series evaluation."""
    d = 6
    evaluator = SeriesEvaluator(Setting(d))
    tr = Trainer(evaluator, max_points=30)
    traj = tr.run(output_only(1.0, 5000))
    steps = [pt.step for pt in traj.points]
    assert steps[0] == 0 and steps[-1] == 5000 and 20 <= len(steps) <= 31 and steps == sorted(set(steps))
    assert steps[1:4] == [1, 2, 3]  # dense at the start
    moments = evaluator.quadratic_moments(0.0, 0.0)
    M = np.array([[float(x) for x in row] for row in moments.M])
    m = np.array([float(x) for x in moments.m])
    loop = _quadratic_loop(M, m, np.array([1.0, 1.0 / (d - 1)]), 1.0, [0.0, 0.0], 5000)
    for pt in traj.points[1:]:
        b = loop[pt.step]
        assert np.allclose([pt.beta_a, pt.beta_b], b, rtol=1e-12, atol=0)
        assert abs(pt.risk - (0.5 * b @ M @ b - m @ b + 0.5)) <= 1e-12 * pt.risk + pt.risk_bound
    end = evaluator.evaluate_symmetric(0.0, 0.0, traj.final.beta_a, traj.final.beta_b)
    assert traj.final.risk == float(end.risk)


class _Bar:
    def update(self, n=1):
        pass

    def close(self):
        pass


def test_plans_record_phase_ends_and_progress():
    calls = []

    class Bar(_Bar):
        def __init__(self, desc, total):
            calls.append((desc, total))

    trainer = Trainer(SeriesEvaluator(Setting(4)), record_every=None, progress=Bar)
    traj = trainer.run(three_phase(2.0, 10.0, 1.0, 7))
    assert traj.phase_ends == [1, 2, 9]
    assert [pt.step for pt in traj.points] == [0, 1, 2, 9]
    assert calls == [("three-phase: phase 1 (output)", 1), ("three-phase: phase 2 (attention)", 1),
                     ("three-phase: phase 3 (output)", 7)]


def test_joint_moves_both_layers_and_output_only_keeps_attention():
    trainer = Trainer(SeriesEvaluator(Setting(4)), record_every=5)
    j = trainer.run(joint(1.0, 10))
    assert j.final.alpha_a != 0 and j.final.beta_a != 0
    o = trainer.run(output_only(1.0, 10))
    assert o.final.alpha_a == o.final.alpha_b == 0 and [pt.step for pt in o.points] == [0, 5, 10]


def test_bad_phases_and_divergence_are_refused():
    with pytest.raises(SettingError, match="layer must be one of"):
        Phase("x", "both", 1.0, 1)
    with pytest.raises(SettingError, match="record_every"):
        Trainer(SeriesEvaluator(Setting(4)), record_every=0)
    with pytest.raises(SettingError, match="max_points"):
        Trainer(SeriesEvaluator(Setting(4)), max_points=1)
    with pytest.raises(SettingError, match="diverged"):
        Trainer(SeriesEvaluator(Setting(4))).run(output_only(1e6, 200))


def test_finite_sample_phase3_equals_sample_gradient_steps():
    """The quadratic form of phase 3 reproduces T steps of the per-string sample gradient."""
    from numerics.theorem.finite_sample import three_phase_finite
    from numerics.theorem.montecarlo import estimate, sample_counts

    s = Setting(6)
    run = three_phase_finite(s, 2.0, 30.0, 0.8, 15, 400, 300, seed=4, test_size=50)
    rng = np.random.default_rng(4)
    sample_counts(s, 400, rng)
    _, c3 = sample_counts(s, 300, rng)
    beta = run.beta_phase1.copy()
    for _ in range(15):
        beta = beta - 0.8 * estimate(s, run.alpha, beta, counts=c3).grad_beta
    assert np.allclose(run.beta, beta, rtol=0, atol=1e-12)
