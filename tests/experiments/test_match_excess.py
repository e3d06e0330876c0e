"""The "matches" criterion is one-sided: a plan matches its reference when its mean held-out risk exceeds
the reference's by at most the margin, so a plan clearly better than its reference (an excess far below minus
the margin) matches; a criterion on the absolute excess would call it a mismatch."""
from numerics.experiments import verdicts
from tests.experiments.test_verdicts import _row, _stat

BETTER = {"plans.three_phase.risk": _stat(0.125), "plans.joint.risk": _stat(0.625),
          "plans.output_only.risk": _stat(0.75)}
"""Three-phase 0.5 below joint GD; the margin is 0.1 x the attention effect 0.125 (one run each: no standard
error), so the excess -0.5 is far from both +margin and -margin."""


def _claims(row) -> dict[str, str]:
    return {v["claim"]: v["verdict"] for v in verdicts.assess({"rows": {row["name"]: row}})}


def test_the_excess_keeps_its_sign():
    e, margin, slack = verdicts.excess(_row(**BETTER), "three_phase", "joint")
    assert e == -0.5 and 0 < margin < 0.5 and slack == 0.0


def test_a_plan_clearly_better_than_its_reference_matches():
    row = _row(**BETTER)
    assert _claims(row)["three-phase matches joint GD"] == "holds"


def test_a_plan_clearly_better_than_its_reference_does_not_fall_short():
    row = _row(name="AND (H=2)", task="AND", **BETTER)
    claims = _claims(row)
    assert claims["three-phase falls short of joint GD"] == "does not hold"


def test_attention_only_better_than_three_phase_is_competitive():
    row = _row(name="AND (H=2)", task="AND", **{**BETTER, "plans.attention_only.risk": _stat(0.0625),
                                               "plans.three_phase.risk": _stat(0.5),
                                               "model_class": {"attention_only_readout": "fixed",
                                                               "attention_only_readout_scale": 1.0}})
    assert _claims(row)["attention-only is competitive (matches three-phase)"] == "holds"


def test_a_plan_clearly_worse_than_its_reference_does_not_match():
    """The mirror case: the same gap the other way is a mismatch, so the test above is about the sign."""
    row = _row(**{**BETTER, "plans.three_phase.risk": _stat(0.625), "plans.joint.risk": _stat(0.125),
                  "plans.output_only.risk": _stat(0.25)})
    assert _claims(row)["three-phase matches joint GD"] == "does not hold"
