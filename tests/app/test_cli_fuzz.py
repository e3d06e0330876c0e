"""Fuzz test of the command line: Hypothesis-generated argument lists for every subcommand.

Values are drawn at and beyond each option's limits (0, -1, the first value past the upper limit,
1e300, nan, inf, empty text, a non-number, unicode paths, an existing file as a folder, a folder
under /proc), flags are repeated and conflicting ones combined.  The property, for every list:

* the exit status is one of the documented ones (``app.exitcodes``) other than INTERNAL (a bug);
* no Python traceback is printed;
* no file outside the given ``--out`` (or ``--root`` of ``docs``) is created, changed or removed.

Valid values of size options are kept small (d <= 5, a few steps, one seed), so that an accepted
list runs in well under a second; the refusal of sizes past the limits is what is fuzzed.  ``table1``
and the benchmarks are fuzzed only with lists that fail their validation (their runs take seconds to minutes).
``HYPOTHESIS_PROFILE=thorough`` draws eight times as many lists.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app import exitcodes
from app.cli import main
from app.render.report import CLAIMS_BEGIN, CLAIMS_END

DOCUMENTED = {exitcodes.DONE, exitcodes.CLAIM_FAILED, exitcodes.USAGE, exitcodes.UNDECIDED, exitcodes.INTERRUPTED}

BAD_NUMBERS = ["0", "-1", "nan", "inf", "-inf", "", "x", "1e300", "-1e300", "1.5", "1e-320", "١", "0x10"]
PATHS = ["out", "ü dir/☃ out", "", "/proc/occ-fuzz", "a_file", "a_file/sub", ".", "out/"]


def numbers(*valid: str) -> st.SearchStrategy[str]:
    return st.sampled_from(list(valid) + BAD_NUMBERS)


SETTING = {"--d": numbers("3", "4", "5", "2", "1"), "--p": numbers("0.5", "0.9", "1", "1e-17", "0.999999"),
           "--lengths": st.sampled_from(["positive", "nonnegative", "Positive", ""])}

FLAGS: dict[str, dict[str, st.SearchStrategy[str] | None]] = {
    "run": {**SETTING, "--loss": st.sampled_from(["squared", "logistic", "hinge"]),
            "--epsilon": numbers("0.01", "0.1", "1e-14", "1e300"),
            "--eta1-frac": numbers("0.5", "0.999999", "1"), "--eta2-factor": numbers("1", "100", "1e300", "0.999"),
            "--eta3": numbers("1", "0.5", "1.0000001"), "--attention-eta": numbers("1", "1e10"),
            "--steps": numbers("1", "3", "1000001"), "--joint-eta": numbers("1", "1000", "1e300"),
            "--evaluator": st.sampled_from(["auto", "series", "integral", "arb"]),
            "--tol": numbers("1e-12", "1e-15", "1e-16", "0.5"), "--max-terms": numbers("1000", "3000000", "1"),
            "--certify": None, "--no-plot": None, "--quiet": None, "--out": st.sampled_from(PATHS)},
    "evaluate": {**SETTING, "--loss": st.sampled_from(["squared", "logistic"]),
                 "--alpha": st.sampled_from(["1,0,0,0,0", "800,0,0,0,0", "1e300,0,0,0,0", "", "1,,2", "nan,0,0",
                                             "1,0,0", "0,0,0,0"]),
                 "--beta": st.sampled_from(["1,-1,-1,-1,-1", "1e160,0,0,0,0", "1,0,0", ",", "inf,0,0,0,0"]),
                 "--backend": st.sampled_from(["float", "mp", "arb", "gpu"]),
                 "--method": st.sampled_from(["series", "integral"]), "--tol": numbers("1e-12", "1e-16", "1e-25"),
                 "--dps": numbers("15", "30", "14", "1001", "10001"), "--max-terms": numbers("1000", "1"),
                 "--mc": numbers("100", "10000000000"), "--seed": numbers("0", "7")},
    "values": {**SETTING, "--dps": numbers("5", "30", "4", "1001"), "--eta1": numbers("1", "4.9", "50"),
               "--eta2": numbers("0", "10"), "--epsilon": numbers("0.001", "1e300")},
    "finite": {**SETTING, "--epsilon": numbers("0.01", "1e-300"), "--eta1-frac": numbers("0.5"),
               "--constant": numbers("30", "0.2", "1e300"), "--n1": numbers("1", "50", "100000000000"),
               "--n3": numbers("1", "50"), "--seeds": numbers("1", "2"), "--seed": numbers("0", "3"),
               "--test-size": numbers("2", "100", "1000000000000"), "--quiet": None},
    "prove": {"--d": st.sampled_from(["3", "4", "3,3,3", "2", "", "3,,5", "3,x", "3.5", "nan", "-3"]),
              "--epsilon": numbers("1e-3", "100", "1/0", "1e-14"), "--steps": numbers("0", "3", "1e3"),
              "--prec-bits": numbers("53", "128", "10"), "--out": st.sampled_from(PATHS),
              "--proofs-doc": st.sampled_from(["", "/proc/occ-fuzz.md", "a_file/x.md", "out"])},
    "latex": {"--lengths": st.sampled_from(["positive", "nonnegative", "x"]),
              "--only": st.sampled_from(["kappa", ",,", "nosuchkey", "grad_alpha_a_1,kappa", ""]),
              "--out": st.sampled_from(["-", "out/f.tex", "out", "/proc/occ-fuzz.tex", "a_file/x.tex", "out/ü f.tex",
                                        ""])},
    "docs": {"--check": None, "--root": st.sampled_from(["checkout", "/nonexistent", "a_file", "out", ""])},
    "table1": {"--seeds": numbers("1"), "--d": numbers("8"), "--steps": numbers("2"), "--jobs": numbers("1"),
               "--seed-base": numbers("0", "1000"), "--tuning-seed-base": numbers("1000", "3"),
               "--tuning-draws": numbers("1", "101"),
               "--tasks": st.sampled_from(["OR,OR", "foo", "", "occurrence"]), "--quick": None,
               "--out": st.sampled_from(PATHS)},
    "sweep": {"--readings": st.sampled_from(["missing.toml", "", "a_file"]), "--d": st.sampled_from(["x", "", "8", "25"]),
              "--store": st.sampled_from(["store", "a_file", "/proc/occ-fuzz"]), "--out": st.sampled_from(PATHS),
              "--workers": numbers("1", "2"), "--scheduler": st.sampled_from(["tcp://127.0.0.1:1", ""]),
              "--no-train": None, "--quiet": None, "--seed-base": numbers("0", "1000"),
              "--tuning-seed-base": numbers("1000", "3")},
    "scope": {"--studies": st.sampled_from(["nosuch", "", "kqv", "regime,kqv,kqv"]), "--quick": None,
              "--store": st.sampled_from(["store", "a_file", "/proc/occ-fuzz"]), "--out": st.sampled_from(PATHS),
              "--workers": numbers("1", "2"), "--scheduler": st.sampled_from(["tcp://127.0.0.1:1", ""]),
              "--quiet": None},
    "lag": {"--d": numbers("3", "8"), "--seeds": numbers("1"), "--tasks": st.sampled_from(["foo", "", "occurrence"]),
            "--quick": None, "--store": st.sampled_from(["store", "a_file", "/proc/occ-fuzz"]),
            "--root": st.sampled_from(["checkout", "a_file", "missing", ""]), "--workers": numbers("1", "2"),
            "--scheduler": st.sampled_from(["tcp://127.0.0.1:1", ""]), "--quiet": None},
    "benchmark": {"--quick": None, "--tiny": None, "--out": st.sampled_from(["out/b.md", "out", "/proc/occ-fuzz.md",
                                                                              "a_file/x.md", "", "out/"])},
    "benchmark-engine": {"--quick": None, "--tiny": None, "--no-torch": None,
                         "--out": st.sampled_from(["out/b.md", "out", "/proc/occ-fuzz.md", "a_file/x.md", ""])},
}
BASE = {  # cheap defaults, placed first so that drawn flags override them
    "run": ["--d", "4", "--steps", "3", "--no-plot", "--quiet", "--out", "out"],
    "evaluate": ["--d", "5"], "values": ["--d", "5", "--dps", "15"],
    "finite": ["--d", "5", "--seeds", "1", "--test-size", "200", "--quiet"],
    "prove": ["--d", "3", "--out", "out"], "latex": ["--out", "out/f.tex"], "docs": ["--root", "checkout"],
    "table1": ["--quick", "--out", "out"],
    "benchmark": ["--tiny"], "benchmark-engine": ["--tiny", "--no-torch"],
    "sweep": ["--quiet", "--out", "out"], "scope": ["--quick", "--quiet", "--out", "out"],
    "lag": ["--quick", "--quiet", "--root", "checkout"],
}
TABLE1_REFUSED = [["--seeds", "0"], ["--jobs", "0"], ["--tasks", "foo"], ["--steps", "nan"], ["--d", "x"],
                  ["--seed-base", "1000", "--tuning-seed-base", "1000"]]
BENCHMARK_REFUSED = [["--out", "/proc/occ-fuzz.md"], ["--out", "a_file/x.md"], ["--out", ""], ["--out", "out/"],
                     ["--quick", "--tiny"], ["--bogus"]]
"""The benchmarks are fuzzed, like table1, with lists refused before any measurement (a measurement takes
seconds; the kill loop runs them)."""
REFUSED = {"sweep": [["--workers", "0"], ["--d", "x"], ["--readings", "missing.toml"], ["--store", "a_file"],
                     ["--out", "a_file"], ["--workers", "1", "--scheduler", "tcp://127.0.0.1:1"],
                     ["--no-train", "--workers", "1"], ["--seed-base", "1000", "--tuning-seed-base", "1000"]],
           "scope": [["--studies", "nosuch"], ["--workers", "0"], ["--store", "a_file"], ["--out", "a_file"],
                     ["--workers", "1", "--scheduler", "tcp://127.0.0.1:1"]],
           "lag": [["--workers", "0"], ["--d", "2"], ["--seeds", "0"], ["--tasks", "foo"], ["--store", "a_file"],
                   ["--root", "missing"], ["--workers", "1", "--scheduler", "tcp://127.0.0.1:1"]]}
"""sweep, scope and lag: lists refused before any unit runs (a run starts a dask cluster; the kill loop and
tests/experiments/test_sweep.py run them)."""


@st.composite
def argument_lists(draw, command: str) -> list[str]:
    flags = FLAGS[command]
    argv = [command, *BASE[command]]
    for flag in draw(st.lists(st.sampled_from(sorted(flags)), max_size=5)):  # repeats allowed
        argv.append(flag)
        if flags[flag] is not None:
            argv.append(draw(flags[flag]))
    if command == "table1":  # only lists that fail validation before any work
        argv += draw(st.sampled_from(TABLE1_REFUSED))
    if command.startswith("benchmark"):
        argv += draw(st.sampled_from(BENCHMARK_REFUSED))
    if command in REFUSED:
        argv += draw(st.sampled_from(REFUSED[command]))
    return argv


def _snapshot(root: Path) -> dict[str, str]:
    out = {}
    for path in root.rglob("*"):
        if path.is_file():
            out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _outputs(argv: list[str]) -> list[str]:
    """The places a list may write to: the last --out (or --root, --proofs-doc) value, resolved in the cwd."""
    allowed = []
    for flag in ("--out", "--root", "--proofs-doc"):
        values = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == flag]
        if values:
            allowed.append(values[-1])
        elif flag == "--out" and argv[0] in ("run", "prove", "table1"):
            allowed.append("results")
    return allowed


def _inside(rel: str, allowed: list[str]) -> bool:
    for place in allowed:
        place = os.path.normpath(place) if place else ""
        if place in ("", ".") or rel == place or rel.startswith(place.rstrip("/") + "/"):
            return True
        if rel.startswith(os.path.dirname(place) + "/") and argv_is_file(place):
            return True
    return False


def argv_is_file(place: str) -> bool:
    return place.endswith((".tex", ".md"))


def check_list(argv: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "a_file").write_text("an existing file\n")
        (root / "checkout" / "docs").mkdir(parents=True)
        (root / "checkout" / "README.md").write_text(f"# x\n\n{CLAIMS_BEGIN}\nold\n{CLAIMS_END}\n")
        before = _snapshot(root)
        cwd = os.getcwd()
        stdout, stderr = io.StringIO(), io.StringIO()
        os.chdir(root)
        try:
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                status = main(argv)
        finally:
            os.chdir(cwd)
        after = _snapshot(root)
        err = stderr.getvalue()
        assert status in DOCUMENTED, (argv, status, err[-500:])
        assert "Traceback" not in err and "Traceback" not in stdout.getvalue(), (argv, err[-500:])
        allowed = _outputs(argv)
        changed = {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}
        outside = sorted(name for name in changed if not _inside(name, allowed))
        assert not outside, (argv, outside)


FUZZ = settings(max_examples=max(1, 25 * settings.default.max_examples // 100),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@pytest.mark.slow  # the fuzz
@pytest.mark.parametrize("command", sorted(FLAGS))
def test_cli_fuzz(command):
    @FUZZ
    @given(argument_lists(command))
    def prop(argv):
        check_list(argv)

    prop()


@pytest.mark.parametrize("argv", [
    ["run", "--eta2-factor", "100", "--d", "4", "--steps", "2", "--no-plot", "--out", "out"],
    ["run", "--p", "1e-17", "--no-plot", "--out", "out"],
    ["run", "--joint-eta", "1e300", "--d", "4", "--steps", "2", "--no-plot", "--out", "out"],
    ["evaluate", "--alpha", "800,0,0,0,0", "--beta", "1,0,0,0,0"],
    ["evaluate", "--beta", "1e160,0,0,0,0"],
    ["evaluate", "--mc", "10000000000"],
    ["finite", "--d", "100000"],
    ["finite", "--constant", "1e300"],
    ["prove", "--d", "3", "--out", "/proc/occ-fuzz"],
    ["prove", "--d", "3", "--out", "a_file/sub"],
    ["latex", "--out", "out/"],
    ["latex", "--out", "/proc/occ-fuzz.tex"],
    ["run", "--out", ""],
], ids=lambda a: " ".join(a))
def test_reported_inputs_keep_the_promises(argv):
    """The report's inputs that gave tracebacks (M5, M6, m9, m10, m15) keep the fuzz property."""
    check_list(argv)
