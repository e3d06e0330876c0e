"""`occ-companion scope`: the study registry, the command's checks before work, and the regime and laws
studies called in-process at small sizes."""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from numerics.scope import STUDIES
from numerics.scope import regime
ROOT = Path(__file__).resolve().parents[2]


def _cli(*args, cwd, timeout=600):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "app", "scope", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


# ------------------------------------------------------------------------------------------------
# study 1: the regime


@pytest.fixture(scope="module")
def regime_d10():
    cfg = {**regime.config(True), "d": [10]}
    return cfg, {name: regime.unit(args) for name, args in regime.units(cfg).items() if args["kind"] == "row"}


def test_regime_success_map_contains_the_theorems_region_at_d10(regime_d10):
    cfg, results = regime_d10
    per = regime.summarise(cfg, results)["per_d"]["10"]
    assert per["theorem_cells"] >= 3                      # the region is on the grid, so containment can fail
    assert per["contains_theorem_region"] and per["theorem_cells_failing"] == []
    # and the map is not all success: cells below eta2_min fail at eta_1 = eta1_max / 2
    half = next(r for r in per["rows"] if r["eta1_frac"] == 0.5)
    assert not all(half["succeeds"]) and any(half["succeeds"])


def test_regime_containment_fails_when_phase_3_is_too_short(regime_d10, monkeypatch):
    """The mutation the containment test must kill: a phase 3 far shorter than T_min reaches no target."""
    cfg, _ = regime_d10
    real = regime.reference

    def short(d, epsilon, tol):
        return {**real(d, epsilon, tol), "T": 1}

    monkeypatch.setattr(regime, "reference", short)
    rows = {n: regime.unit(a) for n, a in regime.units(cfg).items() if a["kind"] == "row" and a["eta1_frac"] == 0.5}
    per = regime.summarise(cfg, rows)["per_d"]["10"]
    assert not per["contains_theorem_region"] and per["theorem_cells_failing"]


def test_regime_smallest_eta2_is_where_the_risk_crosses_the_target(regime_d10):
    cfg, results = regime_d10
    row = next(r for r in results.values() if r["eta1_frac"] == 0.5)
    star, T = row["smallest_eta2"]["T"], row["reference"]["T"]
    eta_1, eps = row["eta_1"], cfg["epsilon"]
    above = regime._phase3(10, cfg["series_tol"], eta_1, star, 1.0, T)[0]
    below = regime._phase3(10, cfg["series_tol"], eta_1, star * (1 - 2 * cfg["bisection_rel"]), 1.0, T)[0]
    assert above <= eps < below


def test_regime_corner_certificates_agree_with_the_float_map():
    args = {**regime.units(regime.config(True))["certify d=10 eta1=0.5-0.9"]}
    out = regime.unit(args)
    assert out["cells"] and all(c["status"] != "undecided" for c in out["cells"])
    for cell in out["cells"]:                             # a certified corner never contradicts the float map
        for status, ok in zip(cell["corners"], cell["float_corners"]):
            assert status == ("PASS" if ok else "FAIL")
    assert {c["status"] for c in out["corners"]} == {"PASS", "FAIL"}


# ------------------------------------------------------------------------------------------------
# the command


def test_registry_names_the_five_studies_each_with_its_two_modules():
    import importlib

    assert STUDIES == ("regime", "kqv", "sgd", "laws", "samples")
    for name in STUDIES:
        comp, render = importlib.import_module(f"numerics.scope.{name}"), importlib.import_module(f"app.render.scope_studies.{name}")
        assert all(callable(getattr(comp, f)) for f in ("config", "units", "unit", "summarise"))
        assert callable(render.markdown) and callable(render.figure)


