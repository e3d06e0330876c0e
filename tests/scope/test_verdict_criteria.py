"""The scope studies' own decision rules, on synthetic inputs whose answers are known: SGD and samples
"reached" (held-out risk + 3 standard errors <= epsilon), KQV "reached" (final risk + its error bound <=
epsilon), laws "floors positive" (floor - its bound > 0) and the Monte Carlo agreement (|z| <= 4), and the
regime study's theorem region (eta_1 < eta1_max, kappa > 0, eta_2 >= eta2_min) and its containment.

Each criterion gets a case clearly on each side, a case that only the right sign of its error term decides,
a case that only the error term's factor decides, and its edge (binary-exact numbers, so a point on the
threshold is on the side the criterion names): a flipped comparison, a dropped or rescaled error term or a
strict/non-strict swap fails a test.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from numerics.scope import kqv, laws, samples, sgd
from numerics.scope import regime as scope_regime

EPS = 2.0 ** -10
"""Target of the synthetic cases: binary-exact, so risk + 3 se lands on it exactly where meant."""

# (risk, standard error, reached?) for the criterion risk + 3 se <= EPS
THREE_SE_CASES = [
    (EPS / 4, 0.0, True),                      # clearly below
    (EPS * 2, 0.0, False),                     # clearly above
    (EPS / 2, EPS / 8, True),                  # below with its error term: 1/2 + 3/8 = 7/8 of EPS
    (EPS / 2, EPS / 5, False),                 # the error term decides: 1/2 + 3/5 > 1 (with 2 se: 9/10, below)
    (EPS / 2, EPS / 7, True),                  # the factor decides: 1/2 + 3/7 < 1 (with 4 se: 15/14, above)
    (EPS - 3 * 2.0 ** -14, 2.0 ** -14, True),  # on the edge exactly: reached (<=)
    (EPS - 3 * 2.0 ** -14 + 2.0 ** -40, 2.0 ** -14, False),  # just above the edge
    (EPS + 2.0 ** -14, 2.0 ** -14, False),     # above, though risk - 3 se is below: the sign of the term
]


# ------------------------------------------------------------------------------------------------ SGD


@pytest.fixture
def sgd_unit(monkeypatch):
    """sgd.unit with every plan's SGD run replaced by a run ending at a chosen (risk, se)."""
    ends = {}

    def run(setting, plan, batch, rng, test_counts, recorder):
        risk, se = ends[plan]
        return {"steps": [0, 5], "risk": [0.5, risk], "risk_se": [0.01, se], "diverged": False}

    monkeypatch.setattr(sgd, "plans_for", lambda setting, args, ev: ({p: p for p in kqv.PLANS}, {}))
    monkeypatch.setattr(sgd, "sgd_run", run)
    args = {**sgd.config(True), "d": 4, "epsilon": EPS, "test_size": 20, "max_points": 5}

    def call(risk, se):
        ends.update({p: (risk, se) for p in kqv.PLANS})
        return sgd.unit({**args, "batch": 4, "seed": 0, "plans": list(kqv.PLANS)})["plans"]

    return call


@pytest.mark.parametrize("risk,se,reached", THREE_SE_CASES)
def test_sgd_reached_is_held_out_risk_plus_three_standard_errors(sgd_unit, risk, se, reached):
    plans = sgd_unit(risk, se)
    for name in kqv.PLANS:
        assert plans[name]["reached"] is reached, (name, risk, se)
        assert plans[name]["final_risk"] == risk and plans[name]["final_se"] == se


def _sgd_results(cfg, run_of):
    """Synthetic results of sgd.units(cfg): ``run_of(batch, seed)`` gives every plan's run."""
    pop = {p: {"steps": [0, 1], "risk": [0.5, 1e-4], "final_risk": 1e-4, "risk_bound": 1e-12} for p in kqv.PLANS}
    out = {"population": {"regime": {}, "plans": pop}}
    for name, a in sgd.units(cfg).items():
        if a["batch"] is not None:
            out[name] = {"plans": {p: run_of(a["batch"], a["seed"]) for p in a["plans"]}}
    return out


