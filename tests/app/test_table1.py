"""The table1 command: flags checked before any work, results written and re-rendered, a killed run resumed,
the ICL cross-entropy variant trained on its own loss."""
from __future__ import annotations

import json

import numpy as np
import pytest

from app import exitcodes
from numerics.experiments import engine
from numerics.experiments import runner
from numerics.experiments import tasks
def _cli(argv) -> int:
    from app.cli import main
    return main(["table1", *argv])


@pytest.mark.parametrize("argv,flag", [(["--tasks", "XOR"], "--tasks"), (["--seeds", "0"], "--seeds"),
                                       (["--d", "3", "--tasks", "OR"], "--d"), (["--max-steps", "nan"], "--max-steps"),
                                       (["--k2", "0"], "--k2"), (["--reading", "best"], "--reading"),
                                       (["--max-steps", "2", "--k2", "5"], "--max-steps"),
                                       (["--tasks", "OR,OR"], "--tasks"), (["--d", "5000"], "--d"),
                                       (["--from-json", "x.json", "--rerun", "y.json"], "--rerun"),
                                       (["--from-json", "x.json", "--seeds", "9"], "--seeds")])
def test_table1_bad_input_names_the_flag(argv, flag, capsys, tmp_path):
    out = tmp_path / "res"
    assert _cli([*argv, "--out", str(out), "--quiet"]) == exitcodes.USAGE
    assert flag in capsys.readouterr().err
    assert not out.exists()


def _table1_parser():
    import argparse

    from app.commands import table1
    return table1.add_parser(argparse.ArgumentParser().add_subparsers())


def _action(parser, flag):
    return next(a for a in parser._actions if flag in a.option_strings)


def test_task_choices_are_the_tasks_of_the_task_module(monkeypatch):
    """--tasks takes the task names of ``tasks.TASKS`` (any case), a name it gains included."""
    from app.commands import table1

    assert table1._task_list(",".join(t.lower() for t in tasks.TASKS)) == tasks.TASKS
    monkeypatch.setattr(tasks, "TASKS", (*tasks.TASKS, "XOR"))
    args = _table1_parser().parse_args(["--tasks", "xor,OR"])
    assert args.tasks == ("XOR", "OR")


def test_reading_choices_are_the_named_readings_of_the_protocol(monkeypatch):
    """--reading takes the names of ``protocol.READINGS``, in order, a name it gains included."""
    from numerics.experiments import protocol

    assert list(_action(_table1_parser(), "--reading").choices) == list(protocol.READINGS)
    monkeypatch.setattr(protocol, "READINGS", {**protocol.READINGS, "k2-50": protocol.Reading(name="k2-50", k2=50)})
    assert _table1_parser().parse_args(["--reading", "k2-50"]).reading == "k2-50"


def test_kernel_choices_are_the_engine_kernels(monkeypatch, capsys):
    """--kernel takes the names of ``engine.KERNELS``, in order, a name it gains included, and its help and its
    error list them."""
    parser = _table1_parser()
    assert list(_action(parser, "--kernel").choices) == list(engine.KERNELS)
    with pytest.raises(SystemExit):
        parser.parse_args(["--kernel", "fast"])
    assert "(choose from 'numpy', 'compiled')" in capsys.readouterr().err
    monkeypatch.setattr(engine, "KERNELS", (*engine.KERNELS, "fast"))
    assert parser.parse_args(["--kernel", "fast"]).kernel == "fast"
    assert "{numpy,compiled,fast}" in parser.format_help()


def test_quick_help_states_the_quick_configuration(monkeypatch):
    """--quick's help is written from ``protocol.QUICK_SIZE`` and ``QUICK_BUDGET``, the sizes a quick run
    uses."""
    from numerics.experiments import protocol

    cfg = runner.Config.quick()
    help_text = " ".join(_action(_table1_parser(), "--quick").help.split())
    assert help_text.startswith(f"small run (d = {cfg.d}, {cfg.seeds} seeds, cap {cfg.reading.max_steps} steps;")
    monkeypatch.setitem(protocol.QUICK_SIZE, "d", 9)
    assert _action(_table1_parser(), "--quick").help.startswith("small run (d = 9, ")
    assert runner.Config.quick().d == 9


