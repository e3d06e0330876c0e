"""The engine benchmark (numerics.bench_engine): its quick path runs, and its PyTorch implementation agrees
with the engine (and the agreement check fails when the two compute different things)."""
import numpy as np
import pytest

from numerics import bench_engine as BE
from numerics.experiments.runner import Config

torch = pytest.importorskip("torch")


def test_quick_benchmark_runs_and_writes_its_page(tmp_path):
    from app.cli import main

    out = tmp_path / "bench.md"
    assert main(["benchmark-engine", "--quick", "--out", str(out)]) == 0
    text = out.read_text()
    for row, _, _ in BE.ROWS:
        assert f"| {row} | 5 |" in text and f"| {row} | 8 |" in text
    assert "PyTorch is not installed" not in text
    assert "## Targets" in text


@pytest.mark.parametrize("row,task,heads", BE.ROWS)
def test_torch_model_agrees_with_the_engine_and_the_check_can_fail(row, task, heads):
    case = BE.make_case(row, task, heads, 7, Config())
    H, D, K = BE.TK.model_shape(task, 7, heads)
    tm = BE.TorchModel(case.batch, case.loss, heads, D, K)
    a, B = BE.initial(case, 1, seed=3)
    assert BE.check_agreement(case, tm, a[0], B[0]) <= BE.AGREE_TOL
    tm.w = tm.w * (1 + 1e-8)          # a different risk: the check must refuse to time it
    with pytest.raises(AssertionError, match="disagree"):
        BE.check_agreement(case, tm, a[0], B[0])


def test_torch_step_is_a_gradient_step():
    """One PyTorch step moves the parameters by -LR times the engine's gradient."""
    case = BE.make_case("ICL", "ICL", 1, 6, Config())
    H, D, K = BE.TK.model_shape("ICL", 6, 1)
    tm = BE.TorchModel(case.batch, case.loss, 1, D, K)
    a, B = BE.initial(case, 1, seed=4)
    a2, B2 = a.copy(), B.copy()
    BE.engine_step(a2, B2, case.tb, case.loss)
    _, ga, gB, _ = BE.E.risk_and_grad(a, B, case.tb, case.loss)
    assert np.abs(a2 - (a - BE.LR * ga)).max() == 0 and np.abs(B2 - (B - BE.LR * gB)).max() == 0
    step = tm.stepper(a[0], B[0])
    step()
    at, bt = (t.detach().numpy() for t in step.tensors)
    assert np.abs(at - a2[0]).max() <= 1e-12 * np.abs(a).max()
    assert np.abs(bt - B2[0]).max() <= 1e-12 * np.abs(B).max()


def test_fit_exponent():
    assert BE.fit_exponent([50, 100, 200], [3 * d ** 2 for d in (50, 100, 200)]) == pytest.approx(2, abs=1e-12)
    assert BE.fit_exponent([50], [1.0]) is None


@pytest.mark.parametrize("d", [6, 30])
def test_icl_prototype_agrees_with_the_engine_and_the_check_can_fail(d):
    """The benchmark-only prototype computes the engine's risk and gradients (to AGREE_TOL, other rounding),
    its step is a gradient step, and the agreement check refuses a prototype that computes something else."""
    case = BE.make_case("ICL", "ICL", 1, d, Config())
    proto = BE.IclPrototype.for_case(case)
    a, B = BE.initial(case, 1, seed=5)
    assert BE.check_prototype(case, proto, a[0], B[0]) <= BE.AGREE_TOL
    _, ga, gB = proto.risk_and_grad(a[0, 0], B[0, 0])
    a2, B2 = a[0, 0].copy(), B[0, 0].copy()
    proto.step(a2, B2)
    assert np.array_equal(a2, a[0, 0] - BE.LR * ga) and np.array_equal(B2, B[0, 0] - BE.LR * gB)
    proto.wcol = proto.wcol * (1 + 1e-8)          # a different risk: the check must refuse to time it
    with pytest.raises(AssertionError, match="disagree"):
        BE.check_prototype(case, proto, a[0], B[0])


