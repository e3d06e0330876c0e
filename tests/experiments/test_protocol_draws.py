"""Seed ids, tuning draws, bimodal rows and the long-budget reading of the Table 1 protocol."""
from __future__ import annotations

import pytest

from theory.validation import SettingError

from numerics.experiments import protocol
from numerics.experiments import runner
from numerics.experiments import tasks as tasks_module

# ------------------------------------------------------------------------------------------------
# seed ids


def test_default_seed_ids_are_todays():
    cfg = runner.Config().validate()
    assert (cfg.seed_base, cfg.tuning_seed_base) == (0, protocol.TUNING_SEED_BASE) == (0, 1000)
    row = runner.Row.of(runner.Config(tasks=("SLR",)), "SLR")
    assert runner.reported_seeds(row) == [0, 1, 2, 3, 4]
    assert runner.tuning_ids(row, 0) == [1000, 1001]


@pytest.mark.parametrize("fields", [
    {"seed_base": 1000},                                 # reported 1000..1009 on tuning 1000..1005
    {"seed_base": 996},                                  # the bimodal seeds 996..1005 reach the tuning ids
    {"tuning_seed_base": 9},                             # tuning 9..14 on the bimodal seeds 0..9
    {"tuning_seed_base": 0, "seed_base": 5},             # tuning 0..5 on reported 5..14
    {"seed_base": 994, "tuning_draws": 1, "bimodal_seeds": 2, "seeds": 7},  # reported 994..1000
])
def test_overlapping_seed_ids_are_refused(fields):
    with pytest.raises(SettingError, match="overlap"):
        runner.Config(**fields).validate()


@pytest.mark.parametrize("fields", [{"seed_base": 990}, {"tuning_seed_base": 10}, {"seed_base": 1006},
                                    {"tuning_seed_base": 0, "seed_base": 6},
                                    {"seed_base": 994, "tuning_draws": 1, "bimodal_seeds": 2, "seeds": 6}])
def test_adjacent_seed_ids_are_accepted(fields):
    runner.Config(**fields).validate()


@pytest.mark.parametrize("fields", [{"seed_base": -1}, {"tuning_seed_base": -1}, {"seed_base": 1.0},
                                    {"tuning_draws": 0}, {"bimodal_seeds": 0}])
def test_bad_seed_fields_are_refused(fields):
    with pytest.raises(SettingError):
        runner.Config(**fields).validate()


