"""Table 1 claims that hold robustly under the suite's reconstruction, at the quick size (``--quick``).

Each claim is asserted with a control: the same predicate applied where it must fail.  Rows trained on the
exact population from zero are deterministic (no seed spread), so their claims compare risks directly; the
two-head AND row has seeds, and its claim needs a difference beyond 3 standard errors of the seed-to-seed
spread.  Claims that do not hold under the reconstruction (three-phase matching joint GD on ICL bigram and
SLR, attention-only being competitive on AND, the ordering of the gap metric) are reported in
docs/table1.md with their numbers, not asserted here.
"""
from __future__ import annotations

import json
import math

import pytest

from numerics.experiments import table1 as T1

MATCH_FACTOR = 10.0
"""'Matches': a plan's held-out risk is within this factor of joint GD's.  The effect it separates is the
gap to the output-only floor, a factor above 500 at the quick size (see the controls)."""


@pytest.fixture(scope="module")
def quick() -> dict:
    cfg = T1.Config.quick(tasks=("occurrence", "OR", "AND"), jobs=1)
    return T1.run(cfg, quiet=True)["rows"]


def _risk(rows: dict, row: str, plan: str) -> dict:
    return rows[row]["plans"][plan]["risk"]


def matches_joint(rows: dict, row: str, plan: str) -> bool:
    """The plan's held-out risk is at most MATCH_FACTOR times joint GD's (deterministic rows)."""
    return _risk(rows, row, plan)["mean"] <= MATCH_FACTOR * _risk(rows, row, "joint")["mean"]


def falls_short(rows: dict, row: str, plan: str = "three_phase") -> bool:
    """The plan's risk exceeds joint GD's by more than 3 standard errors of the seed spread (0 when the row
    is deterministic, where any excess of 1e-6 counts)."""
    a, b = _risk(rows, row, plan), _risk(rows, row, "joint")
    se = math.sqrt(a["std"] ** 2 / a["n"] + b["std"] ** 2 / b["n"])
    return a["mean"] - b["mean"] > max(3 * se, 1e-6)


@pytest.mark.parametrize("row", ["occurrence", "OR"])
def test_three_phase_matches_joint(quick, row):
    assert quick[row]["deterministic"]
    assert matches_joint(quick, row, "three_phase")
    assert not falls_short(quick, row)
    # controls: the single-layer plans do not match joint GD on the same row
    assert not matches_joint(quick, row, "output_only")
    assert not matches_joint(quick, row, "attention_only")


def test_attention_only_stays_at_the_start(quick):
    """Zero start: B stays 0, the attention gradient is 0, the risk stays R(0, 0) = 1/2 (squared loss,
    y = +-1 balanced, f = 0) on every deterministic row; control: three-phase leaves it."""
    for row in ("occurrence", "OR", "AND (H=1)"):
        r = _risk(quick, row, "attention_only")["mean"]
        dropped = quick[row]["population"]["dropped"]
        assert abs(r - 0.5) <= dropped
        assert _risk(quick, row, "three_phase")["mean"] < 0.5 - 0.01


@pytest.mark.parametrize("row", ["AND (H=2)", "AND (H=1)"])
def test_three_phase_falls_short_on_and(quick, row):
    assert falls_short(quick, row)
    # control: the same predicate fails on occurrence and OR, where three-phase matches joint GD
    assert not falls_short(quick, "occurrence") and not falls_short(quick, "OR")


def test_recorded_configuration_reruns_to_the_same_numbers():
    """The configuration recorded in the JSON rebuilds the same table (serial and parallel runs agree)."""
    cfg = T1.Config.quick(tasks=("occurrence", "SLR"), seeds=2, T=6, jobs=1)
    first = json.loads(json.dumps(T1.run(cfg, quiet=True)))
    again = T1.Config.from_dict(first["config"])
    again.jobs = 2
    second = json.loads(json.dumps(T1.run(again, quiet=True)))
    assert first["config"] | {"jobs": 2} == second["config"]
    assert T1.table_rows_markdown(first) == T1.table_rows_markdown(second)
    strip = lambda recs: [{k: v for k, v in r.items() if k != "cpu_s"} for r in recs]  # noqa: E731
    for name in first["rows"]:
        for plan, pr in first["rows"][name]["plans"].items():
            assert strip(pr["seeds"]) == strip(second["rows"][name]["plans"][plan]["seeds"])
