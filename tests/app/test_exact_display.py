"""An exact number typed on the command line (app.options.ExactDecimal) reads as typed in a message."""
from app.cli import main
from app.options import ExactDecimal, exact_positive


def test_an_exact_number_reads_as_typed_in_a_message():
    x = exact_positive("1e-400")
    assert repr(x) == "1e-400" and f"{x!r}" == "1e-400" and repr(ExactDecimal(" 0.25 ")) == "0.25"


def test_run_names_an_epsilon_below_the_doubles_as_typed(tmp_path, capsys):
    """1e-400 is exact and > 0 but is 0 as a double, which the library refuses; the message shows the value as
    typed, not the repr of a fraction with a 401-digit denominator."""
    out = tmp_path / "o"
    assert main(["run", "--epsilon", "1e-400", "--no-plot", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "got 1e-400" in err and "ExactDecimal" not in err and "0000000000" not in err, err
    assert max(len(line) for line in err.splitlines()) < 200
