"""The sweep's robustness tables count over distinct configurations (``app.render.sweep.distinct``), report a
configuration counted at a smaller d once (OR at d is occurrence at d/2, even pairs at every d), and say which
plan caused each refusal; summaries that record no configurations count over readings."""
from __future__ import annotations

import io

from app.render import sweep as sweep_render

LAG = "attention lags output under joint GD (displacement)"
MATCH = "three-phase matches joint GD"
AXES = {"schedule": ["k2=1", "k2=20", "k2=plateau"], "optimizer": ["gd", "adam"]}
READINGS = [f"{s}/{o}" for o in AXES["optimizer"] for s in AXES["schedule"]]


def _v(row, claim, verdict, config=None, cause=None):
    out = {"row": row, "claim": claim, "verdict": verdict, "reasons": ["x"] if verdict == "refused" else [],
           "evidence": ""}
    if config is not None:
        out["config"] = config
    if cause is not None:
        out["cause"] = cause
    return out


def _cells(configs=True):
    """d = 8: the lag reads joint GD only (one configuration per optimizer: gd holds, adam refused by joint);
    the comparison has one configuration per reading. d = 16: OR's runs are occurrence's at d = 8."""
    cells = []
    match = {"k2=1/gd": ("refused", "three-phase"), "k2=20/gd": ("refused", "three-phase"),
             "k2=plateau/gd": ("holds", None), "k2=1/adam": ("refused", "capacity"),
             "k2=20/adam": ("depends on tuning", None), "k2=plateau/adam": ("not testable", None)}
    for r in READINGS:
        opt = r.split("/")[1]
        lag = ("holds", None) if opt == "gd" else ("refused", "joint")
        cells.append({"reading": r, "d": 8, "verdicts": [
            _v("occurrence", LAG, lag[0], f"lag-{opt}" if configs else None, lag[1]),
            _v("occurrence", MATCH, match[r][0], f"match-{r}" if configs else None, match[r][1])]})
    for r in READINGS[:2]:
        cells.append({"reading": r, "d": 16, "verdicts": [
            _v("OR", LAG, "holds", "lag-gd" if configs else None),
            _v("occurrence", LAG, "holds", "lag16-gd" if configs else None)]})
    return cells


def _summary(configs=True):
    return {"default_reading": "k2=plateau/gd", "readings_file": {"axes": AXES}, "cells": _cells(configs)}


def test_the_lag_is_counted_once_per_joint_gd_configuration():
    table = sweep_render.robustness_table(_summary(), 8)
    lines = {ln.split(" | ")[1]: ln for ln in table[2:]}
    assert lines[LAG] == "| occurrence | " + LAG + " | holds | 1/2 | 0/2 | 0/2 | 1/2: joint 1 | 0 | 1/1 | - |"
    assert lines[MATCH] == ("| occurrence | " + MATCH + " | holds | 1/6 | 0/6 | 0/6 | 3/6: capacity 1, three-phase 2 "
                            "| not testable 1, depends on tuning 1 | 1/1 | - |")


def test_a_configuration_counted_at_a_smaller_d_is_reported_once():
    table = sweep_render.robustness_table(_summary(), 16)
    lines = {ln.split(" | ")[0] + ln.split(" | ")[1]: ln for ln in table[2:]}
    assert lines["| OR" + LAG] == ("| OR | " + LAG + " | not run | the same configuration and verdicts as occurrence at "
                                   "d = 8: not counted again | | | | | | |")
    assert lines["| occurrence" + LAG].startswith("| occurrence | " + LAG + " | not run | 1/1 |")
    by_d = sweep_render.verdicts_by_d(_summary())
    or_line = next(ln for ln in by_d if ln.startswith("| OR |"))
    assert or_line.endswith("| not run | the same configuration and verdicts as occurrence at d = 8 |")
    occ = next(ln for ln in by_d if ln.startswith(f"| occurrence | {MATCH} |"))
    assert "holds (1 h, 0 n, 0 u, 3 r, 1 nt, 1 dt of 6)" in occ


def test_summaries_without_configurations_count_over_readings():
    table = sweep_render.robustness_table(_summary(configs=False), 8)
    lag = next(ln for ln in table if f"| {LAG} |" in ln)
    assert lag == "| occurrence | " + LAG + " | holds | 3/6 | 0/6 | 0/6 | 3/6: joint 3 | 0 | 3/3 | - |"
    table = sweep_render.robustness_table(_summary(configs=False), 16)
    assert not any("the same runs" in ln for ln in table)
    # a refusal recorded without its cause gets it from its reasons
    v = _v("OR", LAG, "refused")
    v["reasons"] = ["joint: diverged on seeds [0]"]
    assert sweep_render.refused_cell([v, _v("OR", LAG, "holds")], 2) == "1/2: joint 1"
    assert sweep_render.refused_cell([_v("OR", LAG, "holds")], 1) == "0/1"