@pytest.mark.parametrize("content", ["[1, 2]", "null", '{"rows": {}, "config": {}}', '{"rows": [], "config": {}}',
                                     '{"rows": {"x": {"plans": 3}}, "config": {"d": 5}, "reading": {}}'])
def test_malformed_results_files_are_refused_before_writing(tmp_path, capsys, content):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    out = tmp_path / "out"
    assert _cli(["--from-json", str(bad), "--out", str(out)]) == exitcodes.USAGE
    assert "results file" in capsys.readouterr().err
    assert not out.exists() or not any(out.iterdir())


def test_unwritable_out_is_refused_before_any_work(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert _cli(["--quick", "--tasks", "occurrence", "--out", str(blocker / "sub"), "--quiet"]) == exitcodes.USAGE
    assert "--out" in capsys.readouterr().err


@pytest.mark.slow  # trains, re-renders and resumes Table 1 runs
def test_table1_writes_rerenders_and_resumes(tmp_path, capsys):
    from numerics.experiments.runner import Config

    a, b = tmp_path / "a", tmp_path / "b"
    argv = ["--quick", "--tasks", "occurrence,even_pairs", "--seeds", "1", "--max-steps", "60", "--jobs", "1",
            "--quiet", "--out", str(a)]
    status = _cli(argv)
    assert status in (exitcodes.DONE, exitcodes.UNDECIDED)
    res = json.loads((a / "table1.json").read_text())
    assert res["command"][:2] == ["occ-companion", "table1"] and res["reading"]["max_steps"] == 60
    assert res["version"] and "timestamp" in res and not (a / ".occ-table1.partial.json").exists()
    from numerics.experiments import verdicts
    assert res["decision_rules"] == verdicts.rules()  # the rules its verdicts are judged by, recorded with them
    assert (a / "table1_even_pairs.png").stat().st_size > 0
    assert _cli(["--from-json", str(a / "table1.json"), "--out", str(b)]) == status
    assert (a / "table1.md").read_text() == (b / "table1.md").read_text()
    assert "| even_pairs | joint |" in capsys.readouterr().out
    # a killed run: the partial file holds the finished rows of the same configuration; they are kept,
    # only the missing rows are trained (the marker proves the kept row was not retrained)
    row = res["rows"]["occurrence"]
    row["marker"] = "kept"
    # the partial record keeps a row's further tuning draws inside it (run moves them out at the end)
    row["tuning_draws"] = [drawn["rows"]["occurrence"] for drawn in res["tuning_draws"]]
    c = tmp_path / "c"
    c.mkdir()
    (c / ".occ-table1.partial.json").write_text(json.dumps({"config": res["config"], "rows": {"occurrence": row}}))
    assert _cli([*argv[:-1], str(c)]) == status
    again = json.loads((c / "table1.json").read_text())
    assert again["rows"]["occurrence"].get("marker") == "kept"
    assert [drawn["rows"]["occurrence"] for drawn in again["tuning_draws"]] == row["tuning_draws"]
    # a row saved without its tuning draws is trained again
    (c / ".occ-table1.partial.json").write_text(json.dumps({"config": res["config"], "rows": {
        "occurrence": {k: v for k, v in row.items() if k != "tuning_draws"}}}))
    from app.commands.table1 import _resume
    assert _resume(c / ".occ-table1.partial.json", Config.from_dict(res["config"])) == {}
    assert again["rows"]["even_pairs"]["plans"]["joint"]["risk"] == res["rows"]["even_pairs"]["plans"]["joint"]["risk"]
    # a partial file of another configuration is ignored
    d = tmp_path / "d"
    d.mkdir()
    other = dict(res["config"], d=9)
    (d / ".occ-table1.partial.json").write_text(json.dumps({"config": other, "rows": {"occurrence": row}}))
    assert _cli([*argv[:-1], str(d)]) == status
    assert "marker" not in json.loads((d / "table1.json").read_text())["rows"]["occurrence"]
    # a partial file from before a setting existed resumes when the setting is at its default; one naming a
    # setting this version does not know, or another value of a new setting, does not
    cfg = Config.from_dict(res["config"])
    old = {k: v for k, v in res["config"].items() if k != "and_heads_data"}
    for saved, kept in ((old, True), (dict(res["config"], future_setting=1), False),
                        (dict(res["config"], and_heads_data="integral"), False)):
        (d / ".occ-table1.partial.json").write_text(json.dumps({"config": saved, "rows": {"occurrence": row}}))
        assert bool(_resume(d / ".occ-table1.partial.json", cfg)) == kept


def test_icl_cross_entropy_trains_on_its_loss_and_scales_its_grid():
    """Under the cross-entropy variant one output step from zero is the cross-entropy gradient step (not the
    squared one), the risk at the start is log d, and the grid's curvature scale lambda_B / K is the
    cross-entropy risk's second difference along the top direction."""
    d = 6
    batch = tasks.sample("ICL", d, 400, np.random.default_rng(3))
    tb = engine.from_batch(batch)
    H, D, K = tasks.model_shape("ICL", d, 1)
    a0, b0 = np.zeros((1, H, D)), np.zeros((1, H, D, K))
    r, _, g_ce, _ = engine.risk_and_grad(a0, b0, tb, "cross_entropy")
    _, _, g_sq, _ = engine.risk_and_grad(a0, b0, tb, "squared")
    assert r[0] == pytest.approx(np.log(d), abs=1e-12)
    assert not np.allclose(g_ce, g_sq, atol=1e-3)
    lam_sq, lam_ce = runner.output_curvature(tb, "squared"), runner.output_curvature(tb, "cross_entropy")
    assert lam_ce == pytest.approx(lam_sq / d, rel=1e-12)
    dense = batch.dense()
    m = dense.m / dense.m.sum(axis=1, keepdims=True)
    xbar = m @ dense.X
    v = np.linalg.eigh(xbar.T @ xbar / len(xbar))[1][:, -1]
    e = np.zeros(d)
    e[0], e[1] = 1 / np.sqrt(2), -1 / np.sqrt(2)

    def risk(t):
        return engine.risk(a0, (t * np.outer(v, e))[None, None], tb, "cross_entropy")[0]

    h = 1e-3
    assert (risk(h) - 2 * risk(0.0) + risk(-h)) / h ** 2 == pytest.approx(lam_ce, rel=1e-4)


def test_attention_gradient_is_zero_at_zero_readout():
    """The attention cannot move first: at B = 0 every attention gradient of the engine is exactly 0, on
    every task; control: with a non-zero readout it is not."""
    for task in tasks.TASKS:
        tb = engine.from_batch(tasks.sample(task, 6, 40, np.random.default_rng(1)))
        H, D, K = tasks.model_shape(task, 6, 1)
        rng = np.random.default_rng(2)
        alpha = rng.standard_normal((1, H, D))
        _, ga, gB, _ = engine.risk_and_grad(alpha, np.zeros((1, H, D, K)), tb)
        assert np.all(ga == 0) and np.any(gB != 0), task
        _, ga, _, _ = engine.risk_and_grad(alpha, rng.standard_normal((1, H, D, K)), tb)
        assert np.any(ga != 0), task


def test_docs_table1_is_generated_from_the_example_run():
    """docs/table1.md is exactly what app.render.table1_docs renders from docs/example_table1/table1.json, and
    every verdict it prints is one the verdict code gives on that file (the page is not edited by hand)."""
    from app.render import table1 as table1_module
    from app.render import table1_docs
    from numerics.experiments import verdicts
    results = json.loads((table1_docs.EXAMPLE / "table1.json").read_text())
    assert table1_docs.main(["--check"]) == 0
    page = (table1_docs.DOCS / "table1.md").read_text()
    for v in verdicts.assess(results):
        assert f"| {v['row']} | {v['claim']} |" in page
    assert results["config"]["d"] == 50 and results["config"]["seeds"] >= 5
    assert results["reading"]["name"] == "default"
    # the d = 200 run: its own section, each claim with the verdict the verdict code gives on its file
    d200 = json.loads((table1_docs.EXAMPLE / "d200" / "table1.json").read_text())
    assert d200["config"]["d"] == 200 and d200["reading"]["name"] == "default"
    assert set(d200["rows"]) == {"ICL", "OR", "AND (H=1)", "AND (H=2)"}
    section = page.split("## ICL, OR and AND at d = 200")[1].split("\n## ")[0]
    for v in verdicts.assess(d200):
        line = next(ln for ln in section.splitlines() if ln.startswith(f"| {v['row']} | {v['claim']} |"))
        assert line.split(" | ")[2] == table1_module.VERDICT_MARK[v["verdict"]], line


def test_committed_exact_rows_bound_every_risk_to_1e_12():
    """Every reported seed of every exact row in the committed runs (d = 50, theory-52, d = 200, AND on the
    integral at d = 50 and 200) records both bounds on its population risk, the left-out mass's and the rounding
    allowance's, and they sum to at most 1e-12 (the engine's stated bound); every run records the tolerances it
    used.  The rows on the integral record each seed's quadrature estimate (an estimate, not a bound), far below
    the seeds' spread."""
    from app.render import table1_docs
    ex = table1_docs.EXAMPLE
    for path in (ex / "table1.json", ex / "d200" / "table1.json", ex / "theory-52" / "table1.json",
                 ex / "and-integral" / "table1.json", ex / "and-integral-d200" / "table1.json"):
        results = json.loads(path.read_text())
        for row in results["rows"].values():
            if row["data"].get("kind") == "integral":
                for plan in row["plans"].values():
                    est = [r["quadrature_estimate"] for r in plan["seeds"] if not r["diverged"]]
                    assert est and plan["quadrature_estimate"] == max(est) <= 1e-8, (path, row["name"])
                    if plan["risk"]["std"]:
                        assert plan["quadrature_estimate"] <= 1e-3 * plan["risk"]["std"], (path, row["name"])
        exact = [row for row in results["rows"].values() if row["exact"]]
        assert exact and results["config"]["mass_tol"] <= 1e-16 and results["config"]["len_tol"] <= 1e-16
        for row in exact:
            for plan in row["plans"].values():
                for rec in plan["seeds"]:
                    if not rec["diverged"]:
                        assert rec["truncation_bound"] + rec["rounding_bound"] <= 1e-12, (path, row["name"])


def test_run_durations_print_seconds_under_ninety_and_minutes_above():
    """A run of 24 s prints as "24 s", not "0 min" (the theory-52 example takes under a minute)."""
    from app.render.table1_docs import duration

    assert [duration(s) for s in (0.4, 24.5, 89.4, 89.6, 90.0, 150.0, 450.2)] == \
        ["0 s", "25 s", "89 s", "1 min", "2 min", "3 min", "8 min"]


def test_committed_runs_count_ties_by_the_stated_rule():
    """The committed runs (d = 50, theory-52, d = 200, AND on the integral at d = 50 and 200) come from the tie
    rule: every classification seed records its tied mass, every plan the largest of its seeds, the plan table prints it
    beside the accuracy, and the page states the rule.  OR's output-only run has tied classes (its readout's
    beta_a / beta_u = -(d/2 - 1))."""
    from app.render import table1_docs
    from app.render import table1 as table1_module
    page = (table1_docs.DOCS / "table1.md").read_text()
    ex = table1_docs.EXAMPLE
    runs = (ex / "table1.json", ex / "d200" / "table1.json", ex / "theory-52" / "table1.json",
            ex / "and-integral" / "table1.json", ex / "and-integral-d200" / "table1.json")
    for path in runs:
        results = json.loads(path.read_text())
        assert table1_module.accuracy_note(results) != table1_module.OLD_ACCURACY_NOTE
        assert page.count(table1_module.accuracy_note(results)) == len(runs)  # the d = 50 run's section, and each other run's
        table = table1_module.plan_table(results)
        for name, row in results["rows"].items():
            for plan, pr in row["plans"].items():
                tied = [r["test_acc_tied"] for r in pr["seeds"] if not r["diverged"]]
                if pr["acc"]["mean"] is None:
                    assert pr["acc_tied"] is None
                    continue
                assert all(0.0 <= t <= 1.0 + 1e-12 for t in tied) and pr["acc_tied"] == max(tied)
                line = next(ln for ln in table if ln.startswith(f"| {name} | {plan} |"))
                assert (f"(tied {pr['acc_tied']:.2g})" in line) == (pr["acc_tied"] > 0), line
        if "OR" in results["rows"]:
            assert results["rows"]["OR"]["plans"]["output_only"]["acc_tied"] > 0.001, path


def test_the_committed_integral_example_page_is_its_rendering_and_says_so():
    """docs/example_table1/and-integral/table1.md is the rendering of its results (so the text on what the
    held-out risks are comes from the run's rows), which names the row on the integral and its estimate."""
    from app.render import table1_docs
    from app.render import table1 as table1_module
    for name in ("and-integral", "and-integral-d200"):
        folder = table1_docs.EXAMPLE / name
        results = json.loads((folder / "table1.json").read_text())
        page = (folder / "table1.md").read_text()
        assert page == table1_module.markdown(results)
        assert table1_module.integral_rows(results) == ["AND (H=2)"]
        assert "AND (H=2) on the exact population by the integral" in page and "quadrature estimate" in page
    sampled = json.loads((table1_docs.EXAMPLE / "table1.json").read_text())
    assert table1_module.integral_rows(sampled) == [] and "by the integral" not in table1_module.markdown(sampled)


class _Stop(Exception):
    """Raised by a stand-in for the runner once it has seen its arguments."""


@pytest.mark.parametrize("quiet,tty,lines", [(False, False, True), (True, False, False), (False, True, False)])
def test_row_lines_go_to_stderr_only_when_it_is_not_a_terminal_and_not_quiet(monkeypatch, tmp_path, quiet, tty,
                                                                            lines):
    """In a log (stderr not a terminal) table1 hands the runner its line-per-row callback; on a terminal the
    runner's bar shows instead, and --quiet shows neither."""
    import sys

    from app.commands import table1

    seen = {}

    def run(cfg, **kwargs):
        seen.update(kwargs)
        raise _Stop

    monkeypatch.setattr(runner, "run", run)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: tty)
    with pytest.raises(_Stop):
        table1.main_args(_table1_parser().parse_args(
            ["--quick", "--tasks", "occurrence", "--out", str(tmp_path / "out"), *(["--quiet"] if quiet else [])]))
    assert (seen["progress"] is table1.row_line) == lines
    assert lines or seen["progress"] is None