def test_icl_prototype_applies_only_to_one_head_squared_icl():
    assert BE.IclPrototype.for_case(BE.make_case("SLR", "SLR", 1, 6, Config())) is None
    assert BE.IclPrototype.for_case(BE.make_case("AND (H=2)", "AND", 2, 6, Config())) is None
    assert BE.IclPrototype.for_case(BE.make_case("ICL", "ICL", 1, 6, Config(icl_loss="cross_entropy"))) is None


def test_line_times_reports_the_engine_functions_lines():
    """The line-by-line breakdown names lines of the listed engine functions only (a helper's time goes to
    its calling line), with shares of the traced total."""
    import inspect

    case = BE.make_case("ICL", "ICL", 1, 6, Config())
    a, B = BE.initial(case, 1)
    top = BE.line_times(lambda: BE.E.risk_and_grad(a, B, case.tb, case.loss), BE.E.__file__, steps=3, top=200)
    spans = {}
    for name in BE.LINE_FUNCTIONS + ("__call__",):
        fn = getattr(BE.E, name, None) or BE.E._CsrProduct.__call__
        src, start = inspect.getsourcelines(fn)
        spans[name] = range(start, start + len(src))
    assert any("np.exp(S, out=S)" in code for _, code, _, _ in top)
    assert all(any(ln in spans[n] for n in BE.LINE_FUNCTIONS) for ln, _, _, _ in top)
    assert not any(ln in spans["__call__"] for ln, _, _, _ in top)
    assert abs(sum(sh for _, _, _, sh in top) - 1) < 1e-9 and all(t >= 0 for _, _, t, _ in top)


def test_timed_runs_after_each_once_per_repeat_untimed():
    calls = []
    BE.timed(lambda: None, 3, min_seconds=1e-4, after_each=lambda: calls.append(1))
    assert len(calls) == 3


def test_flop_bound_uses_the_dgemm_rate_measured_beside_the_row():
    """The FLOP bound of a row is its FLOP count at the dgemm rate timed between the repeats of that row's
    own engine step (the machine's rate at that moment), not the rate measured once at the start."""
    res = BE.bench([6], repeats=3, rows=[("ICL", "ICL", 1)], use_torch=False, memory=False, min_seconds=1e-3,
                   gemm_n=128)
    x = res["rows"]["ICL"][6]
    assert x["dgemm_gflops_beside"] > 0
    assert x["flop_seconds"] == x["flops"] / (x["dgemm_gflops_beside"] * 1e9)
    assert x["dgemm_gflops_beside"] != res["dgemm_gflops_1thread"]


def test_fixed_cost_is_timed_at_a_tiny_d_and_compared_with_three_times_each_bound():
    """The ICL step's fixed cost (its calls, at d = FIXED_COST_D where there is nothing to compute) is set beside
    3x the FLOP bound of each ICL row, as a multiple of that bound."""
    res = BE.bench([6], repeats=3, rows=[("ICL", "ICL", 1)], use_torch=False, memory=False, min_seconds=1e-3,
                   gemm_n=128)
    fc = res["icl_fixed_cost"]
    assert fc["d"] == BE.FIXED_COST_D and 0 < fc["flops"] < res["rows"]["ICL"][6]["flops"]
    assert fc["time"][1] > 0
    # a result in which the fixed cost is 2.5 and 10 times the bound of two rows
    fake = {"icl_fixed_cost": {"d": 4, "flops": 2e4, "time": (1e-4, 1e-4)}, "dgemm_gflops_1thread": 40.0,
            "rows": {"ICL": {50: {"flop_seconds": 4e-5}, 200: {"flop_seconds": 1e-5}}}}
    text = BE.fixed_cost_text(fake)
    assert "d = 50: 3x the bound is 0.12 ms, the fixed cost alone 2.5x the bound" in text
    assert "d = 200: 3x the bound is 0.03 ms, the fixed cost alone 10.0x the bound" in text
    assert text.startswith("The ICL step's fixed cost: at d = 4 (2e+04 FLOPs, 0.5 us at the dgemm rate) one engine "
                           "step takes 0.1 ms CPU")
    assert BE.fixed_cost_text({"rows": {"ICL": {}}}) is None
