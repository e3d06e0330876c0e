"""Two-head AND trained on its population by the integral (the runner's ``and_heads_data="integral"``): the
engine hands an ``IntegralPopulation`` its work and gives the class population's numbers (risks and gradients
of several runs at once, the uniform-attention moment and so the output curvature); a run the integral refuses
comes back NaN and only that run; the squared loss only; a row on it records exact risks (validation and test),
sampled accuracies, several seeds (their starts differ) and the quadrature's estimate, while a sampled row
records none of it; the setting is checked before any work and set by its flag."""
from __future__ import annotations

import numpy as np
import pytest

from numerics.experiments import and_integral
from numerics.experiments import engine
from numerics.experiments import runner
from numerics.experiments.population import expand, population
from numerics.experiments.protocol import Reading
from numerics.experiments.tasks import length_parameter
from theory.validation import SettingError

D = 6


@pytest.fixture(scope="module")
def classes():
    return engine.from_batch(population("AND", D, 1e-16, 1e-16, merged=False))


def _runs(rng, R, heads=2, scale=2.0):
    """R runs' parameters equal on the unmarked symbols (the class population's assumption)."""
    a3, b3 = scale * rng.standard_normal((R, heads, 3, 1)), rng.standard_normal((R, heads, 3, 1))
    return np.stack([expand(a, D, 2)[..., 0] for a in a3]), np.stack([expand(b, D, 2) for b in b3])


def test_the_engine_gives_the_class_populations_risks_and_gradients_of_several_runs(classes):
    alpha, B = _runs(np.random.default_rng(3), 3)
    pop = and_integral.IntegralPopulation(D, length_parameter("AND", D))
    r, ga, gB, f = engine.risk_and_grad(alpha, B, pop, "squared", with_f=False)
    want = engine.risk_and_grad(alpha, B, classes, "squared", with_f=False)
    assert f is None and ga.shape == alpha.shape and gB.shape == B.shape
    assert np.abs(r - want[0]).max() <= 1e-12
    assert np.abs(ga - want[1]).max() <= 1e-12 and np.abs(gB - want[2]).max() <= 1e-12
    assert np.abs(engine.risk(alpha, B, pop) - want[0]).max() <= 1e-12


def test_accuracies_come_from_the_sampled_set_and_risks_from_the_integral(classes):
    alpha, B = _runs(np.random.default_rng(4), 2)
    p = length_parameter("AND", D)
    risk, acc, ties = engine.risk_and_accuracy(alpha, B, and_integral.IntegralPopulation(D, p))
    assert acc is None and ties is None
    wr, wa, wt = engine.risk_and_accuracy(alpha, B, classes)
    risk, acc, ties = engine.risk_and_accuracy(alpha, B, and_integral.IntegralPopulation(D, p, classes))
    assert np.abs(risk - wr).max() <= 1e-12
    assert np.array_equal(acc, wa) and np.array_equal(ties, wt)


def test_the_moment_and_the_output_curvature_are_the_class_populations(classes):
    pop = and_integral.IntegralPopulation(D, length_parameter("AND", D))
    got, want = engine.uniform_mean_token_moment(pop), engine.uniform_mean_token_moment(classes)
    want = np.tril(want) + np.tril(want, -1).T
    # the class population spreads the unmarked symbols' count evenly over them: its moment is the true one
    # on vectors equal on those symbols (P averages them), and differs off them
    P = np.eye(D)
    P[2:, 2:] = 1 / (D - 2)
    assert np.abs(P @ got @ P - P @ want @ P).max() <= 1e-14 and np.abs(got - want).max() > 1e-3
    assert np.linalg.eigvalsh(got)[-1] == pytest.approx(1 / D, rel=1e-14)
    assert runner.output_curvature(pop, "squared") == pytest.approx(1 / D, rel=1e-14)
    assert runner.output_curvature(classes, "squared") == pytest.approx(1 / D, rel=1e-12)
    assert np.allclose(and_integral.IntegralPopulation(4, 1.0).uniform_mean_token_moment(), np.eye(4) / 4, rtol=0, atol=0)


