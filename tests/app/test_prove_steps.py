"""prove's --steps refused before any work above a range, like run's, and above the memory its recorded steps
take."""
import pytest

from app.cli import main


@pytest.fixture
def no_work(monkeypatch):
    """prove's certification replaced by a failure: a refusal must come before it."""
    import numerics.theorem.certify

    def started(*args, **kwargs):
        raise AssertionError("prove started certifying")

    monkeypatch.setattr(numerics.theorem.certify, "certify_claims", started)


@pytest.mark.parametrize("steps", ["99999999999", "1000001"])
def test_prove_refuses_steps_above_the_bound_before_any_work(steps, tmp_path, capsys, no_work):
    out = tmp_path / "o"
    assert main(["prove", "--d", "3", "--steps", steps, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--steps" in err and "[0, 1000000]" in err and steps in err, err
    assert not out.exists()


def test_prove_refuses_steps_whose_memory_exceeds_the_machine(monkeypatch, tmp_path, capsys, no_work):
    """At --d 3, a million recorded steps take about a GB: refused on a machine with 500 MB available,
    where d = 3 alone fits."""
    import app.options

    monkeypatch.setattr(app.options, "available_memory", lambda: 500 * 2**20)
    out = tmp_path / "o"
    assert main(["prove", "--d", "3", "--steps", "1000000", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--steps" in err and "memory" in err, err
    assert not out.exists()


def test_prove_takes_steps_at_the_bound_to_the_work(monkeypatch, tmp_path, capsys, no_work):
    """The largest --steps passes the checks where the memory suffices (the certification is reached)."""
    import app.options

    monkeypatch.setattr(app.options, "available_memory", lambda: 4 * 2**30)
    assert main(["prove", "--d", "3", "--steps", "1000000", "--out", str(tmp_path / "o")]) == 4
    assert "prove started certifying" in capsys.readouterr().err
