"""The main job names what decided its verdict: the float series estimate, the integral evaluator's arb ball
(the evaluator of d >= 1000), or the arb enclosure of the end point's re-evaluation; run prints that name."""
import pytest

from app.cli import main
from app.commands.run import print_table
from numerics.theorem import job


def _result(method: str, certified: dict | None, regime=object()) -> job.JobResult:
    return job.JobResult(method=method, evaluator_settings=None, regime=regime, output_only_floor=0.4,
                         attention_eta=1.0, plans={}, diverged={}, target=1e-3, float_verdict="PASS",
                         certified=certified, verdict="PASS")


CERTIFIED = {"risk": 5e-4, "radius": 1e-20, "risk_lower": 4e-4, "risk_upper": 6e-4, "method": "integral", "dps": 25,
             "verdict": "PASS"}


@pytest.mark.parametrize("method,certified,source", [
    ("series", None, "float series estimate"),
    ("integral", None, "arb ball of the integral evaluator"),
    ("series", CERTIFIED, "arb enclosure"),
    ("integral", CERTIFIED, "arb enclosure"),
])
def test_the_verdict_source_is_what_decided(method, certified, source, capsys):
    result = _result(method, certified)
    assert result.verdict_source == source
    summary = {"plans": {}, "regime": {}, "risk_floor": 0.0, "epsilon": 1e-3, "output_only_floor_c": 0.4}
    print_table(result, summary)
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "three-phase reaches" in ln)
    assert line.split(": yes (", 1)[1].split(")", 1)[0] == source, line


def test_no_target_no_source():
    assert _result("series", None, regime=None).verdict_source is None


@pytest.mark.slow
def test_run_at_a_large_d_names_the_integral_evaluator(tmp_path, capsys):
    """At d = 10000 the plans run on the integral evaluator, and its ball decides: not a float series."""
    import json

    assert main(["run", "--d", "10000", "--no-plot", "--quiet", "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if "three-phase reaches" in ln)
    assert "(arb ball of the integral evaluator)" in line and "series" not in line, line
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["evaluator"] == "integral"