def test_a_row_line_names_the_row_and_the_count(capsys):
    from app.commands import table1

    table1.row_line({"row": "AND (H=2)", "finished": 3, "total": 7, "elapsed": 150.0})
    assert capsys.readouterr().err == "table1: AND (H=2) finished (3/7 rows, 2.5 min)\n"


@pytest.mark.slow  # trains two rows at the quick size
def test_quick_run_logs_each_row_and_explains_its_exit_status(tmp_path, capsys):
    """With stderr not a terminal (captured here, as in a log), a quick run prints a line per finished row
    while it trains; its exit status 3 (undecided) comes with the note that this is the quick size's normal
    status, also when its results are re-rendered; a run that decides every verdict (exit 0) has no note."""
    out = tmp_path / "out"
    argv = ["--quick", "--tasks", "AND", "--seeds", "1", "--max-steps", "20", "--jobs", "1", "--out", str(out)]
    assert _cli(argv) == exitcodes.UNDECIDED  # AND (H=1) cannot represent its task at d = 8: refused
    err = capsys.readouterr().err
    assert "table1: AND (H=2) finished (1/2 rows" in err and "table1: AND (H=1) finished (2/2 rows" in err
    assert "exit status 3 (undecided) is the normal status of a --quick run" in err
    assert _cli(["--from-json", str(out / "table1.json"), "--out", str(tmp_path / "again")]) == exitcodes.UNDECIDED
    assert "is the normal status of a --quick run" in capsys.readouterr().err
    from app.commands.table1 import _with_quick_note

    assert _with_quick_note(json.loads((out / "table1.json").read_text()), exitcodes.DONE) == exitcodes.DONE
    assert "normal status" not in capsys.readouterr().err