def test_the_moment_is_the_exhaustive_sum_over_count_vectors():
    """Off the vectors equal on the unmarked symbols too: every count vector of d = 3 symbols, lengths to a
    tail of 1e-18."""
    from scipy.special import gammaln

    d, p = 3, 0.4
    want, n = np.zeros((d, d)), 1
    while p * (1 - p) ** (n - 1) >= 1e-18:
        for c0 in range(n + 1):
            for c1 in range(n + 1 - c0):
                c = np.array([c0, c1, n - c0 - c1], float)
                w = p * (1 - p) ** (n - 1) * np.exp(gammaln(n + 1) - gammaln(c + 1).sum() - n * np.log(d))
                want += w * np.outer(c, c) / n ** 2
        n += 1
    # (the reference's weights, exp of log-gamma sums near 200, carry relative errors of about 1e-14)
    assert np.abs(and_integral.IntegralPopulation(d, p).uniform_mean_token_moment() - want).max() <= 5e-14


def test_a_refused_run_comes_back_nan_and_alone():
    alpha, B = _runs(np.random.default_rng(5), 3, scale=0.5)
    alpha[1, 0, 0] += 250.0  # a spread above GRAD_MAX_SPREAD: the gradient refuses it
    alpha[2, 1, 3] = np.inf
    pop = and_integral.IntegralPopulation(D, length_parameter("AND", D))
    r, ga, gB, _ = engine.risk_and_grad(alpha, B, pop, with_f=False)
    assert np.isfinite(r[0]) and np.isfinite(ga[0]).all() and np.isfinite(gB[0]).all()
    assert np.isnan(r[1:]).all() and np.isnan(ga[1:]).all() and np.isnan(gB[1:]).all()
    risk = engine.risk(alpha, B, pop)
    assert np.isfinite(risk[:2]).all() and np.isnan(risk[2])  # the risk takes spreads up to MAX_SPREAD
    assert pop.error_estimate(alpha[2], B[2]) is None and pop.error_estimate(alpha[0], B[0]) >= 0


def test_only_the_squared_loss_and_no_outputs():
    alpha, B = np.zeros((1, 2, D)), np.zeros((1, 2, D, 1))
    pop = and_integral.IntegralPopulation(D, length_parameter("AND", D))
    with pytest.raises(SettingError, match="squared"):
        engine.risk(alpha, B, pop, "cross_entropy")
    with pytest.raises(SettingError, match="outputs"):
        engine.risk_and_grad(alpha, B, pop)


def test_the_setting_is_checked_and_set_by_its_flag():
    with pytest.raises(SettingError, match="and_heads_data"):
        runner.Config(and_heads_data="exact").validate()
    from app.cli import build_parser
    from app.commands.table1 import config_from_args

    def parse(*argv):
        return build_parser().parse_args(["table1", *argv])

    assert config_from_args(parse("--and-heads-data", "integral", "--tasks", "AND")).and_heads_data == "integral"
    assert config_from_args(parse()).and_heads_data == "sampled"
    with pytest.raises(SystemExit):
        parse("--and-heads-data", "exact")


def test_a_run_the_integral_refuses_keeps_its_last_parameters_and_is_recorded_as_refused(monkeypatch):
    """A start whose scores spread over GRAD_MAX_SPREAD: the bank takes no step of that run (its parameters
    and distances stay finite, so the row can be written as JSON), the other runs train, and the runner records
    the run as refused by the integral, which the verdicts name instead of a divergence; readouts large enough
    to overflow the sums come back NaN as well, not as an error that would end the row."""
    import json

    from numerics.experiments import verdicts
    alpha, B = _runs(np.random.default_rng(6), 1, scale=0.3)
    pop = and_integral.IntegralPopulation(D, length_parameter("AND", D))
    with np.errstate(over="ignore", invalid="ignore"):
        assert np.isnan(engine.risk(alpha, B * 1e160, pop)).all() and pop.refusal(alpha[0], B[0] * 1e160)
        assert np.isnan(engine.risk_and_grad(alpha, B * 1e160, pop, with_f=False)[0]).all()
    cfg, _ = _row("integral", train=False)
    row = runner.Row.of(cfg, "AND", 2)
    start = runner.initial_params(row, 0)
    wide = (start[0] + np.where(np.arange(cfg.d) == 0, 201.0, 0.0), start[1])
    monkeypatch.setattr(runner, "initial_params", lambda row, seed: wide if seed == 0 else start)
    chosen = {"three_phase": {"out": 0.5, "att": 10.0}, "joint": {"out": 0.5}, "output_only": {"out": 0.5},
              "attention_only": {"att": 10.0}}
    out = runner.report_seed(row, 0, chosen)
    json.dumps(out, allow_nan=False)
    for plan, res in out.items():
        assert res["diverged"] and res["integral_refused"] and res["steps"] == 1, plan  # stopped at its first
        assert res["alpha_dist"] == [0.0, 0.0] and res["B_dist"] == [0.0, 0.0]
    fine = runner.report_seed(row, 1, chosen)
    assert not any(r["diverged"] or r["integral_refused"] for r in fine.values())
    row = runner.assemble_row(row, {p: {"chosen": chosen[p]} for p in chosen}, {p: [out[p], fine[p]] for p in chosen},
                          {}, {})
    assert row["plans"]["joint"]["integral_refused"] == [0] and row["plans"]["joint"]["diverged"] == [0]
    row["plans"]["joint"]["search"] = {"all_diverged": False, "edge": []}
    why = verdicts.artefacts(row, ("joint",))
    assert any("the AND integral refused seeds [0]" in w for w in why) and not any("diverged" in w for w in why)


