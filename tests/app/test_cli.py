"""The command line: every flag validated before any work, messages in the CLI's terms, exits,
version, ``python -m app``, help text, progress bars, printed digits."""
import io
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from app import __version__
from app.cli import build_parser, main
from app.render.formatting import supported_digits
from app.progress import progress_factory

ROOT = Path(__file__).resolve().parents[2]

BAD_FLAGS = [
    (["run", "--steps", "-1"], "--steps"),
    (["run", "--joint-eta", "nan"], "--joint-eta"),
    (["run", "--epsilon", "0"], "--epsilon"),
    (["run", "--eta1-frac", "1"], "--eta1-frac"),
    (["run", "--eta2-factor", "0.5"], "--eta2-factor"),
    (["run", "--eta3", "1.5"], "--eta3"),
    (["run", "--tol", "1e-20"], "--tol"),
    (["run", "--p", "1"], "--p"),
    (["run", "--max-terms", "0"], "--max-terms"),
    (["evaluate", "--mc", "-5"], "--mc"),
    (["evaluate", "--beta", "1,x,-1"], "--beta"),
    (["evaluate", "--alpha", "1,inf"], "--alpha"),
    (["evaluate", "--dps", "3"], "--dps"),
    (["values", "--epsilon", "-1"], "--epsilon"),
    (["values", "--eta1", "nan"], "--eta1"),
    (["values", "--eta2", "inf"], "--eta2"),
    (["values", "--eta1", "-3"], "--eta1"),
    (["values", "--dps", "0"], "--dps"),
    (["finite", "--seeds", "0"], "--seeds"),
    (["finite", "--seeds", "-1"], "--seeds"),
    (["finite", "--n1", "0"], "--n1"),
    (["finite", "--n3", "-2"], "--n3"),
    (["finite", "--test-size", "1"], "--test-size"),
    (["finite", "--constant", "0"], "--constant"),
    (["run", "--d", "1"], "--d"),
]


@pytest.mark.parametrize("argv, flag", BAD_FLAGS, ids=[" ".join(a) for a, _ in BAD_FLAGS])
def test_every_bad_flag_is_refused_before_any_output(argv, flag, capsys, tmp_path):
    assert main([*argv, *(["--out", str(tmp_path / "o")] if argv[0] == "run" else [])]) == 2
    out, err = capsys.readouterr()
    assert out == "" and f"argument {flag}" in err
    assert not (tmp_path / "o").exists()  # refused before the output folder was touched


