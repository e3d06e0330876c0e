"""The engine benchmark's sections on sampling beside the step and on banks (numerics.bench.engine, its page
app.render.bench_engine): which rows they measure, the ratios and the targets they mark."""
import pytest

from app.render import bench_engine
from numerics.bench import engine


def test_the_sections_measure_the_sampled_rows_at_their_d():
    """Sampling at d = 50 and 200, banks at the readings grid's d (a size without d = 50: its own d)."""
    assert [r for r, _, _ in engine.sampled_rows()] == ["ICL", "SLR", "even pairs", "AND (H=2)"]
    assert engine.sampled_ds((50, 100, 200)) == [50, 200] and engine.sampled_ds((5, 8)) == [5, 8]
    assert engine.bank_ds((50, 100, 200)) == [25, 50, 100, 200] and engine.bank_ds((5, 8)) == [5, 8]


def _banks(t1: float, t4: float, t16: float, c4: float = 1.0, c16: float = 1.0) -> dict:
    """A ``bank_steps`` record: banks of 1, 4, 16 at t1, t4, t16 s; the calls one run each at c4, c16 s."""
    return {1: {"bank": (t1, t1)}, 4: {"bank": (t4, t4), "calls": (c4, c4)},
            16: {"bank": (t16, t16), "calls": (c16, c16)}}


def test_a_bank_ratio_is_k_runs_stepped_per_step_of_one_and_its_gain_the_calls_over_the_bank():
    """k T1 / Tk: a bank of 4 at the time of 2 single steps steps 2 runs per single step; the gain is the k
    calls' time over the bank's."""
    x = _banks(1.0, 2.0, 8.0, c4=3.0, c16=4.0)
    assert engine.bank_ratio(x, 4) == 2.0 and engine.bank_ratio(x, 16) == 2.0
    assert engine.bank_gain(x, 4) == 1.5 and engine.bank_gain(x, 16) == 0.5


def _targets(banks: dict, sampling: dict | None = None) -> dict:
    got = engine.sampling_and_bank_targets({"banks": banks, "sampling": sampling or {}})
    return {(t["row"], t["d"], t["target"].split(":")[0]): t for t in got}


def test_a_bank_meets_its_target_at_08_k_for_every_bank_the_runner_makes():
    """SLR is banked whole: met at a d where the banks of 4 and 16 both step >= 0.8 k runs per single step,
    missed where one falls short; ICL at d = 200 takes one run a call, so it meets the target whatever its
    banks measure, and at d = 50 (4 runs a call) only its bank of 4 counts."""
    fast = _banks(1.0, 1.25, 1.25)            # 4 T1 / T4 = 3.2 = 0.8 * 4; 16 T1 / T16 = 12.8 = 0.8 * 16
    slow = _banks(1.0, 1.3, 1.25)             # 4 T1 / T4 = 3.08 < 3.2
    got = _targets({"SLR": {25: slow, 50: fast, 200: slow}})
    assert set(got) == {("SLR", 50, "SLR at d = 50"), ("SLR", 200, "SLR at d = 200")}  # d = 25: shown, no target
    assert got[("SLR", 50, "SLR at d = 50")]["met"] and not got[("SLR", 200, "SLR at d = 200")]["met"]
    assert got[("SLR", 200, "SLR at d = 200")]["value"] == ("bank", pytest.approx(1 / 1.3), 0.8)
    got = _targets({"ICL": {50: _banks(1.0, 1.25, 40.0), 200: _banks(1.0, 8.0, 40.0)}})
    assert got[("ICL", 50, "ICL at d = 50")]["met"] and got[("ICL", 200, "ICL at d = 200")]["met"]
    assert not _targets({"ICL": {50: slow}})[("ICL", 50, "ICL at d = 50")]["met"]


def test_the_sampling_target_is_the_draw_at_most_the_step_at_200():
    s = {"SLR": {50: {"draw": (9.0, 9.0), "step": (1.0, 1.0)}, 200: {"draw": (1.0, 1.0), "step": (1.0, 1.0)}},
         "ICL": {200: {"draw": (1.0, 1.01), "step": (1.0, 1.0)}}}
    got = _targets({}, s)
    assert got[("SLR", 200, "SLR at d = 200")]["met"] and not got[("ICL", 200, "ICL at d = 200")]["met"]
    assert len(got) == 2  # d = 50 is shown, not a target


def test_the_page_marks_each_row_and_prints_the_new_kinds_of_value():
    res = {"sampling": {"SLR": {200: {"draw": (0.002, 0.004), "step": (0.001, 0.001)}}},
           "banks": {"SLR": {200: _banks(1e-3, 1.25e-3, 1.25e-3, 5e-3, 2e-2)},
                     "ICL": {200: _banks(1e-3, 4e-3, 2e-2, 4e-3, 1e-2)}}}
    text = "\n".join(bench_engine._sampling(res) + bench_engine._banks(res))
    assert "| SLR | 200 | 4 / 2 | 1 / 1 | 4.0x | missed |" in text
    assert "| SLR | 200 | 1 / 1 | 1.25 / 5 | 1.25 / 20 | 3.2 | 13 | 4.0x | 16x | banked | target met |" in text
    assert "| ICL | 200 | 1 / 1 | 4 / 4 | 20 / 10 | 1 | 0.8 | 1.0x | 0.5x | one run a call | target met |" in text
    res["banks"] = {"ICL": {50: _banks(1e-3, 4e-3, 2e-2, 4e-3, 1e-2)}}
    assert "| 4 runs a call | missed |" in "\n".join(bench_engine._banks(res))
    assert bench_engine._sampling({}) == [] and bench_engine._banks({}) == []
    assert bench_engine.target_value(("draw vs step", 0.0036, 0.0003)) == "draw 3.6 ms vs step 0.3 ms (12x)"
    assert bench_engine.target_value(("bank", 0.0772, 0.5)) == "0.077 k, 0.5 k"


def test_the_measurements_run_at_a_tiny_size():
    """Both measurements on every sampled row (one repeat, d = 5: their times mean nothing), with the record's
    shape the page reads."""
    draws, banks = engine.sampling_and_banks((5,), engine.ROWS, 1, 0.001)
    assert set(draws) == set(banks) == {r for r, _, _ in engine.sampled_rows()}
    for row in draws:
        assert set(draws[row][5]) == {"draw", "step"} and set(banks[row][5]) == set(engine.BANK_RUNS)
        assert {k: set(x) for k, x in banks[row][5].items()} == {
            k: {"bank", "calls"} if k > 1 else {"bank"} for k in engine.BANK_RUNS}
        assert all(len(t) == 2 and t[1] > 0 for x in banks[row][5].values() for t in x.values())