def test_the_quadrature_estimate_enters_the_verdicts_slack():
    from numerics.experiments import verdicts
    stats = {"mean": 0.1, "std": 0.0, "n": 1}
    plans = {p: {"risk": stats} for p in ("three_phase", "joint", "output_only")}
    plans["joint"]["quadrature_estimate"] = 0.25
    plans["three_phase"]["truncation_bound"] = 0.5
    assert verdicts.excess({"plans": plans}, "three_phase", "joint")[2] == 0.75


def _row(kind, train=True, tuning_seeds=1):
    reading = Reading(name="quick", max_steps=30, eval_every=5, patience=4, phase2_cap=10, tuning_seeds=tuning_seeds,
                      grid_points=3, max_extensions=0)
    cfg = runner.Config.quick(tasks=("AND",), and_heads=(2,), seeds=2, and_heads_data=kind, reading=reading).validate()
    return cfg, runner._run_row(runner.Row.of(cfg, "AND", 2)) if train else None


def test_a_row_on_the_integral_records_exact_risks_sampled_accuracies_and_several_seeds():
    from numerics.experiments import tasks as tasks_module
    cfg, row = _row("integral", tuning_seeds=2)
    p = length_parameter("AND", cfg.d)
    assert row["data"]["kind"] == "integral" and row["data"]["p"] == p and row["seeds_run"] == [0, 1]
    assert not row["exact"]
    tested = 0
    for plan, pr in row["plans"].items():
        assert pr["search"]["tuning_seeds"] == [1000, 1001]  # several: the starts differ
        if pr["chosen"] is None:
            continue
        programs = [runner._program(plan, pr["chosen"], {"plan": plan})]
        estimates = []
        for res in pr["seeds"]:
            seed = res["seed"]
            a0, b0 = runner.start_of(runner.Row.of(cfg, "AND", 2), seed, plan)
            start = and_integral.population_risk(a0, b0, cfg.d).risk
            assert res["curve"]["risk"][0] == start and res["val_curve"]["risk"][0] == start, plan
            # the test set: the sampler's stream 2 of the seed (not the validation stream, 1)
            draw = tasks_module.sample("AND", cfg.d, cfg.test_size, np.random.default_rng([seed, tasks_module.TASKS.index("AND"), 2, 0]),
                             seed=seed)
            acc = engine.risk_and_accuracy(a0[None], b0[None], engine.from_batch(draw))[1][0]
            assert res["curve"]["acc"][0] == acc
            # the estimate at the run's last parameters (the same run trained again)
            (rec,), data = runner._train(runner.Row.of(cfg, "AND", 2), seed, programs, record=True)
            if not rec.diverged:
                assert res["quadrature_estimate"] == data.test.error_estimate(rec.final_alpha, rec.final_B) > 0
                tested += 1
            estimates.append(res["quadrature_estimate"])
        assert pr["quadrature_estimate"] == max(e for e in estimates if e is not None)
    assert tested >= 4


def test_a_sampled_row_records_no_integral():
    cfg, row = _row("sampled")
    assert row["data"] == {"p": length_parameter("AND", cfg.d)}
    for pr in row["plans"].values():
        assert "quadrature_estimate" not in pr and all("quadrature_estimate" not in r for r in pr["seeds"])
