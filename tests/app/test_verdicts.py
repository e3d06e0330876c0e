"""Three-valued verdicts and exact inputs at the command line: `run` and `prove` say PASS, FAIL or
UNDECIDED with distinct exit statuses (app/exitcodes.py), agree on the same question, and a decimal
typed for --p or --epsilon is the number certified (0.1 is 1/10, not the double nearest it)."""
from __future__ import annotations

import json
from fractions import Fraction

import pytest

from app import exitcodes
from app.cli import main
from app.options import ExactDecimal, exact_probability


def _run(tmp_path, *extra):
    rc = main(["run", "--d", "3", "--steps", "3", "--no-plot", "--quiet", "--out", str(tmp_path), *extra])
    return rc, json.loads((tmp_path / "summary.json").read_text())


def test_run_exit_status_follows_the_verdict(tmp_path, monkeypatch, capsys):
    """PASS -> 0; FAIL -> 1; UNDECIDED (the float estimate and then the arb enclosure straddle) -> 3."""
    from numerics.theorem import certify
    from numerics.theorem import job

    rc, summary = _run(tmp_path)
    assert rc == exitcodes.DONE and summary["three_phase_verdict"] == "PASS"
    assert summary["three_phase_reaches_target"] is True
    monkeypatch.setattr(job, "float_verdict", lambda *a: "FAIL")
    rc, summary = _run(tmp_path)
    assert rc == exitcodes.CLAIM_FAILED and summary["three_phase_reaches_target"] is False
    assert "NO" in capsys.readouterr().out
    monkeypatch.setattr(job, "float_verdict", lambda *a: "UNDECIDED")
    monkeypatch.setattr(certify, "below", lambda ball, t: "UNDECIDED")
    rc, summary = _run(tmp_path)
    assert rc == exitcodes.UNDECIDED and summary["three_phase_reaches_target"] is None
    assert summary["plans"]["three-phase"]["certified"]["dps"] == job.MAX_CERTIFY_DPS  # retried to the cap
    assert "UNDECIDED" in capsys.readouterr().out


def test_float_verdict_is_three_valued():
    from numerics.theorem.job import float_verdict

    assert float_verdict(1.0, 0.1, 1.2) == "PASS" and float_verdict(1.0, 0.1, 1.05) == "UNDECIDED"
    assert float_verdict(1.0, 0.1, 0.85) == "FAIL" and float_verdict(1.0, 0.0, 1.0) == "PASS"


@pytest.mark.parametrize("epsilon, verdict", [("1e-14", "PASS"),
                                            pytest.param("1e-300", "UNDECIDED", marks=pytest.mark.slow)])
def test_run_and_prove_agree(epsilon, verdict, tmp_path, capsys):
    """At epsilon = 1e-14 the float estimate cannot decide (bound ~1e-13): run brings in the arb
    enclosure and says PASS, as prove does; at 1e-300 the end point's risk is below 1e-100 but neither
    100 digits (run) nor 1024 bits (prove) resolve 1e-300: both say UNDECIDED (exit 3), neither FAIL."""
    rc, summary = _run(tmp_path / "run", "--epsilon", epsilon, "--tol", "1e-15")
    assert summary["three_phase_verdict"] == verdict
    assert summary["exact_inputs"]["epsilon"] == str(Fraction(epsilon))
    prc = main(["prove", "--d", "3", "--steps", "3", "--epsilon", epsilon, "--out", str(tmp_path / "prove")])
    data = json.loads((tmp_path / "prove" / "certificate.json").read_text())
    end = [c for c in data["certificates"] if c["item"] == "end-point risk"][0]
    assert end["status"] == verdict
    assert rc == prc == (exitcodes.DONE if verdict == "PASS" else exitcodes.UNDECIDED)


def test_exact_decimal_parsing():
    x = exact_probability("0.1")
    assert isinstance(x, ExactDecimal) and x == Fraction(1, 10) and str(x) == "0.1" and f"{x:.2f}" == "0.10"
    assert x + 0.0 == pytest.approx(0.1)
    with pytest.raises(Exception):
        exact_probability("nan")
    with pytest.raises(Exception):
        exact_probability("1.5")


def test_p_typed_as_a_decimal_is_the_p_certified(capsys):
    """evaluate --method integral --p 0.1 encloses the risk at p = 1/10 (the double nearest 0.1 gives a
    risk about 1e-17 away, far outside a 1e-31 ball); values --p 0.1 prints 4.9/5.9 to 40 digits."""
    from numerics.theorem.integral import IntegralEvaluator
    from theory.setting import Setting

    assert main(["evaluate", "--d", "5", "--alpha", "1,0,0,0,0", "--beta=1,-1,-1,-1,-1", "--p", "0.1",
                 "--method", "integral"]) == 0
    line = [x for x in capsys.readouterr().out.splitlines() if x.startswith("risk in")][0]
    mid, rad = line.split("[")[1].split("]")[0].split(" +/- ")
    exact = IntegralEvaluator(Setting(5, p=Fraction(1, 10)), dps=40).evaluate_symmetric(1.0, 0.0, 1.0, -1.0).risk
    from app.render.formatting import exact_value

    assert abs(exact_value(exact) - Fraction(mid)) + exact_value(exact.rad()) <= Fraction(rad)
    assert main(["values", "--d", "50", "--p", "0.1", "--dps", "40"]) == 0
    out = capsys.readouterr().out
    assert "prob_negative      0.8305084745762711864406779661016949152542" in out


def test_the_job_brings_in_the_enclosure_only_when_the_estimate_cannot_decide(monkeypatch):
    """The domain function: a decided float estimate is the verdict (no arb work unless ``certify``); an
    undecided one is replaced by the enclosure's verdict at CERTIFY_DPS digits, the float one kept beside it."""
    from numerics.theorem import job
    from theory.setting import Setting

    options = job.JobOptions(steps=3)
    decided = job.run(Setting(3), options)
    assert (decided.float_verdict, decided.verdict, decided.certified) == ("PASS", "PASS", None)
    monkeypatch.setattr(job, "float_verdict", lambda *a: "UNDECIDED")
    undecided = job.run(Setting(3), options)
    assert undecided.float_verdict == "UNDECIDED" and undecided.verdict == undecided.certified["verdict"] == "PASS"
    assert undecided.certified["dps"] == job.CERTIFY_DPS
    end = undecided.plans["three-phase"].final  # the enclosure is of the end point the float estimate was of
    assert abs(undecided.certified["risk"] - end.risk) <= end.risk_bound