def test_combinations_are_checked_before_output(capsys):
    assert main(["evaluate", "--d", "3", "--beta", "1,-1"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "--beta must have d = 3 entries" in err
    assert main(["evaluate", "--tol", "1e-20"]) == 2
    assert "--backend mp" in capsys.readouterr().err
    assert main(["values", "--d", "5", "--eta1", "7"]) == 2  # eta1_max = 5 at d = 5
    out, err = capsys.readouterr()
    assert out == "" and "--eta1 must lie in (0, eta1_max) = (0, 5)" in err


def test_messages_give_advice_the_user_can_type(capsys, tmp_path):
    assert main(["run", "--d", "2", "--out", str(tmp_path)]) == 2
    assert "needs d >= 3; try --d 3" in capsys.readouterr().err
    assert main(["run", "--d", "3", "--p", "1e-4", "--max-terms", "1000", "--no-plot", "--quiet",
                 "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--max-terms 1000" in err and "raise --max-terms" in err and "--evaluator integral" in err
    assert "numerics" not in err and "max_terms" not in err
    assert "`occ-companion run" not in err  # never the command that just failed as advice (m6)
    assert main(["evaluate", "--d", "10000"]) == 2
    err = capsys.readouterr().err
    assert "--method integral" in err and "occ-companion evaluate --d 10000" not in err
    assert main(["finite", "--p", "0.001", "--seeds", "1"]) == 2
    err = capsys.readouterr().err
    assert "max_terms" not in err and "tol" not in err and "numerics" not in err and "--p" in err
    assert main(["values", "--d", "2", "--p", "0.5"]) == 2  # the closed forms divide by ln(d - 1) (m7)
    out, err = capsys.readouterr()
    assert out == "" and "argument --d" in err and "{}" not in err


def test_version_and_python_dash_m():
    assert __version__ and __version__[0].isdigit()
    proc = subprocess.run([sys.executable, "-m", "app", "--version"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == f"occ-companion {__version__}"


_BLAS_PROBE = """
import json, os, subprocess, sys
if sys.argv[1] == "program":
    sys.argv = ["-m"]  # what runpy shows while `python3 -m app...` imports the package
import app
import numpy
from threadpoolctl import threadpool_info
child = subprocess.run([sys.executable, "-c", "import os; print(os.environ.get('OPENBLAS_NUM_THREADS'))"],
                       capture_output=True, text=True).stdout.strip()
print(json.dumps({"defaulted": app.BLAS_THREADS_DEFAULTED, "env": os.environ.get("OPENBLAS_NUM_THREADS"),
                  "child": child, "threads": [i["num_threads"] for i in threadpool_info()
                                              if i["internal_api"] == "openblas" and "numpy" in i["filepath"]]}))
"""


def _numpy_openblas() -> bool:
    import numpy  # noqa: F401
    from threadpoolctl import threadpool_info
    return any(i.get("internal_api") == "openblas" and "numpy" in i.get("filepath", "") for i in threadpool_info())


@pytest.mark.slow  # subprocesses
@pytest.mark.skipif(not _numpy_openblas() or len(__import__("os").sched_getaffinity(0)) < 2,
                    reason="numpy without OpenBLAS, or one core to run on")
def test_a_program_loads_numpy_with_one_blas_thread_and_passes_nothing_on():
    """``python3 -m app...`` loads numpy's OpenBLAS on one thread when OPENBLAS_NUM_THREADS is unset (its
    start-up pool only spins), unsets the variable again so that nothing it starts inherits it, and keeps a
    count the user set in any variable OpenBLAS reads; importing ``app`` as a library changes nothing."""
    import os

    from app import BLAS_THREADS_VARIABLES

    def probe(mode, **extra):
        env = {k: v for k, v in os.environ.items() if k not in BLAS_THREADS_VARIABLES} | extra
        out = subprocess.run([sys.executable, "-c", _BLAS_PROBE, mode], cwd=ROOT, capture_output=True, text=True,
                             timeout=120, env=env)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    assert probe("program") == {"defaulted": True, "env": None, "child": "None", "threads": [1]}
    assert probe("program", OPENBLAS_NUM_THREADS="2") == {"defaulted": False, "env": "2", "child": "2",
                                                          "threads": [2]}
    for user in ("GOTO_NUM_THREADS", "OMP_NUM_THREADS"):  # the other variables OpenBLAS reads
        assert probe("program", **{user: "2"}) == {"defaulted": False, "env": None, "child": "None",
                                                   "threads": [2]}
    library = probe("library")
    assert library["defaulted"] is False and library["env"] is None and library["threads"][0] > 1


def test_every_option_has_help_with_its_default():
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "cmd").choices
    for name, sub in subparsers.items():
        text = sub.format_help()
        for action in sub._actions:
            if action.dest == "help":
                continue
            assert action.help, f"{name} {action.option_strings} has no help"
            if action.default not in (None, False):
                assert "default" in sub._get_formatter()._get_help_string(action), (name, action.dest)
        assert "%(default)" not in text
    finite_help = subparsers["finite"].format_help()
    assert "looser than run's 1e-3" in " ".join(finite_help.split())


def test_progress_bars_only_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    shown, hidden, quiet = Tty(), io.StringIO(), Tty()
    for stream, q in ((shown, False), (hidden, False), (quiet, True)):
        bar = progress_factory(q, stream)("phase 3", 4)
        bar.update(4)
        bar.close()
    assert "phase 3" in shown.getvalue() and "/4 [" in shown.getvalue()
    assert hidden.getvalue() == "" and quiet.getvalue() == ""


def test_printed_digits_follow_the_error_bound(capsys):
    assert supported_digits(0.123456789, 6e-5, 17) == "0.1235"
    assert supported_digits(-1.5, 1e-3, 3) == "-1.50"
    assert main(["evaluate", "--d", "3", "--beta", "1,-1,-1", "--backend", "mp", "--dps", "40", "--tol", "1e-10"]) == 0
    out = capsys.readouterr().out
    risk_line = next(ln for ln in out.splitlines() if ln.startswith("risk ="))
    value, bound = risk_line.split()[2], float(risk_line.split("<=")[1].split(",")[0])
    decimals = len(value.split(".")[1])
    assert 10.0 ** -decimals >= bound / 10 and decimals <= 12  # no digit below what the bound supports


def test_evaluate_command_with_monte_carlo(capsys):
    assert main(["evaluate", "--d", "3", "--beta", "1,-1,-1", "--alpha", "2,0,0", "--mc", "2000"]) == 0
    out = capsys.readouterr().out
    assert "risk =" in out and "Monte Carlo (2000 strings" in out


def test_values_command_and_precision(capsys):
    assert main(["values", "--d", "7", "--dps", "40", "--eta1", "1"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("c_balanced"))
    assert len(line.split()[1].replace(".", "").lstrip("0")) >= 35  # really 40 significant digits
    assert "(needs --epsilon)" in out


def test_finite_exit_status_follows_the_seeds(capsys):
    assert main(["finite", "--d", "5", "--seeds", "1", "--test-size", "5000", "--quiet"]) == 0
    assert "1/1 seeds reach" in capsys.readouterr().out
    assert main(["finite", "--d", "5", "--constant", "0.2", "--seeds", "2", "--test-size", "2000", "--quiet"]) == 1
    assert "0/2 seeds reach" in capsys.readouterr().out


def test_evaluate_arb_prints_enclosures(capsys):
    from flint import arb, ctx

    assert main(["evaluate", "--d", "4", "--alpha", "1,0,0,0", "--beta", "1,-1,-1,-1", "--backend", "arb",
                 "--tol", "1e-20"]) == 0
    out = capsys.readouterr().out
    line = next(s for s in out.splitlines() if s.startswith("risk in "))
    with ctx.workprec(128):
        ball = arb(line.split("risk in ", 1)[1].split("  (", 1)[0])
    assert ball.rad() < 1e-18
    assert main(["evaluate", "--d", "4", "--alpha", "1,0,0,0", "--beta", "1,-1,-1,-1"]) == 0
    float_risk = float(capsys.readouterr().out.split("risk = ", 1)[1].split()[0])
    assert abs(float_risk - float(ball.mid())) < 1e-11


def test_evaluate_by_the_integral_prints_the_same_enclosure(capsys):
    from flint import arb, ctx

    argv = ["evaluate", "--d", "4", "--alpha", "1,0,0,0", "--beta", "1,-1,-1,-1"]
    assert main([*argv, "--method", "integral", "--dps", "30"]) == 0
    out = capsys.readouterr().out
    assert "three arb integrals" in out
    with ctx.workprec(128):
        ball = arb(out.split("risk in ", 1)[1].split("  (", 1)[0])
    assert ball.rad() < 1e-28
    assert main([*argv, "--backend", "arb", "--tol", "1e-25"]) == 0
    with ctx.workprec(128):
        series = arb(capsys.readouterr().out.split("risk in ", 1)[1].split("  (", 1)[0])
    assert ball.overlaps(series)
    # what the integral does not cover is refused before any output, in the CLI's words
    assert main(["evaluate", "--d", "4", "--alpha", "1,0,0.5,0", "--method", "integral"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "--method series" in err and "numerics" not in err
    assert main(["evaluate", "--d", "4", "--loss", "logistic", "--method", "integral"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "--loss squared" in err
    assert main(["evaluate", "--d", "4", "--alpha", "800,0,0,0", "--method", "integral"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "--method series" in err and "numerics" not in err


def test_run_refuses_the_integral_where_it_does_not_apply_before_the_output_folder(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["run", "--d", "4", "--loss", "logistic", "--evaluator", "integral", "--out", str(out)]) == 2
    assert "--evaluator series" in capsys.readouterr().err and not out.exists()


def test_ctrl_c_inside_an_arb_integral_is_an_interrupt_not_an_internal_error(monkeypatch, capsys):
    """A Ctrl-C that lands in the integrand python-flint's acb.integral calls comes back as a SystemError caused
    by the KeyboardInterrupt (found by the benchmark's kill loop): exit 130 and the interrupt message, not 4."""
    from numerics.theorem import integral
    def integrand(*args, **kwargs):
        def f(x, analytic):
            raise KeyboardInterrupt
        return f

    monkeypatch.setattr(integral, "integrand", integrand)
    status = main(["evaluate", "--method", "integral", "--d", "5", "--alpha", "1,0,0,0,0", "--beta", "1,-1,-1,-1,-1"])
    err = capsys.readouterr().err
    assert status == 130 and "interrupted" in err and "internal error" not in err, err


def _finalizer_interrupt(monkeypatch, handler) -> None:
    """Make ``main``'s next command meet a Ctrl-C raised in a finalizer (a __del__ run while the parser is
    built), with SIGINT's handler set to ``handler`` for the test."""
    import gc

    from app import cli
    class Finalised:
        def __del__(self):
            raise KeyboardInterrupt

    real = cli.build_parser

    def parser_then_interrupt():
        Finalised()  # collected at once: its __del__ raises inside the interpreter's finalizer call
        gc.collect()
        return real()

    monkeypatch.setattr(cli, "build_parser", parser_then_interrupt)
    signal.signal(signal.SIGINT, handler)  # restored by the ``restore_sigint`` fixture


def _assert_interrupted(status, capsys) -> None:
    err = capsys.readouterr().err
    assert status == 130 and "Traceback" not in err and "interrupted" in err, err


@pytest.fixture
def restore_sigint():
    """SIGINT's handler as it was before the test."""
    previous = signal.getsignal(signal.SIGINT)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_in_a_finalizer_is_delivered_not_printed_and_lost(capsys, monkeypatch, restore_sigint):
    """A Ctrl-C that lands in a weakref callback or __del__ (found by the sweep's kill loop) cannot propagate:
    Python printed "Exception ignored ... Traceback" and the command went on.  The CLI sends it again, so the
    command stops with 130 and no traceback."""
    _finalizer_interrupt(monkeypatch, signal.default_int_handler)  # as in a fresh process
    _assert_interrupted(main(["values", "--d", "5", "--dps", "15"]), capsys)


@pytest.mark.parametrize("handler", [signal.SIG_IGN, signal.SIG_DFL], ids=["ignored", "default"])
def test_ctrl_c_in_a_finalizer_counts_when_sigint_has_no_python_handler(capsys, monkeypatch, restore_sigint,
                                                                        handler):
    """With SIGINT ignored or default (``entry`` ignores it once its command has finished, in this very
    process), re-sending cannot deliver anything; the interrupt stays pending and main takes it over."""
    _finalizer_interrupt(monkeypatch, handler)
    _assert_interrupted(main(["values", "--d", "5", "--dps", "15"]), capsys)


def test_ctrl_c_in_a_finalizer_of_a_command_that_finishes_first_is_not_lost_nor_late(capsys, monkeypatch,
                                                                                     restore_sigint):
    """The race the re-send has: the command finishes before the re-sent Ctrl-C arrives (here the re-send
    waits 0.3 s).  ``main`` takes the interrupt over: exit 130, one line; and nothing reaches the caller
    afterwards (no KeyboardInterrupt once ``main`` has returned: the default handler stays in place)."""
    import time as real_time

    from app import cli
    sleep = real_time.sleep
    _finalizer_interrupt(monkeypatch, signal.default_int_handler)
    monkeypatch.setattr(cli.time, "sleep", lambda seconds: sleep(0.3))
    _assert_interrupted(main(["--version"]), capsys)
    sleep(0.6)  # the re-send thread has woken and found the interrupt taken over: none arrives here
    assert cli._RESEND["pending"] is False

_POUNDED = r"""
import json, os, signal, subprocess, sys, time
import app.cli as C
C.main = lambda argv: 0  # the command itself is not under test: only what guarded does around it
races, real = [0], C._race_report


def counted(info):  # Python's race reports that reached guarded's hook
    hit = real(info)
    races[0] += hit
    return hit


C._race_report = counted
signal.signal(signal.SIGINT, signal.SIG_IGN)
pounder = subprocess.Popen([sys.executable, "-c",
                            f"import os, signal\nwhile True: os.kill({os.getpid()}, signal.SIGINT)"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
statuses, left, calls, end = set(), set(), 0, time.perf_counter() + float(sys.argv[1])
try:
    while races[0] < 3 and time.perf_counter() < end:
        statuses.add(C.guarded(["x"]))
        left.add(signal.getsignal(signal.SIGINT) is signal.SIG_IGN and
                 signal.getsignal(signal.SIGTERM) is signal.SIG_IGN)
        calls += 1
finally:  # also when something escapes guarded: the pounder must not outlive the test
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    pounder.kill()
    pounder.wait()
print(json.dumps({"statuses": sorted(statuses), "left_ignored": sorted(left), "races": races[0],
                  "calls": calls}))
"""


@pytest.mark.slow  # subprocesses
def test_ctrl_c_around_the_end_of_a_command_prints_no_traceback():
    """The kill loop's failure (a Ctrl-C while ``entry`` set SIGINT to SIG_IGN made Python print "OSError:
    Signal 2 ignored due to race condition" with a traceback), forced: another process sends SIGINT as fast
    as it can while ``guarded`` runs a command again and again, until Python has reported that race three
    times (at most 30 s; from a fraction of a second on an idle machine to several seconds under load).
    Every run ends 0 or 130 and leaves SIGINT and SIGTERM ignored, nothing escapes ``guarded``, and stderr
    holds only the one-line interruption messages."""
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", _POUNDED, "30"], cwd=root, capture_output=True, text=True,
                         timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    noise = [line for line in out.stderr.splitlines() if line != "occ-companion x: interrupted; nothing new "
             "was written (earlier results are kept)"]
    assert not noise, "\n".join(noise[:20])
    assert result["races"] >= 1, f"no race happened in 30 s, so the check did not run: {result}"
    assert result["left_ignored"] == [True] and set(result["statuses"]) <= {0, 130}, result


_SHUTDOWN = r"""
import os, signal, sys
import app.cli as C
C.main = lambda argv: 0


class Late:
    def __del__(self):  # run while the interpreter shuts down, after Python has reset its own handlers
        os.kill(os.getpid(), signal.SIGINT)


late = Late()
sys.exit(C.guarded(["x"]))
"""


def test_a_ctrl_c_during_interpreter_shutdown_does_not_change_the_status():
    """After ``guarded``, SIGINT is SIG_IGN, which Python keeps at shutdown (a Python handler, even one that
    drops the signal, is put back to the default one there, and the Ctrl-C would kill the process)."""
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", _SHUTDOWN], cwd=root, capture_output=True, text=True,
                         timeout=120)
    assert (out.returncode, out.stderr) == (0, ""), (out.returncode, out.stderr[-2000:])


def test_a_signal_lost_to_the_switch_to_sig_ign_is_dropped_and_other_errors_are_not(monkeypatch):
    """Python's race report is dropped by both hooks (the command's and the one after it), for SIGINT and
    SIGTERM only; any other unraisable error still reaches Python's own hook."""
    import types

    from app import cli
    seen = []
    monkeypatch.setattr(sys, "__unraisablehook__", seen.append)

    def info(exc):
        return types.SimpleNamespace(exc_type=type(exc), exc_value=exc, exc_traceback=None, err_msg=None,
                                     object=None)

    for sig in (signal.SIGINT, signal.SIGTERM):
        report = info(OSError(f"Signal {int(sig)} ignored due to race condition"))
        cli._after_command(report)
        cli._unraisable(report)
    assert seen == []
    others = [info(OSError("Signal 10 ignored due to race condition")), info(OSError("disk full")),
              info(ValueError("Signal 2 ignored due to race condition"))]
    for other in others:
        cli._after_command(other)
        cli._unraisable(other)
    assert seen == [o for o in others for _ in range(2)]