def test_heat_map_draws_every_verdict_value():
    buf = io.BytesIO()
    sweep_render.heat_map(_summary(), 8, buf)
    assert buf.getvalue().startswith(b"\x89PNG")
    assert set(sweep_render.COLOURS) == set(sweep_render.VERDICTS)


def test_the_lag_ratios_across_readings_count_each_joint_gd_configuration_once():
    """Three readings share one joint-GD configuration (ratio 2) and one has its own (ratio 0.5): the
    median over configurations is 1.25 and one of two is above 1 (over readings: 2 and 3/4)."""
    cells = []
    for r, ratio, config in (("a", 2.0, "J1"), ("b", 2.0, "J1"), ("c", 2.0, "J1"), ("e", 0.5, "J2")):
        cells.append({"reading": r, "d": 8, "lag": {"OR": {"displacement": {"ratio": {"mean": ratio}}}},
                      "verdicts": [_v("OR", LAG, "holds", config)]})
    line = sweep_render.lag_across_readings({"cells": cells}, 8)[2]
    assert line == "| OR | 1.25 [0.5, 2] | 1/2 | n/a | - |"
    for c in cells:
        del c["verdicts"][0]["config"]
    assert sweep_render.lag_across_readings({"cells": cells}, 8)[2] == "| OR | 2 [0.5, 2] | 3/4 | n/a | - |"


def test_the_counts_note_says_readings_when_the_record_names_no_configuration():
    """A sweep recorded before verdicts named their configuration is counted over readings, and the page must
    not claim distinct configurations for it; one whose every verdict names its configuration is."""
    from app.render import sweep as sweep_render
    old = {"cells": [{"verdicts": [{"row": "OR", "claim": "c"}, {"row": "OR", "claim": "d", "config": "x"}]}]}
    new = {"cells": [{"verdicts": [{"row": "OR", "claim": "c", "config": "y"}]}]}
    assert sweep_render.counts_note(old) == sweep_render.RECORDED_NOTE
    assert sweep_render.counts_note(new) == sweep_render.COUNTS_NOTE
    assert "counts are over readings" in sweep_render.RECORDED_NOTE


def test_readings_of_one_configuration_with_different_verdicts_are_an_error_naming_them():
    """One configuration is one body of evidence: verdicts that differ under it mean the configuration missed
    something the verdict reads, which the tables must not paper over by counting the first reading's."""
    import pytest

    per = {"k2=1/gd": _v("occurrence", LAG, "holds", "c1"), "k2=20/gd": _v("occurrence", LAG, "holds", "c1"),
           "k2=plateau/gd": _v("occurrence", LAG, "undecided", "c1")}
    with pytest.raises(ValueError, match=r"holds under k2=1/gd and undecided under k2=plateau/gd.*\(c1\)"):
        sweep_render.distinct(per)
    per["k2=plateau/gd"]["config"] = "c2"
    assert list(sweep_render.distinct(per)) == ["c1", "c2"]


def test_a_configuration_seen_at_a_smaller_d_with_another_verdict_is_counted_again():
    """OR at d is occurrence at d/2 up to rounding: where its verdict differs, it is counted at its own d."""
    summary = _summary()
    for cell in summary["cells"]:
        if cell["d"] == 16:
            cell["verdicts"][0]["verdict"] = "undecided"      # OR's lag at d = 16 (one configuration)
    lines = {ln.split(" | ")[0] + ln.split(" | ")[1]: ln for ln in sweep_render.robustness_table(summary, 16)[2:]}
    assert lines["| OR" + LAG].startswith("| OR | " + LAG + " | not run | 0/1 | 0/1 | 1/1 |")


def test_a_configuration_is_a_repeat_of_the_last_smaller_d_with_its_verdict():
    """One configuration (even pairs does not depend on d) holds at d = 8 and is undecided at 16 and 32: it is
    counted at 8 and at 16, and at 32 named the same as at 16, not counted a third time."""
    cells = [{"reading": r, "d": d, "verdicts": [_v("even_pairs", LAG, verdict, "ep")]}
             for d, verdict in ((8, "holds"), (16, "undecided"), (32, "undecided")) for r in READINGS[:1]]
    summary = {"default_reading": READINGS[0], "readings_file": {"axes": AXES}, "cells": cells}
    rows = {d: sweep_render.robustness_table(summary, d)[2] for d in (8, 16, 32)}
    assert "| holds | 1/1 |" in rows[8] and "| undecided | 0/1 | 0/1 | 1/1 |" in rows[16]
    assert "the same configuration and verdicts as even_pairs at d = 16: not counted again" in rows[32]
