"""``occ-companion evaluate``: parameters from a --params file, and runs of equal gradient entries printed
compressed by every evaluator (float, mp and arb series, the integral)."""
import json

import pytest

from app.cli import main
from app.commands import evaluate

SYMMETRIC = ["--d", "8", "--alpha", "0.5,0,0,0,0,0,0,0", "--beta", "1,-1,-1,-1,-1,-1,-1,-1"]


def _gradient_lines(out: str) -> dict[str, str]:
    return {line.split()[0]: line for line in out.splitlines() if line.startswith("grad_")}


@pytest.mark.parametrize("how", [["--backend", "float"], ["--backend", "mp"], ["--backend", "arb"],
                                 ["--method", "integral"]])
def test_every_evaluator_compresses_the_equal_entries_of_symmetric_parameters(how, capsys):
    assert main(["evaluate", *SYMMETRIC, *how]) == 0
    lines = _gradient_lines(capsys.readouterr().out)
    assert set(lines) == {"grad_alpha", "grad_beta"}
    for line in lines.values():
        assert line.endswith(", ... (entries 2 to 8 equal)]"), line


def test_a_run_inside_the_vector_is_compressed_and_the_rest_printed(monkeypatch, capsys):
    """Entries 2 to 4 equal, entry 5 apart: the run prints as entry 2 and a note, entry 5 as itself, with the
    digits the uncompressed printing gives them."""
    argv = ["evaluate", "--d", "5", "--alpha", "0.3,0.1,0.1,0.1,-0.2", "--beta", "1,-1,-1,-1,0.5"]
    assert main(argv) == 0
    lines = _gradient_lines(capsys.readouterr().out)
    for line in lines.values():
        entries = line.split("[", 1)[1].rstrip("]").split(", ")
        assert len(entries) == 4 and entries[2] == "... (entries 2 to 4 equal)", line
    # the entries shown are those of the printing without compression
    monkeypatch.setattr(evaluate, "MIN_RUN", 10**9)
    assert main(argv) == 0
    full = _gradient_lines(capsys.readouterr().out)
    for name, line in lines.items():
        short = line.split("[", 1)[1].rstrip("]").split(", ")
        whole = full[name].split("[", 1)[1].rstrip("]").split(", ")
        assert len(whole) == 5 and whole[1] == whole[2] == whole[3]
        assert short == [whole[0], whole[1], "... (entries 2 to 4 equal)", whole[4]]


def test_compressed_keeps_short_runs_and_numbers_from_one():
    assert evaluate.compressed([1.0, 1.0, 2.0, 2.0, 2.0], str) == ["1.0", "1.0", "2.0", "... (entries 3 to 5 equal)"]
    assert evaluate.compressed([], str) == []
    assert evaluate.compressed([0.0, -0.0, 0.0], str) == ["0.0", "... (entries 1 to 3 equal)"]


def test_arb_balls_of_equal_midpoints_but_other_radii_are_not_one_run():
    from flint import arb

    balls = [arb(1, 1e-10), arb(1, 1e-10), arb(1, 2e-10)]
    assert len(evaluate.compressed(balls, lambda x: x.str(5, radius=True))) == 3


def _write(path, payload) -> str:
    path.write_text(payload if isinstance(payload, str) else json.dumps(payload))
    return str(path)


def test_params_file_gives_the_same_numbers_as_the_flags(tmp_path, capsys):
    flags = ["--d", "5", "--alpha", "0.3,0.1,0.1,0.1,-0.2", "--beta", "1,-1,-1,-1,0.5"]
    assert main(["evaluate", *flags]) == 0
    by_flags = capsys.readouterr().out
    f = _write(tmp_path / "p.json", {"alpha": [0.3, 0.1, 0.1, 0.1, -0.2], "beta": [1, -1, -1, -1, 0.5]})
    assert main(["evaluate", "--d", "5", "--params", f]) == 0
    assert capsys.readouterr().out == by_flags
    # a list left out is zeros, as a flag left out
    assert main(["evaluate", "--d", "5", "--beta", "1,-1,-1,-1,0.5"]) == 0
    no_alpha = capsys.readouterr().out
    assert main(["evaluate", "--d", "5", "--params", _write(tmp_path / "b.json", {"beta": [1, -1, -1, -1, 0.5]})]) == 0
    assert capsys.readouterr().out == no_alpha


def test_params_file_carries_a_d_the_command_line_cannot(tmp_path, capsys):
    d = 200_000
    f = _write(tmp_path / "big.json", {"alpha": [0.5] + [0.0] * (d - 1), "beta": [1.0] + [-1.0] * (d - 1)})
    assert main(["evaluate", "--d", str(d), "--params", f, "--method", "integral", "--dps", "20"]) == 0
    out = capsys.readouterr().out
    assert "risk in [" in out
    for line in _gradient_lines(out).values():
        assert line.endswith(f", ... (entries 2 to {d} equal)]")


BAD_FILES = [
    ("missing", None, "cannot read"),
    ("notjson", "{alpha: [1]}", "not JSON"),
    ("list", "[1, 2, 3]", "a JSON array, not an object"),
    ("number", "3", "a JSON number, not an object"),
    ("empty", "{}", "neither"),
    ("unknown", {"alpha": [0] * 4, "gamma": [1]}, "'gamma'"),
    ("notlist", {"alpha": 3}, '"alpha" is not a list'),
    ("nan", '{"beta": [1, NaN, 0, 0]}', "not a finite number"),
    ("inf", '{"beta": [1, Infinity, 0, 0]}', "not a finite number"),
    ("string", {"beta": [1, "x", 0, 0]}, '"beta" entry 2'),
    ("bool", {"beta": [1, True, 0, 0]}, '"beta" entry 2'),
    ("hugeint", '{"beta": [1, 1' + "0" * 400 + ', 0, 0]}', '"beta" entry 2'),
    ("short", {"alpha": [0, 0, 0]}, "must have d = 4 entries"),
    ("notsymmetric", {"alpha": [0, 0, 0.5, 0]}, "symmetric"),
    ("bigbeta", {"beta": [1e160, 0, 0, 0]}, "overflow"),
]


@pytest.mark.parametrize("name,payload,words", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_a_bad_params_file_is_refused_before_any_work_naming_the_file(name, payload, words, tmp_path, capsys):
    f = str(tmp_path / f"{name}.json") if payload is None else _write(tmp_path / f"{name}.json", payload)
    extra = ["--method", "integral"] if name == "notsymmetric" else []
    assert main(["evaluate", "--d", "4", "--params", f, *extra]) == 2
    out, err = capsys.readouterr()
    assert out == "" and f"--params {f}" in err and words in err, err


@pytest.mark.parametrize("flag", ["--alpha", "--beta"])
def test_params_and_the_vector_flags_exclude_each_other(flag, tmp_path, capsys):
    f = _write(tmp_path / "p.json", {"alpha": [0, 0, 0, 0]})
    assert main(["evaluate", "--d", "4", "--params", f, flag, "0,0,0,0"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "--params" in err and "not both" in err
