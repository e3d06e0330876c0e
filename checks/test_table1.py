"""Table 1 claims that hold robustly under the suite's reconstruction, at the quick size (``--quick``), on the
exact rows (population gradient descent from zero: deterministic, no seed spread).

The criterion is the one the verdicts use (``verdicts.excess_interval`` and ``verdicts.non_inferior``): a plan
matches joint GD when the upper bound of its excess held-out risk (here its population error slack: the exact
rows have no seed spread) is at most the lower bound of the margin, a tenth of the task's attention effect
(output-only minus joint-GD risk) less a tenth of that effect's own slack; it does not when the excess's lower
bound is above the margin's upper bound.  Each claim is asserted with a control, the same
criterion applied where it must fail, and only on runs that no artefact decides (converged, no step size at
a grid edge).  The other claims are judged in docs/table1.md with their numbers, not asserted here.  (The
first protocol's "three-phase falls short on AND with one head" is not among them: with budgets to
convergence and one learning rate for joint GD, both plans reach the same risk on that row at this size,
0.3747, the one-head capacity ceiling of AND.)
"""
from __future__ import annotations

from dataclasses import replace

import pytest

from numerics.experiments import runner
from numerics.experiments import verdicts
@pytest.fixture(scope="module")
def quick() -> dict:
    cfg = runner.Config.quick(tasks=("occurrence", "OR", "AND"), and_heads=(1,), jobs=1)
    return runner.run(cfg, quiet=True)


def _free_of_artefacts(row, plans):
    """The run-level artefacts (edge, divergence, non-convergence); capacity is checked separately."""
    return [a for a in verdicts.artefacts(row, plans) if "ceiling" not in a and "representable" not in a]


@pytest.mark.slow  # the quick Table 1 run
@pytest.mark.parametrize("name", ["occurrence", "OR"])
def test_three_phase_matches_joint(quick, name):
    row = quick["rows"][name]
    assert row["exact"]
    assert _free_of_artefacts(row, ("three_phase", "joint", "output_only")) == []
    iv = verdicts.excess_interval(row, "three_phase", "joint")
    assert verdicts.non_inferior(iv["lower"], iv["upper"], iv["margin_lower"], iv["margin_upper"]) is True
    # controls: the single-layer plans do not match joint GD on the same row
    for plan in ("output_only", "attention_only"):
        iv = verdicts.excess_interval(row, plan, "joint")
        assert verdicts.non_inferior(iv["lower"], iv["upper"], iv["margin_lower"], iv["margin_upper"]) is False


@pytest.mark.slow  # the quick Table 1 run
def test_attention_only_stays_at_the_start(quick):
    """Zero start: B stays 0, the attention gradient is 0, the risk stays R(0, 0) = 1/2 (squared loss, y = +-1,
    f = 0) on every exact row that starts attention-only there (occurrence, OR), whatever its step size (the
    search finds it insensitive); controls: three-phase leaves it, and so does attention-only on one-head AND,
    whose readout is fixed at order one (``runner.attention_only_readout``) rather than at the zero start."""
    for name in ("occurrence", "OR", "AND (H=1)"):
        row = quick["rows"][name]
        plans = row["plans"]
        bound = plans["attention_only"]["truncation_bound"] + plans["attention_only"]["rounding_bound"]
        assert plans["three_phase"]["risk"]["mean"] < 0.5 - 0.01
        if row["model_class"]["attention_only_readout"] == "fixed":
            assert name == "AND (H=1)" and plans["attention_only"]["risk"]["mean"] < 0.5 - 0.01
            continue
        assert abs(plans["attention_only"]["risk"]["mean"] - 0.5) <= bound
        assert plans["attention_only"]["search"]["insensitive"]


def test_recorded_configuration_reruns_to_the_same_numbers():
    """The configuration recorded in the results rebuilds the same numbers (serial and parallel runs agree)."""
    import json

    cfg = runner.Config.quick(tasks=("occurrence", "SLR"), seeds=2, jobs=1)
    cfg = replace(cfg, reading=cfg.reading.with_(max_steps=40))
    first = json.loads(json.dumps(runner.run(cfg, quiet=True)))
    again = replace(runner.Config.from_dict(first["config"]), jobs=2)
    second = json.loads(json.dumps(runner.run(again, quiet=True)))
    assert first["config"] | {"jobs": 2} == second["config"]
    for name in first["rows"]:
        for plan, pr in first["rows"][name]["plans"].items():
            assert pr["risk"] == second["rows"][name]["plans"][plan]["risk"]
            assert pr["search"]["tried"] == second["rows"][name]["plans"][plan]["search"]["tried"]