def test_sgd_summary_counts_reached_runs_and_never_a_diverged_one():
    cfg = {**sgd.config(True), "batch": [4], "batch_scan": [1, 4, 16], "seeds": 4, "epsilon": EPS}

    def run(b, seed):
        if seed == 3:  # diverged runs carry no "reached"; one with reached set must not count either
            return {"diverged": True, "reached": True, "steps": [0], "risk": [0.5], "risk_se": [0.0]}
        ok = b >= 4 and seed < 2 or b == 16
        return {"diverged": False, "reached": ok, "final_risk": EPS / 2 if ok else EPS * 2, "steps": [0, 1],
                "risk": [0.5, EPS], "risk_se": [0.0, 0.0]}

    s = sgd.summarise(cfg, _sgd_results(cfg, run))
    row = next(r for r in s["table"] if r["plan"] == "three_phase" and r["batch"] == 4)
    assert row["reached"] == 2 and row["diverged"] == 1 and row["seeds"] == 4
    assert [x["reached"] for x in s["scan"]] == [0, 2, 3]
    # rate 0.9 of 4 seeds needs 4: never reached on this grid, so the smallest batch is censored above
    assert s["verdict"]["smallest_batch"]["b"] is None and s["verdict"]["smallest_batch"]["censored"] == "above"


# ------------------------------------------------------------------------------------------------ samples


@pytest.fixture
def samples_unit(monkeypatch):
    """samples.unit with the finite-sample plan replaced by seeds ending at chosen (risk, se)."""
    ends = []
    regime = SimpleNamespace(eta_1=0.5, eta_2=10.0, eta_3=1.0, T_min=3)
    monkeypatch.setattr(samples, "regime_plan", lambda *a, **k: regime)

    def finite(setting, eta_1, eta_2, eta_3, T, N1, N3, seed, test_size):
        risk, se = ends[seed]
        return SimpleNamespace(test_risk=risk, test_se=se)

    monkeypatch.setattr(samples, "three_phase_finite", finite)
    args = {**samples.config(True), "d": 5, "N": 9, "seeds": len(THREE_SE_CASES), "epsilon": EPS}

    def call(cases):
        ends[:] = [(r, s) for r, s, _ in cases]
        return samples.unit(args)

    return call


def test_samples_reached_is_held_out_risk_plus_three_standard_errors(samples_unit):
    out = samples_unit(THREE_SE_CASES)
    assert out["reached"] == [want for _, _, want in THREE_SE_CASES]
    assert out["test_risk"] == [r for r, _, _ in THREE_SE_CASES] and out["test_se"] == [s for _, s, _ in
                                                                                       THREE_SE_CASES]


# ------------------------------------------------------------------------------------------------ KQV

# (final risk, error bound, reached?) for the criterion final risk + bound <= EPS
BOUND_CASES = [
    (EPS / 4, 0.0, True),
    (EPS * 2, 0.0, False),
    (EPS / 2, EPS / 4, True),                  # 3/4 of EPS with its bound
    (EPS / 2, EPS * 3 / 4, False),             # the bound decides (without it: below)
    (EPS - 2.0 ** -14, 2.0 ** -14, True),      # on the edge: reached (<=)
    (EPS - 2.0 ** -14, 2.0 ** -14 + 2.0 ** -40, False),
    (EPS + 2.0 ** -14, 2.0 ** -13, False),     # risk - bound is below EPS: the sign of the bound
]


def _kqv_results(cfg, plan_of):
    """Synthetic results of kqv.units(cfg): ``plan_of(name, seed)`` gives each plan's record (no lag)."""
    return {name: {"regime": {}, "plans": {p: plan_of(p, a["seed"]) for p in kqv.PLANS}}
            for name, a in kqv.units(cfg).items()}


def _kqv_plan(risk, bound, diverged=False):
    if diverged:
        return {"diverged": True, "steps": [0], "risk": [0.5], "phase_ends": []}
    return {"diverged": False, "final_risk": risk, "risk_bound": bound, "floor_at_final_attention": 0.25,
            "steps": [0, 1], "risk": [0.5, risk], "phase_ends": []}