def test_the_median_risk_curve_is_over_every_seed_at_every_step():
    """Seeds validate and stop at different steps: the median at each step is over all of them, each held at
    its last recorded value, so the seed set does not change from step to step."""
    from app.render.table1 import _median_curve

    recs = [{"curve": {"steps": [0, 2, 4], "risk": [1.0, 0.5, 0.1]}},
            {"curve": {"steps": [0, 1, 3], "risk": [1.0, 0.9, 0.8]}},
            {"curve": {"steps": [0, 1, 2, 3, 4, 5], "risk": [1.0, 0.2, 0.2, 0.2, 0.2, 0.2]}}]
    held = {0: (1.0, 1.0, 1.0), 1: (1.0, 0.9, 0.2), 2: (0.5, 0.9, 0.2), 3: (0.5, 0.8, 0.2), 4: (0.1, 0.8, 0.2),
            5: (0.1, 0.8, 0.2)}
    steps, med = _median_curve(recs)
    assert steps == [0, 1, 2, 3, 4, 5]
    assert list(med) == [float(np.median(held[s])) for s in steps]


def _example_rows() -> dict:
    from app.render import table1_docs

    return json.loads((table1_docs.EXAMPLE / "table1.json").read_text())["rows"]


def test_row_figures_draw_no_empty_panel():
    """A panel per joint-GD measure the row has: none for alignment on AND (no ground-truth direction), none at
    all without a joint run; every panel drawn holds curves."""
    import copy

    import matplotlib.pyplot as plt

    from app.render import table1 as table1_render

    rows = _example_rows()
    no_joint = copy.deepcopy(rows["occurrence"])
    for r in no_joint["plans"]["joint"]["seeds"]:
        r.pop("lag", None)
    for name, row, panels in (("AND (H=2)", rows["AND (H=2)"], 2), ("occurrence", rows["occurrence"], 3),
                              ("occurrence", no_joint, 1)):
        fig = table1_render.row_figure(name, row)
        try:
            assert len(fig.axes) == panels, name
            for ax in fig.axes:
                assert sum(1 for line in ax.get_lines() if len(line.get_xdata()) > 2) >= 2, ax.get_title()
        finally:
            plt.close(fig)


def test_a_negative_function_gain_is_explained_on_the_figure():
    """Two-head AND's output gain dips to about -3 of its end value: the readout of step t with the final
    attention has risk above 2, against 0.5 with the starting readout; the figure says so with those numbers.
    ICL's gains stay at or above 0, and its figure carries no such note."""
    import matplotlib.pyplot as plt

    from app.render import table1 as table1_render

    rows = _example_rows()
    joint = [r for r in rows["AND (H=2)"]["plans"]["joint"]["seeds"] if "lag" in r]
    top = max(max(r["function"]["risk_output_at_t"]) for r in joint)
    assert top > 2
    fig = table1_render.row_figure("AND (H=2)", rows["AND (H=2)"])
    text = " ".join(t.get_text() for t in fig.texts).replace("\n", " ")
    plt.close(fig)
    assert "output gain (function) < 0" in text and f"risk up to {top:.2g}" in text
    assert "attention gain (function) < 0" not in text
    fig = table1_render.row_figure("ICL", rows["ICL"])
    assert not fig.texts
    plt.close(fig)
