"""Limits, faults and records of the command line (issue 18): in-range values that used to give
tracebacks, sizes refused before any work, output folders checked before the work, internal errors as
one line with their own status, Ctrl-C messages, correctly rounded digits, the derivation cache."""
from __future__ import annotations

import json
import pickle

import mpmath
import pytest

from app import exitcodes
from app.cli import main


def test_float_series_is_right_beyond_the_double_exponent_range(capsys):
    """M5: at an attention gap of 800 (e^800 overflows a double) the float series agrees with the arb
    series instead of failing on nan."""
    argv = ["evaluate", "--d", "4", "--alpha", "800,0,0,0", "--beta", "1,-1,0.5,0.5"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    risk = float(out.split("risk = ", 1)[1].split()[0])
    bound = float(out.split("|error| <= ", 1)[1].split(",")[0])
    assert main([*argv, "--backend", "arb", "--tol", "1e-20"]) == 0
    from flint import arb, ctx

    with ctx.workprec(128):
        ball = arb(capsys.readouterr().out.split("risk in ", 1)[1].split("  (", 1)[0])
    assert abs(risk - float(ball.mid())) <= bound + float(ball.rad())


def test_huge_eta2_factor_and_tiny_p(tmp_path, capsys):
    """M5: --eta2-factor 100 at d = 50 runs (the gap passes 709); --p 1e-17 is refused with advice, exit 2."""
    assert main(["run", "--eta2-factor", "100", "--steps", "2", "--no-plot", "--quiet", "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["three_phase_reaches_target"] is True and summary["regime"]["eta_2"] > 800
    capsys.readouterr()
    assert main(["run", "--p", "1e-17", "--no-plot", "--quiet", "--out", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert "--max-terms" in err and "Traceback" not in err


def test_diverging_comparison_plan_is_reported_not_fatal(tmp_path, capsys):
    """m5: joint GD at --joint-eta 1e300 leaves the doubles; the run still finishes and records it."""
    assert main(["run", "--d", "4", "--joint-eta", "1e300", "--steps", "20", "--no-plot", "--quiet",
                 "--out", str(tmp_path)]) == 0
    plans = json.loads((tmp_path / "summary.json").read_text())["plans"]
    assert plans["joint"]["diverged"] is True and "--joint-eta" in plans["joint"]["reason"]
    assert "final_risk" in plans["three-phase"] and "final_risk" in plans["output-only"]
    assert "diverged" in capsys.readouterr().out


@pytest.mark.parametrize("argv, words", [
    (["evaluate", "--mc", "10000000000"], ["--mc", "memory"]),
    (["finite", "--d", "100000"], ["--d", "memory"]),
    (["finite", "--constant", "1e300"], ["--constant"]),
    (["finite", "--test-size", "1000000000000"], ["--test-size"]),
    (["finite", "--d", "1000"], ["CPU minutes", "--seeds", "--d"]),  # issue 18: ran for minutes
    (["prove", "--d", "3,100000000", "--out", "o"], ["--d", "memory"]),  # issue 18: MemoryError after the work began
    (["evaluate", "--d", "1000000000"], ["--d", "memory"]),
    (["table1", "--quick", "--jobs", "1000"], ["--jobs", "per core"]),  # issue 18: worker counts are bounded
    (["table1", "--quick", "--max-steps", "1000000000000"], ["--max-steps"]),  # a set of 1e11 snapshot steps
    (["table1", "--quick", "--seeds", "1000000"], ["--seeds"]),
    (["sweep", "--workers", "1000"], ["--workers", "per core"]),
    (["scope", "--workers", "1000"], ["--workers", "per core"]),
    (["evaluate", "--beta", "1e160,0,0,0,0"], ["--beta", "--backend mp"]),
    (["evaluate", "--method", "integral", "--dps", "2000"], ["--dps"]),
    (["values", "--dps", "10000"], ["--dps"]),
    (["run", "--d", "1000000000", "--no-plot"], ["T_min", "--d"]),
    (["run", "--steps", "10000000"], ["--steps"]),
    (["run", "--out", ""], ["--out"]),
], ids=lambda a: " ".join(a) if isinstance(a, list) and a and a[0][0] != "-" else "")
def test_sizes_beyond_the_machine_are_refused_before_any_work(argv, words, capsys, tmp_path, monkeypatch):
    """m9, m8, m15: refused with exit 2 and a message naming the flag, before any result line."""
    monkeypatch.chdir(tmp_path)
    if argv[0] == "run" and "--out" not in argv:
        argv = [*argv, "--out", str(tmp_path / "o")]
    assert main(argv) == exitcodes.USAGE
    out, err = capsys.readouterr()
    assert out == "" and all(w in err for w in words), err
    assert not (tmp_path / "summary.json").exists()  # --out '' never writes into the working directory


def test_prove_checks_its_outputs_before_any_work(tmp_path, capsys):
    """M6: an unusable --out or --proofs-doc is exit 2 before anything is certified."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    for argv in (["prove", "--d", "3", "--out", "/proc/occ-x"], ["prove", "--d", "3", "--out", str(blocker / "s")],
                 ["prove", "--d", "3", "--out", str(tmp_path / "o"), "--all-d", "--proofs-doc", "/proc/x.md"]):
        assert main(argv) == exitcodes.USAGE
        out, err = capsys.readouterr()
        assert out == "" and "certifying" not in err and "Traceback" not in err and "not a writable folder" in err


def test_prove_records_provenance_and_certifies_each_d_once(tmp_path, capsys):
    """m12, m21: --d 3,3,3 certifies d = 3 once; certificate.json has commit, timestamp and command."""
    assert main(["prove", "--d", "3,3,3", "--steps", "5", "--out", str(tmp_path / "o ü")]) == 0
    cert = json.loads((tmp_path / "o ü" / "certificate.json").read_text())
    assert cert["d"] == [3] and cert["timestamp"].endswith("+00:00") and "git_commit" in cert
    assert cert["command"].startswith("occ-companion prove --d 3,3,3") and "'" in cert["command"]  # quoted path
    assert capsys.readouterr().out.count("certifying") == 0


def test_an_internal_error_is_one_line_with_its_own_status(monkeypatch, capsys):
    import app.commands.evaluate

    def broken(args):
        return 1 / 0

    monkeypatch.setattr(app.commands.evaluate, "cmd_values", broken)
    monkeypatch.delenv("OCC_TRACEBACK", raising=False)
    assert main(["values", "--d", "5"]) == exitcodes.INTERNAL != exitcodes.CLAIM_FAILED
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "internal error (ZeroDivisionError" in err[0]
    assert "`occ-companion values --d 5`" in err[0] and "Traceback" not in err[0]


def test_ctrl_c_after_the_commit_says_the_results_are_complete(tmp_path, capsys, monkeypatch):
    import app.commands.run

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(app.commands.run, "print_table", interrupted)
    assert main(["run", "--d", "4", "--steps", "2", "--no-plot", "--quiet", "--out", str(tmp_path)]) == 130
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "interrupted after writing" in err and "summary.json" in err
    from app.io import complete_result

    assert complete_result(tmp_path, "run") is not None


def test_values_digits_are_correctly_rounded(capsys):
    """m16: every printed value equals the exact value rounded to --dps digits (computed at 3x the digits)."""
    from numerics.theorem.closed_forms import ClosedForms
    from theory.setting import Setting

    assert main(["values", "--d", "50", "--dps", "30"]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines()[1:] if "(needs" not in ln]
    exact = {key: val for key, _, val, _ in ClosedForms(Setting(50), dps=90).all() if val is not None}
    assert len(lines) >= 20
    with mpmath.workdps(90):
        for line in lines:
            key, shown = line.split()[:2]
            assert shown == mpmath.nstr(exact[key], 30), key


def test_finite_with_one_string_prints_no_numpy_warnings(capsys):
    """m22"""
    main(["finite", "--d", "5", "--n1", "1", "--n3", "1", "--seeds", "1", "--test-size", "50", "--quiet"])
    assert "RuntimeWarning" not in capsys.readouterr().err


def test_a_wrong_cache_entry_is_derived_again(tmp_path, monkeypatch):
    """m17: an entry of the right file with the wrong kind of value (an int for an expression) is ignored."""
    import sympy as sp

    from theory import cache, symbolic

    monkeypatch.setenv("OCC_CACHE_DIR", str(tmp_path))
    cache.clear_memory()
    try:
        good = symbolic.balanced_p()
        path = cache.cache_file("theory.symbolic")
        payload = pickle.loads(path.read_bytes())
        entry = next(k for k in payload["entries"] if k[0] == "balanced_p")
        payload["entries"][entry] = pickle.dumps(42)
        path.write_bytes(pickle.dumps(payload))
        cache.clear_memory()
        again = symbolic.balanced_p()
        assert isinstance(again, sp.Basic) and sp.simplify(again - good) == 0
    finally:
        cache.clear_memory()


def test_unwritable_cache_is_noted_once(tmp_path, monkeypatch, capsys):
    from theory import cache

    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setattr(cache, "_warned", False)
    cache._write(blocker / "sub" / "x.pickle", ("k",), {"a": b"1"})
    cache._write(blocker / "sub" / "x.pickle", ("k",), {"a": b"1"})
    assert capsys.readouterr().err.count("not writable") == 1


def test_figure_colours_and_labels_follow_the_plans(monkeypatch, tmp_path):
    """m11: a plan has the same colour whatever plans are drawn; the y-label names the evaluator; a
    missing crossing is said."""
    import io

    import app.render.plotting as plotting
    from numerics.theorem import training
    from numerics.theorem.evaluators import population_evaluator
    from theory.setting import Setting

    figures = []

    import matplotlib.figure

    class Recorded(matplotlib.figure.Figure):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            figures.append(self)

    monkeypatch.setattr(matplotlib.figure, "Figure", Recorded)
    trainer = training.Trainer(population_evaluator(Setting(4)), record_every=1)
    plans = {"output-only": trainer.run(training.output_only(1.0, 3)), "joint": trainer.run(training.joint(0.01, 3))}
    kw = dict(floor_c=None, risk_floor=None, target=None, phase_ends=None)
    plotting.plot_plans(plans, io.BytesIO(), evaluator="integral", **kw)
    plotting.plot_plans({"three-phase": plans["joint"], **plans}, io.BytesIO(), **kw)
    for fig in figures:
        left, right = fig.axes
        colours = {ln.get_label(): ln.get_color() for ln in left.get_lines()}
        assert colours["output-only"] == plotting.PLAN_COLOURS["output-only"]
    assert "integral representation" in figures[0].axes[0].get_ylabel()
    assert "exact series" in figures[1].axes[0].get_ylabel()
    legend = [t.get_text() for t in figures[0].axes[1].get_legend().get_texts()]
    assert any("does not overtake within 3 steps" in t for t in legend)


RAISE_ON_IMPORT = '''
import os, sys
name, kind = os.environ["OCC_TEST_RAISE"].split(":")


class Raise:
    def find_spec(self, fullname, path=None, target=None):
        if fullname == name:
            raise {"interrupt": KeyboardInterrupt, "error": RuntimeError}[kind]("raised on importing " + name)


sys.meta_path.insert(0, Raise())
'''
"""A ``sitecustomize`` that raises while a named module is being imported: a Ctrl-C (or a fault) that lands
exactly there, in a real ``python3 -m`` process."""


@pytest.mark.slow  # subprocesses
@pytest.mark.parametrize("module,args,during", [
    ("app", ["run", "--help"], "theory"),             # the package's own imports
    ("app.commands.table1", ["--help"], "app.io"),             # the body of a module run as a program
    ("app.commands.prove", ["--help"], "app.cli"),
    ("app.render.table1_docs", ["--check"], "app.render.table1"),
])
def test_python_m_app_modules_end_in_one_line_with_the_cli_status(tmp_path, module, args, during):
    """m23: ``python3 -m app.X`` never bypasses the CLI's handling: a Ctrl-C while the modules load exits 130
    and an error exits 4, each with one line on stderr and no traceback; without the fault, the module runs
    the CLI's subcommand (a bad results file is bad usage, 2)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "sitecustomize.py").write_text(RAISE_ON_IMPORT)
    root = Path(__file__).resolve().parents[2]
    for kind, status in [("interrupt", exitcodes.INTERRUPTED), ("error", exitcodes.INTERNAL)]:
        env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{root}", OCC_TEST_RAISE=f"{during}:{kind}")
        env.pop(exitcodes.TRACEBACK_ENV, None)
        proc = subprocess.run([sys.executable, "-m", module, *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300)
        lines = proc.stderr.splitlines()
        assert proc.returncode == status and len(lines) == 1 and "Traceback" not in proc.stderr, (kind, proc.stderr)
        assert ("interrupted" if kind == "interrupt" else f"RuntimeError: raised on importing {during}") in lines[0]
    if module == "app.commands.table1":
        (tmp_path / "list.json").write_text("[]")
        env = dict(os.environ, PYTHONPATH=str(root))
        proc = subprocess.run([sys.executable, "-m", module, "--from-json", "list.json", "--out", "o"], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == exitcodes.USAGE and len(proc.stderr.splitlines()) == 1, proc.stderr
        assert "not a table1 results file" in proc.stderr and not (tmp_path / "o").exists()


def test_finite_time_estimate_follows_the_work_and_admits_one_seed_at_d_1000(capsys, monkeypatch):
    """The CPU estimate that refuses ``finite --d 1000`` is of the right size: at d = 50 (one seed) the measured
    CPU time lies between a tenth of the estimate and twice it (an estimate without its d, its seeds or its test
    strings falls outside); and --seeds 1 at d = 1000 passes the check (the run itself is stopped here)."""
    import time

    from numerics.theorem import finite_sample
    from app.commands import finite
    t = time.process_time()
    assert main(["finite", "--d", "50", "--seeds", "1", "--quiet"]) == 0
    used = time.process_time() - t
    estimate = float(capsys.readouterr().err.split("about ", 1)[1].split(" CPU s")[0])
    assert estimate / 10 <= used <= 2 * estimate, (used, estimate)

    class Stop(Exception):
        pass

    def stop(*args, **kwargs):
        raise Stop
    monkeypatch.setattr(finite_sample, "three_phase_finite", stop)
    monkeypatch.setattr(finite, "check_memory", lambda *a: None)  # the machine's memory is not under test here
    with pytest.raises(Stop):
        finite.cmd_finite(finite.argparse.Namespace(d=1000, p=None, lengths="positive", epsilon=finite.FINITE_EPSILON,
                                          eta1_frac=0.5, constant=30.0, n1=None, n3=None, seeds=1, seed=0,
                                          test_size=100_000, quiet=True))


def test_a_failure_after_a_ctrl_c_is_an_interruption_not_an_internal_error():
    """A C extension can turn a Ctrl-C into another exception with no trace of it (pandas' PyCapsule_Import raises
    a bare ImportError when the import it runs is interrupted: test_kill_loop saw exit 4 "internal error"). The
    entry point records each Ctrl-C, and a command failing after one exits 130, not 4; without a Ctrl-C the same
    failure is an internal error."""
    import subprocess
    import sys

    code = """
import os, signal, sys
from app import cli

def command(argv):
    try:
        if argv == ["ctrl-c"]:
            os.kill(os.getpid(), signal.SIGINT)
            signal.sigtimedwait([], 0.5) if hasattr(signal, "sigtimedwait") else None
    except KeyboardInterrupt:
        pass
    err = ImportError("PyCapsule_Import could not import module \\"pandas\\"")
    return cli.interrupted("occ-companion x") if cli.interrupt_inside(err) else 4

cli.main = command
sys.exit(cli.entry())
"""
    for arg, want in (("ctrl-c", 130), ("none", 4)):
        r = subprocess.run([sys.executable, "-c", code, arg], capture_output=True, text=True, timeout=120)
        assert r.returncode == want, (arg, r.returncode, r.stderr)