@pytest.mark.slow  # subprocesses
@pytest.mark.parametrize("args, words", [
    (["--studies", "nosuch"], "unknown study 'nosuch'"),
    (["--workers", "1", "--scheduler", "tcp://127.0.0.1:1"], "--workers"),
    (["--store", "file.txt", "--studies", "regime"], "--store"),
    (["--out", "file.txt", "--studies", "regime"], "--out"),
])
def test_bad_usage_is_refused_before_any_work(tmp_path, args, words):
    (tmp_path / "file.txt").write_text("x")
    r = _cli(*args, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert words in r.stderr
    assert not (tmp_path / "sweep-store" / "units").exists()


# ------------------------------------------------------------------------------------------------
# study 4: other length laws


@pytest.mark.parametrize("name", ["lomax", "poisson"])
def test_law_pmf_sums_to_one_within_its_stated_tail_and_the_sampler_follows_the_tail(name):
    import numpy as np

    from numerics.scope import laws
    law = laws.law_of(name, 10)[0]
    for N in (1, 5, 40, 1000):
        total = sum(law.pmf(n) for n in range(1, N + 1))
        assert abs(total + law.tail(N) - 1) <= 1e-12 * N
    n = law.sample(np.random.default_rng(3), 200_000)
    assert n.min() >= 1
    for N in (1, 5, 20, 60):
        share, p = float(np.mean(n > N)), law.tail(N)
        assert abs(share - p) <= 4 * np.sqrt(p * (1 - p) / len(n)) + 1e-12


def test_law_series_enumerates_the_mass_the_law_states():
    from numerics.scope import laws
    from numerics.theorem.series import SeriesEvaluator

    s = laws.setting_of("poisson", 10, "squared")
    ev = SeriesEvaluator(s, tol=1e-9)
    res = ev.evaluate_symmetric(0.0, 0.0, 0.0, 0.0)
    assert res.omitted_mass <= 1e-9 and abs(float(res.risk) - 0.5) <= 1e-9   # f = 0: every string loses 1/2


@pytest.mark.parametrize("name", ["geometric", "lomax", "poisson"])
def test_law_floors_agree_with_the_series_and_monte_carlo_and_are_balanced(name):
    from numerics.scope import laws
    args = laws.units(laws.config(True))[f"{name} squared d=10"]
    out = laws._floor(args)
    assert out["floor"] > 0.05
    assert abs(out["floor"] - out["floor_series"]) <= 1e-6 + out["floor_bound"] + out["floor_series_bound"]
    assert abs(out["floor_mc"] - out["floor"]) <= 4 * out["floor_mc_se"]
    se = (0.25 / args["mc_size"]) ** 0.5
    assert abs(out["p_absent_mc"] - 0.5) <= 4 * se                    # the balancing parameter balances


def test_geometric_floor_from_the_moments_is_the_papers_c_of_d():
    from numerics.theorem.closed_forms import ClosedForms
    from numerics.scope import laws
    from theory.setting import Setting

    dd, mm, P0, c, _, _ = laws.floor_expression()
    for d in (5, 10, 50):
        m = laws.law_of("geometric", d)[2]
        assert abs(float(c.subs({dd: d, mm: m, P0: 0.5})) - float(ClosedForms(Setting(d)).output_only_floor())) < 1e-12


def test_closed_forms_refuse_a_law_they_are_not_derived_for():
    from numerics.theorem.closed_forms import ClosedForms
    from numerics.theorem.evaluators import integral_applies
    from numerics.scope import laws
    from theory.validation import SettingError

    s = laws.setting_of("poisson", 10, "squared")
    with pytest.raises(SettingError, match="geometric length law"):
        ClosedForms(s)
    assert not integral_applies(s)


def test_docs_scope_page_is_generated_from_the_full_run():
    from app.render import scope as scope_docs
    assert scope_docs.main(["--check"]) == 0
    record = json.loads((ROOT / "docs" / "scope_full" / "scope.json").read_text())
    mods = {name: importlib.import_module(f"numerics.scope.{name}") for name in record["studies"]}
    # the page is the full size, every unit finished
    assert not record["quick"] and record["failed"] == 0
    assert record["units"] == sum(len(m.units(m.config(False))) for m in mods.values())
    for name, study in record["studies"].items():       # the full configuration is recorded per study
        assert study["config"] == json.loads(json.dumps(mods[name].config(record["quick"])))
        assert (ROOT / "docs" / "scope_full" / f"scope_{name}.png").exists()
