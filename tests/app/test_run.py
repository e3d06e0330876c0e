"""The main job (`occ-companion run`): results that rebuild their run, atomic and locked output
folders, stale artifacts, Ctrl-C, the logistic loss, the figure."""
import json
import os

import pytest

from app.cli import build_parser, main
from app.io import OutputFolder, complete_result
from app.render.plotting import first_crossing


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    rc = main(["run", "--d", "5", "--epsilon", "0.01", "--steps", "20", "--quiet", "--out", str(out)])
    return rc, out, json.loads((out / "summary.json").read_text())


def test_run_reaches_the_target_and_keeps_the_floors(small_run):
    rc, out, summary = small_run
    assert rc == 0 and summary["three_phase_reaches_target"] is True
    assert summary["plans"]["three-phase"]["final_risk"] <= 0.01
    assert summary["plans"]["output-only"]["min_risk_lower"] >= summary["output_only_floor_c"] - 1e-12
    assert summary["plans"]["attention-only"]["final_risk"] == pytest.approx(0.5, abs=1e-9)
    assert (out / "risk_curves.png").stat().st_size > 10_000
    hidden = sorted(p.name for p in out.iterdir() if p.name.startswith("."))
    assert hidden == [".occ-run.complete.json"]  # the completion marker; no temporary file, no journal left
    assert complete_result(out, "run")["files"].keys() == {"summary.json", "risk_curves.png"}
    umask = os.umask(0)
    os.umask(umask)
    assert (out / "summary.json").stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0600


def test_summary_records_everything_needed_to_rebuild_the_run(small_run):
    _, out, summary = small_run
    run_parser = next(a for a in build_parser()._actions if a.dest == "cmd").choices["run"]
    dests = {a.dest for a in run_parser._actions if a.dest != "help"}
    record = summary["run"]
    assert set(record["options"]) == dests
    assert record["options"]["steps"] == 20 and record["options"]["out"] == str(out)
    assert record["version"] and "git_commit" in record and record["timestamp"].endswith("+00:00")
    assert record["wall_seconds"] > 0
    assert record["command"].startswith("occ-companion run --d 5") and "--steps 20" in record["command"]
    params = summary["plans"]["three-phase"]["final_params"]
    assert set(params) == {"alpha_a", "alpha_b", "beta_a", "beta_b"} and params["alpha_a"] > params["alpha_b"]


def test_certify_prints_numbers_and_a_rerun_removes_the_stale_figure(tmp_path, capsys):
    (tmp_path / "risk_curves.png").write_bytes(b"figure of an earlier run")
    rc = main(["run", "--d", "4", "--epsilon", "0.05", "--steps", "5", "--no-plot", "--certify", "--quiet",
               "--out", str(tmp_path)])
    assert rc == 0
    summary = json.loads((tmp_path / "summary.json").read_text())["plans"]["three-phase"]
    check = summary["certified"]
    assert isinstance(check["risk"], float) and 0 < check["radius"] < 1e-19
    assert check["risk_lower"] <= check["risk"] <= check["risk_upper"] <= 0.05
    assert abs(check["risk"] - summary["final_risk"]) <= summary["bound"]  # the float estimate was honest
    assert "certified (arb) risk" in capsys.readouterr().out
    assert not (tmp_path / "risk_curves.png").exists()


def test_unwritable_out_fails_before_the_computation(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["run", "--d", "5", "--out", str(blocker / "sub")]) == 2
    out, err = capsys.readouterr()
    assert "--out" in err and "not a writable folder" in err and "regime" not in err and out == ""


def test_second_run_into_a_busy_folder_is_refused(tmp_path, capsys):
    with OutputFolder(tmp_path):
        assert main(["run", "--d", "5", "--out", str(tmp_path)]) == 2
    assert "in use by another occ-companion command" in capsys.readouterr().err
    with OutputFolder(tmp_path):  # released again
        pass