@pytest.mark.parametrize("risk,bound,reached", BOUND_CASES)
def test_kqv_reached_is_final_risk_plus_its_bound(risk, bound, reached):
    cfg = {**kqv.config(True), "d": 4, "epsilon": EPS, "m": [1], "scale": [0.5], "seeds": 2}
    s = kqv.summarise(cfg, _kqv_results(cfg, lambda p, seed: _kqv_plan(risk, bound)))
    row = s["table"][0]
    for p in kqv.PLANS:
        assert row["plans"][p]["reached"] == (2 if reached else 0), p
    v = s["verdict"]
    assert v["three_phase_reached"] == (2 if reached else 0)
    for p in ("output_only", "attention_then_output"):
        assert v["stall"][p]["reached"] == (2 if reached else 0) and v["stall"][p]["runs"] == 2


def test_kqv_a_diverged_run_is_never_reached():
    cfg = {**kqv.config(True), "d": 4, "epsilon": EPS, "m": [1], "scale": [0.5], "seeds": 2}
    s = kqv.summarise(cfg, _kqv_results(cfg, lambda p, seed: _kqv_plan(EPS / 4, 0.0, diverged=seed == 1)))
    row = s["table"][0]
    assert row["plans"]["three_phase"]["reached"] == 1 and row["plans"]["three_phase"]["diverged"] == 1
    v = s["verdict"]
    assert v["three_phase_reached"] == 1 and v["three_phase_diverged"] == 1
    assert v["stall"]["output_only"] == {**v["stall"]["output_only"], "runs": 1, "diverged": 1, "reached": 1}


# ------------------------------------------------------------------------------------------------ laws


def _laws_results(rows):
    """Synthetic laws results, one geometric squared unit per (floor, bound, mc, se, series) at d = 10, 20, ..."""
    out = {}
    for i, (floor, bound, mc, se, series) in enumerate(rows):
        out[f"geometric squared d={10 * (i + 1)}"] = {
            "floor": {"parameter": 0.1, "inverse_moment": 0.3, "inverse_moment_how": "closed form",
                      "floor": floor, "floor_bound": bound, "floor_series": series, "floor_mc": mc,
                      "floor_mc_se": se},
            "three_phase": {"reaches": True, "smallest_eta2": 2.0, "geometric_eta2_min": 4.0, "T": 10,
                            "risk_T_at_smallest": EPS}}
    return out


def _laws_verdict(rows):
    cfg = {**laws.config(True), "d": [10 * (i + 1) for i in range(len(rows))], "laws": ["geometric"], "epsilon": EPS}
    return laws.summarise(cfg, _laws_results(rows))["verdict"]


@pytest.mark.parametrize("floor,bound,positive", [
    (0.25, 0.0, True),
    (-0.25, 0.0, False),
    (0.25, 0.125, True),
    (0.125, 0.25, False),        # the bound decides (floor + bound, or the floor alone, would be positive)
    (0.125, 0.125, False),       # on the edge: not positive (strictly above 0 is required)
    (0.125, 0.125 - 2.0 ** -40, True),
])
def test_laws_floor_positive_is_the_floor_minus_its_bound(floor, bound, positive):
    assert _laws_verdict([(floor, bound, floor, 0.01, floor)])["floors_positive"] is positive


def test_laws_floors_positive_needs_every_row():
    good, bad = (0.25, 0.0, 0.25, 0.01, 0.25), (0.125, 0.25, 0.125, 0.01, 0.125)
    assert _laws_verdict([good, good])["floors_positive"] is True
    assert _laws_verdict([good, bad])["floors_positive"] is False


@pytest.mark.parametrize("mc,se,agree", [
    (0.25, 0.0625, True),
    (0.25 + 0.25, 0.0625, True),              # z = 4: on the edge, agrees (<=)
    (0.25 + 0.25 + 2.0 ** -40, 0.0625, False),
    (0.25 - 0.25, 0.0625, True),              # z = -4
    (0.25 - 0.3125, 0.0625, False),           # z = -5: the sign (|z|) decides
    (0.25 + 0.5, 0.0625, False),              # z = 8, though the raw difference 0.5 is below 4
    (0.25 + 0.5, 0.125, True),                # the same difference with twice the standard error: z = 4
    (0.25, 0.0, False),                       # no standard error: no z, no agreement
])
def test_laws_monte_carlo_agreement_is_a_z_score_within_four(mc, se, agree):
    assert _laws_verdict([(0.25, 0.0, mc, se, 0.25)])["mc_agree"] is agree


# ------------------------------------------------------------------------------------------------ regime

