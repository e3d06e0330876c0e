"""The engine benchmark's sections on sampling beside the step and on banks (numerics.bench.engine, its page
app.render.bench_engine): which rows they measure, the ratios and the targets they mark."""
import pytest

from app.render import bench_engine
from numerics.bench import engine


def test_the_sections_measure_the_sampled_rows_at_50_and_200():
    assert [r for r, _, _ in engine.sampled_rows()] == ["ICL", "SLR", "even pairs", "AND (H=2)"]
    assert engine.sampled_ds((50, 100, 200)) == [50, 200] and engine.sampled_ds((5, 8)) == [5, 8]


def _banks(t1: float, t4: float, t16: float) -> dict:
    return {1: (t1, t1), 4: (t4, t4), 16: (t16, t16)}


def test_a_bank_ratio_is_k_runs_stepped_per_step_of_one():
    """k T1 / Tk: a bank of 4 at the time of 2 single steps steps 2 runs per single step."""
    assert engine.bank_ratio(_banks(1.0, 2.0, 8.0), 4) == 2.0
    assert engine.bank_ratio(_banks(1.0, 2.0, 8.0), 16) == 2.0


def _targets(banks: dict, sampling: dict | None = None) -> dict:
    got = engine.sampling_and_bank_targets({"banks": banks, "sampling": sampling or {}})
    return {(t["row"], t["target"].split(":")[0]): t for t in got}


def test_a_banked_row_meets_the_bank_target_only_at_08_k_for_every_k_and_d():
    """SLR is banked: met when every bank of k steps >= 0.8 k runs per single step at every d, missed when one
    (k, d) falls short; ICL, not banked by the runner, meets it whatever its banks measure."""
    fast = _banks(1.0, 1.25, 1.25)            # 4 T1 / T4 = 3.2 = 0.8 * 4; 16 T1 / T16 = 12.8 = 0.8 * 16
    slow = _banks(1.0, 1.3, 1.25)             # 4 T1 / T4 = 3.08 < 3.2
    assert _targets({"SLR": {50: fast, 200: fast}})[("SLR", "SLR")]["met"]
    missed = _targets({"SLR": {50: fast, 200: slow}})[("SLR", "SLR")]
    assert not missed["met"] and missed["value"] == ("bank", pytest.approx(1 / 1.3), False)  # (4 T1 / T4) / 4
    icl = _targets({"ICL": {50: slow, 200: _banks(1.0, 8.0, 40.0)}})[("ICL", "ICL")]
    assert icl["met"] and icl["value"][2] is True


def test_the_sampling_target_is_the_draw_at_most_the_step_at_200():
    s = {"SLR": {50: {"draw": (9.0, 9.0), "step": (1.0, 1.0)}, 200: {"draw": (1.0, 1.0), "step": (1.0, 1.0)}},
         "ICL": {200: {"draw": (1.0, 1.01), "step": (1.0, 1.0)}}}
    got = _targets({}, s)
    assert got[("SLR", "SLR at d = 200")]["met"] and not got[("ICL", "ICL at d = 200")]["met"]
    assert len(got) == 2  # d = 50 is shown, not a target


def test_the_page_marks_each_row_and_prints_the_new_kinds_of_value():
    res = {"sampling": {"SLR": {200: {"draw": (0.002, 0.004), "step": (0.001, 0.001)}}},
           "banks": {"SLR": {200: _banks(1e-3, 1.25e-3, 1.25e-3)}, "ICL": {200: _banks(1e-3, 4e-3, 2e-2)}}}
    text = "\n".join(bench_engine._sampling(res) + bench_engine._banks(res))
    assert "| SLR | 200 | 4 / 2 | 1 / 1 | 4.0x | missed |" in text
    assert "| 3.2 | 13 | banked | target met |" in text
    assert "| 1 | 0.8 | not banked | target met |" in text
    assert bench_engine._sampling({}) == [] and bench_engine._banks({}) == []
    assert bench_engine.target_value(("draw vs step", 0.0036, 0.0003)) == "draw 3.6 ms vs step 0.3 ms (12x)"
    assert bench_engine.target_value(("bank", 0.0772, False)) == "worst bank 0.077 k (banked)"
    assert bench_engine.target_value(("bank", 0.5, True)) == "worst bank 0.5 k (not banked by the runner)"


def test_the_measurements_run_at_a_tiny_size():
    """Both measurements on every sampled row (one repeat, d = 5: their times mean nothing), with the record's
    shape the page reads."""
    draws, banks = engine.sampling_and_banks((5,), engine.ROWS, 1, 0.001)
    assert set(draws) == set(banks) == {r for r, _, _ in engine.sampled_rows()}
    for row in draws:
        assert set(draws[row][5]) == {"draw", "step"} and set(banks[row][5]) == set(engine.BANK_RUNS)
        assert all(len(t) == 2 and t[1] > 0 for t in banks[row][5].values())