def test_ctrl_c_exits_130_with_one_line_and_no_results(tmp_path, capsys, monkeypatch):
    from numerics.theorem import training
    real_run = training.Trainer.run

    def interrupted(self, plan):
        if plan.name == "joint":  # the last plan: every other result is in memory, none written yet
            raise KeyboardInterrupt
        return real_run(self, plan)

    monkeypatch.setattr(training.Trainer, "run", interrupted)
    assert main(["run", "--d", "4", "--steps", "3", "--quiet", "--out", str(tmp_path)]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "occ-companion run: interrupted; nothing new was written (earlier results are kept)"
    assert "Traceback" not in "\n".join(err)
    assert list(tmp_path.iterdir()) == []


def test_logistic_loss_runs_the_comparison_plans_only(tmp_path, capsys):
    assert main(["run", "--d", "4", "--loss", "logistic", "--steps", "5", "--no-plot", "--quiet",
                 "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert "three-phase" not in summary["plans"] and summary["regime"] is None
    assert "squared loss only" in summary["not_covered"] and "squared loss only" in out
    assert summary["plans"]["joint"]["final_risk"] < summary["plans"]["attention-only"]["final_risk"]


def test_first_crossing_marks_where_the_attention_gap_overtakes():
    assert first_crossing([0, 1, 2, 3], [0, 2, 2, 2], [0, 1, 3, 4]) == 2
    assert first_crossing([0, 1], [0, 2], [0, 1]) is None


def test_the_integral_evaluator_gives_the_series_run(tmp_path, small_run):
    """--evaluator integral (arb integrals) against the float series of small_run: the same regime
    and final risks within the series' error bounds."""
    _, _, series = small_run
    rc = main(["run", "--d", "5", "--epsilon", "0.01", "--steps", "20", "--quiet", "--no-plot",
               "--evaluator", "integral", "--out", str(tmp_path)])
    integral = json.loads((tmp_path / "summary.json").read_text())
    assert rc == 0 and integral["evaluator"] == "integral" and series["evaluator"] == "series"
    from numerics.theorem.evaluators import INTEGRAL_DPS, TAYLOR_ORDER

    settings = integral["evaluator_settings"]  # recorded: what rebuilds the run's balls
    assert (settings["dps"], settings["taylor_order"]) == (INTEGRAL_DPS, TAYLOR_ORDER) and settings["integrals_computed"] > 0
    assert "evaluator_settings" not in series
    assert integral["regime"]["T_min"] == series["regime"]["T_min"]
    for name, rec in series["plans"].items():
        other = integral["plans"][name]
        assert other["bound"] < 1e-15 and abs(other["final_risk"] - rec["final_risk"]) <= rec["bound"]


@pytest.mark.parametrize("d", [5, 10_000])
def test_the_run_s_taylor_models_save_integrals_and_change_no_double(tmp_path, monkeypatch, d):
    """The same integral run with the Taylor models off (``evaluators.TAYLOR_ORDER`` None) records that it used
    none and gives the same doubles (every plan's final risk and parameters); with them on it computes no more
    integrals (d = 5: its attention steps are too large for a model, and repeated calls at one attention state
    build none) and, where the joint plan's steps are small (d = 10^4), fewer."""
    from numerics.theorem import evaluators
    args = ["run", "--d", str(d), "--epsilon", "0.01", "--steps", "20", "--quiet", "--no-plot", "--evaluator", "integral"]
    assert main(args + ["--out", str(tmp_path / "on")]) == 0
    monkeypatch.setattr(evaluators, "TAYLOR_ORDER", None)
    assert main(args + ["--out", str(tmp_path / "off")]) == 0
    on, off = (json.loads((tmp_path / w / "summary.json").read_text()) for w in ("on", "off"))
    assert off["evaluator_settings"]["taylor_order"] is None
    used, without = on["evaluator_settings"]["integrals_computed"], off["evaluator_settings"]["integrals_computed"]
    assert used <= without and (d < 1000 or used <= 0.6 * without), (used, without)  # d = 10^4: 50 of 96
    for name, rec in off["plans"].items():
        assert (on["plans"][name]["final_risk"], on["plans"][name]["final_params"]) == (rec["final_risk"],
                                                                                       rec["final_params"]), name


def test_auto_takes_the_integral_from_its_threshold():
    from numerics.theorem.evaluators import INTEGRAL_FROM_D, choose_method
    from theory.setting import Setting

    assert choose_method(Setting(INTEGRAL_FROM_D - 1)) == "series"
    assert choose_method(Setting(INTEGRAL_FROM_D)) == "integral"
    assert choose_method(Setting(INTEGRAL_FROM_D, loss="logistic")) == "series"
    assert choose_method(Setting(50), "integral") == "integral"


@pytest.mark.parametrize("lo, hi, want", [(0.22, 0.52, {"0.25", "0.3", "0.4", "0.5"}), (1e-8, 1.0, {"1e-8", "1e-4", "1"})])
def test_plain_log_ticks_label_an_axis_between_two_powers_of_ten(lo, hi, want):
    """A log axis inside one decade (Table 1's one-head AND risks, 0.22 to 0.52) holds no power of ten: its
    ticks are labelled in plain text all the same; a wide axis labels its powers of ten only."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from app.render.plotting import plain_log_ticks

    fig = Figure()
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    ax.plot([1, 2], [lo, hi])
    ax.set_yscale("log")
    ax.set_ylim(lo, hi)
    plain_log_ticks(ax.yaxis)
    fig.canvas.draw()
    labels = {t.get_text() for t in ax.yaxis.get_ticklabels(which="both") if t.get_visible() and t.get_text()}
    assert want <= labels and all(not t.startswith("$") for t in labels), labels
    if hi > 10 * lo:
        assert all(t.startswith("1") for t in labels), labels


def test_job_options_and_results_are_frozen():
    import dataclasses

    from numerics.theorem import job

    options = job.JobOptions()
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.steps = 5
    assert dataclasses.replace(options, steps=5).steps == 5 and options.steps == 300
    assert job.JobResult.__dataclass_params__.frozen


def test_run_s_flags_give_the_job_s_default_options():
    """Every JobOptions field is a flag of ``run`` of the same name, and ``run`` with no flags gives the
    domain's defaults (a default changed on one side only fails here)."""
    from app.commands.run import job_options
    from numerics.theorem import job

    args = build_parser().parse_args(["run"])
    assert job_options(args) == job.JobOptions()
    assert isinstance(job_options(args).epsilon, type(args.epsilon))  # the exact decimal as typed, not a float


def test_the_job_imports_no_app_module():
    """numerics.theorem.job is a domain function: importing it and running a small job loads nothing of app."""
    import subprocess
    import sys

    code = ("import sys\n"
            "import numerics.theorem.job as job\n"
            "from theory.setting import Setting\n"
            "result = job.run(Setting(3), job.JobOptions(steps=1, certify=True))\n"
            "assert result.verdict == 'PASS', result.verdict\n"
            "loaded = sorted(m for m in sys.modules if m == 'app' or m.startswith('app.'))\n"
            "assert not loaded, loaded\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


def test_the_job_records_a_diverged_plan_and_tells_its_listener():
    """The domain function directly: joint GD at a huge step leaves the doubles; the job records the
    option to blame instead of failing, keeps the other plans, and tells its listener each event in order."""
    from numerics.theorem import job
    from theory.setting import Setting

    events = []

    class Recorder(job.Listener):
        def evaluator_chosen(self, method, tol):
            events.append(("evaluator", method, tol))

        def regime_found(self, regime, eta_3):
            events.append(("regime", regime.T_min, eta_3))

        def plan_diverged(self, plan, option):
            events.append(("diverged", plan, option))

        def certifying(self):
            events.append(("certifying",))

    result = job.run(Setting(4), job.JobOptions(joint_eta=1e300, steps=20, certify=True), listener=Recorder())
    assert result.diverged == {"joint": "joint_eta"} and "joint" not in result.plans
    assert list(result.plans) == ["three-phase", "output-only", "attention-only", "attention-then-output"]
    assert [e[0] for e in events] == ["evaluator", "regime", "diverged", "certifying"]
    assert events[0] == ("evaluator", "series", 1e-12) and events[1] == ("regime", result.regime.T_min, 1.0)
    assert result.ok and result.certified["verdict"] == "PASS" and result.output_only_floor > 0
    assert result.target == 1e-3 + result.regime.floor


def test_the_job_refuses_a_regime_it_cannot_bound_or_afford(monkeypatch):
    """No curvature bound (a series tolerance too loose) and a phase 3 over MAX_PLAN_STEPS are errors of the
    domain function, carrying what the command line restates in flags."""
    from numerics.theorem import job
    from theory.setting import Setting
    from theory.validation import SettingError

    with pytest.raises(job.NoCurvatureBound) as loose:
        job.run(Setting(5), job.JobOptions(tol=0.5, steps=1))
    assert loose.value.method == "series" and isinstance(loose.value, SettingError)
    monkeypatch.setattr(job, "MAX_PLAN_STEPS", 10)
    with pytest.raises(job.PlanTooLong) as long:
        job.run(Setting(5), job.JobOptions(steps=1))
    assert long.value.T_min > 10