TARGET = 0.375
"""floor 0.25 + epsilon 0.125 of the synthetic regime rows."""


@pytest.fixture
def regime_rows(monkeypatch):
    """regime's units on a synthetic setting: eta1_max = 1, eta2_min(eta_1) = 1 (the grid's unit) where kappa > 0,
    the risk after T phase-3 steps TARGET / eta_2 + ``lift`` (on the target at eta_2 = 1 when lift = 0)."""
    state = {"kappa": 1.0, "lift": 0.0}
    cf = SimpleNamespace(kappa=lambda eta_1: state["kappa"], eta2_min=lambda eps, eta_1: 1.0)
    monkeypatch.setattr(scope_regime, "reference", lambda d, eps, tol: {
        "eta_1": 0.5, "eta1_max": 1.0, "eta2_min": 1.0, "T": 7, "floor": 0.25})
    monkeypatch.setattr(scope_regime, "_setting", lambda d, tol: (None, cf, None))

    def phase3(d, tol, eta_1, eta_2, eta_3, T):
        r_T = TARGET / eta_2 + state["lift"]
        return r_T, r_T / 2, eta_2

    monkeypatch.setattr(scope_regime, "_phase3", phase3)
    cfg = {**scope_regime.config(True), "d": [10], "epsilon": 0.125, "eta1_fracs": [0.5, 1.0],
           "eta2_factors": [0.5, 1.0, 2.0], "certify": {"cells_each_side": 1, "rows": [], "prec_bits": 64}}

    def call(**changes):
        state.update(changes)
        return cfg, {n: scope_regime.unit(a) for n, a in scope_regime.units(cfg).items()}

    return call


def test_regime_cells_succeed_on_and_below_the_target(regime_rows):
    _, results = regime_rows()
    row = results["row d=10 eta1=0.5"]
    # eta_2 = 0.5: risk 0.75 above; eta_2 = 1: on the target exactly (succeeds); eta_2 = 2: below
    assert [c["succeeds"] for c in row["cells"]] == [False, True, True]
    # the limit T -> inf at half that risk: 0.375 (on the target), 0.1875, 0.09375
    assert [c["succeeds_inf"] for c in row["cells"]] == [True, True, True]
    lifted = regime_rows(lift=2.0 ** -40)[1]["row d=10 eta1=0.5"]["cells"]
    assert [c["succeeds"] for c in lifted] == [False, False, True]
    assert [c["succeeds_inf"] for c in lifted] == [False, True, True]


def test_regime_theorem_region_is_below_eta1_max_with_positive_kappa_from_eta2_min_on(regime_rows):
    _, results = regime_rows()
    inside = results["row d=10 eta1=0.5"]
    assert inside["eta2_min"] == 1.0
    assert [c["theorem"] for c in inside["cells"]] == [False, True, True]  # eta_2 = eta2_min is inside
    edge = results["row d=10 eta1=1.0"]  # eta_1 = eta1_max: outside (the region is eta_1 < eta1_max)
    assert edge["eta2_min"] is None and not any(c["theorem"] for c in edge["cells"])
    for kappa in (0.0, -1.0):  # no attention progress: no region
        row = regime_rows(kappa=kappa)[1]["row d=10 eta1=0.5"]
        assert row["eta2_min"] is None and not any(c["theorem"] for c in row["cells"])


def test_regime_containment_holds_only_when_every_theorem_cell_succeeds(regime_rows):
    cfg, results = regime_rows()
    per = scope_regime.summarise(cfg, results)["per_d"]["10"]
    assert per["theorem_cells"] == 2 and per["contains_theorem_region"] is True
    assert per["theorem_cells_failing"] == []
    cfg, results = regime_rows(lift=2.0 ** -40)  # the cell on eta2_min now misses the target
    per = scope_regime.summarise(cfg, results)["per_d"]["10"]
    assert per["contains_theorem_region"] is False
    assert [(c["eta1_frac"], c["eta_2"]) for c in per["theorem_cells_failing"]] == [(0.5, 1.0)]
    cfg, results = regime_rows(kappa=0.0, lift=0.0)  # no theorem cell at all: nothing is contained
    per = scope_regime.summarise(cfg, results)["per_d"]["10"]
    assert per["theorem_cells"] == 0 and per["contains_theorem_region"] is False