def test_overlapping_seed_flags_are_a_usage_error_before_any_work(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "app", "table1", "--quick", "--seed-base", "1000", "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "overlap" in r.stderr and "--seed-base" in r.stderr
    assert not out.exists()


def test_seed_flags_reach_the_configuration():
    import argparse

    from app.commands import table1

    sub = argparse.ArgumentParser().add_subparsers()
    parser = table1.add_parser(sub)
    args = parser.parse_args(["--quick", "--seed-base", "20", "--tuning-seed-base", "3", "--tuning-draws", "4"])
    cfg = table1.config_from_args(args)
    assert (cfg.seed_base, cfg.tuning_seed_base, cfg.tuning_draws) == (20, 3, 4)
    assert {k: cfg.to_dict()[k] for k in ("seed_base", "tuning_seed_base", "tuning_draws")} == \
        {"seed_base": 20, "tuning_seed_base": 3, "tuning_draws": 4}


def test_seed_ids_are_recorded_in_the_results(monkeypatch):
    monkeypatch.setattr(runner, "run_row", lambda row: {"name": row.name, "cpu_s": 0.0, "tuning_draws": [{}, {}]})
    cfg = runner.Config.quick(tasks=("even_pairs",), jobs=1, seed_base=7, tuning_seed_base=50)
    res = runner.run(cfg, quiet=True)
    assert (res["config"]["seed_base"], res["config"]["tuning_seed_base"], res["config"]["tuning_draws"]) == (7, 50, 3)
    assert len(res["tuning_draws"]) == 2 and all("even_pairs" in d["rows"] for d in res["tuning_draws"])
    assert "tuning_draws" not in res["rows"]["even_pairs"]


# ------------------------------------------------------------------------------------------------
# tuning draws


def test_tuning_draw_ids_are_disjoint_deterministic_and_used_by_the_search(monkeypatch):
    cfg = runner.Config.quick(tasks=("SLR", "occurrence"), tuning_seed_base=40, seed_base=3,
                              reading=protocol.quick_reading(protocol.Reading(name="q", tuning_seeds=3)))
    row = runner.Row.of(cfg, "SLR")
    ids = [runner.tuning_ids(row, j) for j in range(cfg.tuning_draws)]
    assert ids == [[40, 41, 42], [43, 44, 45], [46, 47, 48]]
    assert ids == [runner.tuning_ids(row, j) for j in range(cfg.tuning_draws)]
    flat = [s for d in ids for s in d]
    assert len(set(flat)) == len(flat) and not set(flat) & set(cfg.reported_range())
    assert runner.tuning_ids(runner.Row.of(cfg, "occurrence"), 2) == [46]

    class Seen(Exception):
        pass

    def record(r, seed):
        raise Seen(seed)

    monkeypatch.setattr(runner, "make_data", record)
    for j in range(3):
        with pytest.raises(Seen) as exc:
            runner.search(row, draw=j)
        assert exc.value.args[0] == ids[j][0]


def test_one_draw_is_todays_row_and_draw_zero_does_not_depend_on_the_draws():
    """tuning_draws = 1 gives the row that searching on the tuning seeds 1000.. and training the reported seeds
    0.. at the chosen steps gives (the protocol without draws), bit for bit; with two draws, draw 0 is that row
    again and draw 1 searched on the next tuning ids."""
    base = dict(tasks=("even_pairs",), seeds=2, jobs=1)
    reading = protocol.quick_reading(protocol.Reading(name="q")).with_(max_steps=60, phase2_cap=20)
    one = runner.Config.quick(**base, tuning_draws=1, reading=reading)
    row = runner.Row.of(one, "even_pairs")
    found = runner.search(row)
    found.pop("_steps")
    chosen = {p: found[p]["chosen"] for p in runner.PLANS}
    per_seed = [runner.report_seed(row, s, chosen) for s in (0, 1)]
    today = {p: [ps[p]["test_risk"] for ps in per_seed] for p in runner.PLANS}

    def risks(r):
        return {p: r["plans"][p]["risk"]["values"] for p in runner.PLANS}

    got = runner._run_row(row)
    assert got["tuning_draws"] == [] and risks(got) == today
    assert got["plans"]["joint"]["search"]["tuning_seeds"] == [1000, 1001]
    two = runner._run_row(runner.Row.of(runner.Config.quick(**base, tuning_draws=2, reading=reading), "even_pairs"))
    assert risks(two) == today
    assert two["tuning_draws"][0]["plans"]["joint"]["search"]["tuning_seeds"] == [1002, 1003]


def _stub_row(monkeypatch, chosen_by_draw, risk_of=lambda plan, seed: 0.1, seeds=5, **cfg_fields):
    """A sampled row whose search and training are stubs: draw j chooses ``chosen_by_draw[j]``; every training
    of a seed is logged as (seed, plans trained)."""
    log = []

    def search(row, plans=runner.PLANS, draw=0):
        out = {p: {"chosen": chosen_by_draw[draw][p], "tuning_seeds": runner.tuning_ids(row, draw),
                   "edge": []} for p in plans}
        return out | {"_steps": 1}

    def report_seed(row, seed, chosen):
        log.append((seed, tuple(sorted(chosen))))
        return {p: {"plan": p, "seed": seed, "test_risk": risk_of(p, seed), "test_acc": None, "steps": 10,
                    "diverged": False, "unstable": False, "capped": False, "converged": True,
                    "chosen_seen": dict(chosen[p])} for p in chosen}

    monkeypatch.setattr(runner, "search", search)
    monkeypatch.setattr(runner, "report_seed", report_seed)
    monkeypatch.setattr(runner, "ceiling_of", lambda row: {})
    cfg = runner.Config.quick(tasks=("SLR",), seeds=seeds, tuning_draws=len(chosen_by_draw), **cfg_fields)
    return runner.Row.of(cfg, "SLR"), log


A = {"three_phase": {"out": 1.0, "att": 8.0}, "joint": {"out": 2.0}, "output_only": {"out": 4.0},
     "attention_only": {"att": 16.0}}


def test_a_draw_that_picks_the_same_steps_trains_nothing_again(monkeypatch):
    b = {**A, "three_phase": {"out": 1.0, "att": 32.0}}
    row, log = _stub_row(monkeypatch, [A, b, dict(A)], seeds=3)
    out = runner._run_row(row)
    assert log == [(s, tuple(sorted(runner.PLANS))) for s in range(3)] + [(s, ("three_phase",)) for s in range(3)]
    assert [d["plans"]["three_phase"]["chosen"] for d in [out, *out["tuning_draws"]]] == [A["three_phase"],
                                                                                          b["three_phase"],
                                                                                          A["three_phase"]]
    assert [r["chosen_seen"] for r in out["tuning_draws"][0]["plans"]["three_phase"]["seeds"]] == [b["three_phase"]] * 3
    assert out["tuning_draw_chosen"] == [A, b, A]
    assert [d["tuning_draw"] for d in [out, *out["tuning_draws"]]] == [0, 1, 2]


def test_a_plan_no_draw_could_choose_is_not_trained(monkeypatch):
    none = {**A, "attention_only": None}
    row, log = _stub_row(monkeypatch, [none], seeds=2)
    out = runner._run_row(row)
    assert all("attention_only" not in plans for _, plans in log)
    assert out["plans"]["attention_only"]["seeds"] == []


# ------------------------------------------------------------------------------------------------
# bimodal rows


@pytest.mark.parametrize("risks,expected", [
    ([0.014, 0.212, 0.019, 0.245, 0.233], True),     # SLR three-phase at d = 25: two levels
    ([0.01, 0.0101, 0.2, 0.201, 0.202], True),
    ([0.01, 0.02, 0.04, 0.08, 0.16], False),         # spread evenly over a decade: no two levels
    ([0.100, 0.101, 0.102, 0.190, 0.191], False),    # gap a factor 1.86 < 2: one level
    ([0.100, 0.101, 0.102, 0.210, 0.211], True),     # gap a factor 2.06 >= 2
    ([0.01, 0.2], False),                            # two seeds are always two groups
    ([0.01, None, 0.2, float("nan")], False),        # diverged seeds are not a level
    ([0.01, 0.2, 0.2], True),
    # even pairs three-phase at d = 50: four seeds solved (risks 2e-7 to 2e-5), one at the 0.25 level; the
    # solved seeds' logarithms spread over two decades, which only the floor at 1e-3 x the largest removes
    ([0.2496, 6.27e-6, 2.20e-5, 2.26e-7, 2.29e-5], True),
    ([1e-4, 1e-3, 1e-2, 1e-1], False),                # evenly over three decades, all at or above the floor
])
def test_bimodal_rule_on_synthetic_risks(risks, expected):
    assert protocol.bimodal(risks) is expected


def test_the_bimodal_floor_is_what_groups_the_solved_seeds():
    solved_and_stuck = [0.2496, 6.27e-6, 2.20e-5, 2.26e-7, 2.29e-5]
    assert protocol.bimodal(solved_and_stuck) and not protocol.bimodal(solved_and_stuck, floor=0.0)


def test_bimodal_gap_is_compared_to_the_wider_groups_spread():
    """Gap 2 decades; the upper group's spread 0.6 decades (ratio 3.33 > 3) is bimodal, 0.7 (2.86 < 3) is not;
    at a threshold of 2 both are."""
    tight = [1e-3, 1e-3, 1e-1, 10 ** -0.7, 10 ** -0.4]
    wide = [1e-3, 1e-3, 1e-1, 10 ** -0.7, 10 ** -0.3]
    assert protocol.bimodal(tight) and not protocol.bimodal(wide)
    assert protocol.bimodal(wide, gap=2.0)


def test_a_bimodal_plan_gets_ten_seeds_for_every_plan(monkeypatch):
    def risk(plan, seed):
        return (0.01 if seed % 2 else 0.2) if plan == "three_phase" else 0.05 + 0.001 * seed

    row, log = _stub_row(monkeypatch, [A], risk_of=risk, seeds=5)
    out = runner._run_row(row)
    assert out["seeds_run"] == list(range(10)) and out["bimodal_extended"] == ["three_phase"]
    assert all([r["seed"] for r in out["plans"][p]["seeds"]] == list(range(10)) for p in runner.PLANS)
    assert out["plans"]["three_phase"]["bimodal"] and not out["plans"]["joint"]["bimodal"]
    assert sorted(s for s, _ in log) == list(range(10))   # the first five seeds are not trained again


def test_a_row_without_bimodal_plans_keeps_its_seeds(monkeypatch):
    row, log = _stub_row(monkeypatch, [A], risk_of=lambda p, s: 0.05 + 0.001 * s, seeds=5)
    out = runner._run_row(row)
    assert out["seeds_run"] == list(range(5)) and out["bimodal_extended"] == []
    assert not any(out["plans"][p]["bimodal"] for p in runner.PLANS)


def test_the_extension_starts_at_the_seed_base(monkeypatch):
    row, _ = _stub_row(monkeypatch, [A], risk_of=lambda p, s: 0.01 if s % 2 else 0.2, seeds=4, seed_base=20,
                       bimodal_seeds=6)
    assert runner._run_row(row)["seeds_run"] == list(range(20, 26))


# ------------------------------------------------------------------------------------------------
# the long-budget reading


def test_long_reading_is_the_primary_sources_convention_and_recorded():
    r = protocol.reading("long-adam").validate()
    assert (r.optimizer, r.step_rule, r.budget, r.max_steps) == ("adam", "fixed", "fixed", 10_000)
    cfg = runner.Config.build(reading="long-adam")
    assert cfg.to_dict()["reading"] == r.to_dict()
    assert protocol.quick_reading(r).max_steps == protocol.QUICK_BUDGET["max_steps"]


@pytest.mark.parametrize("fields", [{"step_rule": "grid"}, {"fixed_lr": 0.0}, {"fixed_lr": float("inf")}])
def test_bad_step_rules_are_refused(fields):
    with pytest.raises(SettingError):
        protocol.Reading(**fields).validate()


def test_fixed_step_rule_gives_every_plan_one_rate_without_training(monkeypatch):
    def no_training(*a, **k):
        raise AssertionError("the fixed step rule trains nothing")

    monkeypatch.setattr(runner, "_train", no_training)
    monkeypatch.setattr(runner, "make_data", no_training)
    reading = protocol.LONG_READING.with_(fixed_lr=3e-3, joint_steps="separate")
    row = runner.Row.of(runner.Config(tasks=("SLR",), reading=reading), "SLR")
    found = runner.search(row)
    assert found.pop("_steps") == 0
    assert {p: found[p]["chosen"] for p in runner.PLANS} == {
        "three_phase": {"out": 3e-3, "att": 3e-3}, "joint": {"out": 3e-3, "att": 3e-3},
        "output_only": {"out": 3e-3}, "attention_only": {"att": 3e-3}}
    assert all(found[p]["fixed"] and found[p]["tried"] == [] for p in runner.PLANS)


# ------------------------------------------------------------------------------------------------
# the readings grid


def test_shipped_grid_is_the_full_product_with_the_long_reading_at_every_d():
    from numerics.experiments import readings

    g = readings.load()
    assert not g.limits
    assert {**g.readings["long-adam"].to_dict(), "name": None} == {**protocol.LONG_READING.to_dict(), "name": None}
    cells = {(name, dd): tasks for name, dd, tasks in g.cells()}
    assert set(cells) == {(name, dd) for name in g.readings for dd in (25, 50, 100, 200)}
    assert all(set(tasks) == set(tasks_module.TASKS) for tasks in cells.values())
    default = {k: v for k, v in protocol.Reading().to_dict().items() if k != "name"}
    changed_alone = {tuple(sorted(f for f, v in r.to_dict().items() if f != "name" and v != default[f]))
                     for r in g.readings.values()}
    for f in ("joint_steps", "optimizer", "budget", "k2"):
        assert any(c and set(c) <= {f, "max_steps"} for c in changed_alone), f
    assert {r.optimizer for r in g.readings.values()} == {"gd", "momentum", "adam"}
    assert len(cells) == 4 * (3 * 2 * 3 * 2 + 1)


def test_named_readings_in_a_readings_file_join_the_product():
    from numerics.experiments import readings

    g = readings.parse({"sweep": {"d": [8]}, "base": {"max_steps": 40},
                        "axes": {"a": {"x": {}, "y": {"optimizer": "adam"}}},
                        "readings": {"long": {"step_rule": "fixed", "budget": "fixed"}}}, "t")
    assert list(g.readings) == ["x", "y", "long"]
    assert (g.readings["long"].step_rule, g.readings["long"].max_steps) == ("fixed", 40)
    for bad, words in (({"a/b": {}}, "'/'"), ({"l": {"k3": 1}}, "k3"), ({"l": {"fixed_lr": -1.0}}, "fixed_lr")):
        with pytest.raises(SettingError, match=words):
            readings.parse({"sweep": {"d": [8]}, "axes": {"a": {"x": {}}}, "readings": bad}, "t")


def test_a_readings_file_whose_seed_ids_overlap_is_refused_before_any_work():
    from numerics.experiments import readings

    with pytest.raises(SettingError, match="overlap"):
        readings.parse({"sweep": {"d": [8]}, "config": {"tuning_seed_base": 4},
                        "axes": {"a": {"x": {}}}}, "t")
    readings.parse({"sweep": {"d": [8]}, "config": {"tuning_seed_base": 10}, "axes": {"a": {"x": {}}}}, "t")
    with pytest.raises(SettingError, match="overlap"):   # reading y tunes on 10..45, over the reported 40..49
        readings.parse({"sweep": {"d": [8]}, "config": {"tuning_seed_base": 10, "seed_base": 40},
                        "axes": {"a": {"x": {}, "y": {"tuning_seeds": 12}}}}, "t")


# ------------------------------------------------------------------------------------------------
# tuning draws in the sweep's units


def _sweep_plan(**config):
    from numerics.experiments import readings
    from numerics.experiments import sweep

    g = readings.parse({"sweep": {"tasks": ["occurrence", "SLR"], "d": [8], "seeds": 2}, "config": config,
                        "base": {"max_steps": 40}, "axes": {"a": {"x": {}}}}, "t")
    return sweep.plan(g, version="1", code="0" * 16)


def test_the_tuning_draw_is_part_of_a_search_units_key_and_not_of_its_seeds():
    from numerics import units

    p = _sweep_plan(tuning_draws=3)
    slr = p.rows[("x", 8, "SLR")]["draws"]
    for plan in runner.PLANS:
        keys = [draw[plan] for draw in slr]
        assert len(set(keys)) == 3, plan                                   # each draw its own search
        assert [p.searches[k]["draw"] for k in keys] == [0, 1, 2]
        seeds = {units.key_of(p.seed_spec(k, 0, {"out": 1.0})) for k in keys}
        assert len(seeds) == 1, plan                                      # same steps: one seed unit
    occ = p.rows[("x", 8, "occurrence")]["draws"]
    assert all(len({draw[plan] for draw in occ}) == 1 for plan in runner.PLANS)   # exact: one search
    assert p.rows[("x", 8, "SLR")]["plans"] == slr[0]


def test_the_first_tuning_id_enters_the_search_keys_only():
    from numerics import units

    a, b = _sweep_plan(), _sweep_plan(tuning_seed_base=2000)
    for key, info in a.rows.items():
        assert info["ceiling"] == b.rows[key]["ceiling"]
        for plan in runner.PLANS:
            ka, kb = info["plans"][plan], b.rows[key]["plans"][plan]
            assert ka != kb
            assert units.key_of(a.seed_spec(ka, 0, {"out": 1.0})) == units.key_of(b.seed_spec(kb, 0, {"out": 1.0}))


def test_a_search_unit_tunes_on_its_draws_ids(monkeypatch):
    from numerics.experiments import sweep_units

    p = _sweep_plan(tuning_draws=2, tuning_seed_base=500)
    seen = []

    def search(row, plans, draw):
        seen.append(runner.tuning_ids(row, draw))
        return {plans[0]: {}, "_steps": 0}

    monkeypatch.setattr(runner, "search", search)
    for draw in p.rows[("x", 8, "SLR")]["draws"]:
        sweep_units.search(p.searches[draw["joint"]])
    assert seen == [[500, 501], [502, 503]]


def _stored_sweep(tmp_path, risk_of, draws=1):
    """A sweep of SLR at d = 8 (3 seeds) whose units are all in a store already: every search chooses rate 1,
    every seed unit up to seed 9 holds ``risk_of(plan, seed)``; executed with no cluster (nothing trains)."""
    from numerics import units
    from numerics.experiments import readings
    from numerics.experiments import sweep

    g = readings.parse({"sweep": {"tasks": ["SLR"], "d": [8], "seeds": 3}, "config": {"tuning_draws": draws},
                        "base": {"max_steps": 40}, "axes": {"a": {"x": {}}}}, "t")
    p = sweep.plan(g, version="1", code="0" * 16)
    store = units.Store(tmp_path / "store")
    for key, spec in p.ceilings.items():
        store.put(key, spec, {"result": {"ceiling": {}}, "cpu_s": 0.0, "wall_s": 0.0})
    for skey, spec in p.searches.items():
        chosen = {ax: 1.0 for ax in protocol.plan_axes(spec["plan"], g.readings["x"])}
        store.put(skey, spec, {"result": {"search": {"chosen": chosen, "edge": []}, "steps": 0}, "cpu_s": 0.0,
                               "wall_s": 0.0})
        for s in range(10):
            rec = {"plan": spec["plan"], "seed": s, "test_risk": risk_of(spec["plan"], s), "test_acc": None,
                   "steps": 10, "diverged": False, "unstable": False, "capped": False, "converged": True}
            sspec = p.seed_spec(skey, s, chosen)
            store.put(units.key_of(sspec), sspec, {"result": {"seed_result": rec, "data": {}}, "cpu_s": 0.0,
                                                   "wall_s": 0.0})
    outcome = sweep.execute(p, store, None)
    return sweep.cell_results(p, outcome, "x", 8)


def test_the_sweep_extends_a_bimodal_row_to_ten_seeds(tmp_path):
    res = _stored_sweep(tmp_path, lambda plan, s: (0.01 if s % 2 else 0.2) if plan == "joint" else 0.05 + s / 1e3)
    row = res["rows"]["SLR"]
    assert not res["missing_rows"] and row["seeds_run"] == list(range(10))
    assert row["bimodal_extended"] == ["joint"] and row["plans"]["joint"]["bimodal"]
    assert all([r["seed"] for r in row["plans"][p]["seeds"]] == list(range(10)) for p in runner.PLANS)


def test_the_sweep_keeps_the_seeds_of_a_row_that_is_not_bimodal(tmp_path):
    res = _stored_sweep(tmp_path, lambda plan, s: 0.05 + s / 1e3, draws=2)
    for row in (res["rows"]["SLR"], res["tuning_draws"][0]["rows"]["SLR"]):
        assert row["seeds_run"] == [0, 1, 2] and row["bimodal_extended"] == []
        assert all(len(row["plans"][p]["seeds"]) == 3 for p in runner.PLANS)
    assert res["tuning_draws"][0]["tuning_draw"] == 1


def test_sweep_seed_flags_are_checked_before_any_work_and_recorded(tmp_path):
    import subprocess
    import sys

    from numerics.experiments import readings

    (tmp_path / "r.toml").write_text('[sweep]\ntasks = ["occurrence"]\nd = [8]\n[axes.a]\nx = {}\n')
    for flags, code in ((["--tuning-seed-base", "3"], 2), (["--seed-base", "997"], 2),
                        (["--seed-base", "2000", "--tuning-seed-base", "5"], 0)):
        r = subprocess.run([sys.executable, "-m", "app", "sweep", "--readings", str(tmp_path / "r.toml"),
                            "--store", str(tmp_path / "store"), "--out", str(tmp_path / "out"), "--dry-run", *flags],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == code, (flags, r.stderr)
        assert ("overlap" in r.stderr) == (code == 2)
        assert not (tmp_path / "store").exists() and not (tmp_path / "out").exists()
    g = readings.with_config(readings.load(tmp_path / "r.toml"), {"seed_base": 2000, "tuning_seed_base": 5})
    cfg = g.run_config(8, g.tasks, "x")
    assert (cfg.seed_base, cfg.tuning_seed_base) == (2000, 5) and g.to_dict()["config"]["seed_base"] == 2000
