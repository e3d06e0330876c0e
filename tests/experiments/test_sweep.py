"""The readings sweep: readings files and their limits, unit projection, store keys that follow the code a
unit imports and every configuration field it uses, equality with table1's runner, the store (resume,
corruption, concurrent sweeps), the dask cluster (LocalCluster and --scheduler), failures and bad input,
--quick, the progress lines and the recorded command."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from numerics import units
from numerics.experiments import readings
from numerics.experiments import runner as runner_module
from numerics.experiments import sweep
from numerics.experiments import sweep_units
from tests import _servers
from theory.validation import SettingError

ROOT = Path(__file__).resolve().parents[2]
TINY = """
[sweep]
tasks = ["occurrence", "even_pairs"]
seeds = 2
d = [8]
[config]
val_size = 256
test_size = 256
lag_points = 60
tuning_draws = 2
[base]
max_steps = 40
eval_every = 10
patience = 3
phase2_cap = 20
tuning_seeds = 1
max_extensions = 1
[axes.schedule]
"k2=1" = { k2 = 1 }
"k2=plateau" = { k2 = "plateau" }
[axes.joint]
shared = { joint_steps = "shared" }
"""


def _cli(*args, cwd, timeout=300, **kw):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "app", "sweep", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, **kw)


def _tidy(folder: Path):
    import pandas as pd

    return pd.read_csv(folder / "tidy.csv")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One uninterrupted tiny sweep on a LocalCluster through the command line."""
    where = tmp_path_factory.mktemp("sweep_ref")
    (where / "tiny.toml").write_text(TINY)
    r = _cli("--readings", "tiny.toml", "--store", "store", "--out", "out", "--workers", "2", cwd=where)
    assert r.returncode == 0, r.stderr
    (where / "stderr.txt").write_text(r.stderr)
    return where


# ------------------------------------------------------------------------------------------------
# readings files


def test_shipped_readings_file_spans_the_protocols_axes():
    g = readings.load()
    assert len(g.readings) >= 24
    values = {f: {getattr(r, f) for r in g.readings.values()} for f in ("k2", "joint_steps", "optimizer", "budget")}
    assert 1 in values["k2"] and len(values["k2"] - {1}) >= 2          # theory's (1, 1) and two multi-step
    assert values["joint_steps"] == {"shared", "separate"}
    assert values["optimizer"] == {"gd", "momentum", "adam"}
    assert values["budget"] == {"plateau", "fixed"}
    assert g.default is not None and g.seeds >= 5 and {25, 50, 100, 200} <= set(g.d)
    assert all(r.k1 == 1 for r in g.readings.values() if r.k2 == 1)
    cells = g.cells()
    assert {d for _, d, _ in cells} == set(g.d)
    assert sum(1 for _, d, _ in cells if d == 25) == len(g.readings)   # the whole product at d = 25


@pytest.mark.parametrize("text, words", [
    ("[sweep]\nd = [8]\n", "axes"),
    ("[axes.a]\nx = { k3 = 1 }\n", "k3"),
    ("[axes.a]\nx = { k2 = 0 }\n", "k2"),
    ("[axes.a]\nx = {}\n[[limit]]\nd = [9]\n", "d = [9]"),
    ("[axes.a]\nx = {}\n[[limit]]\nd = [50]\nreadings = ['y']\n", "'y'"),
    ("[sweep]\ntasks = ['XOR']\n[axes.a]\nx = {}\n", "XOR"),
    ("[config]\nbatch = 0\n[axes.a]\nx = {}\n", "batch"),
    ("[config]\nd = 8\n[axes.a]\nx = {}\n", "d"),
    ("[axes.a\n", "not valid TOML"),
    ("[sweep]\nd = [8, 1000000]\n[axes.a]\nx = {}\n", "[sweep] d = 1000000 is above the largest, 400"),
    ("[sweep]\nd = [401]\n[axes.a]\nx = {}\n", "[sweep] d = 401 is above the largest, 400"),
    ("[sweep]\nseeds = 100000000\n[axes.a]\nx = {}\n", "seeds must be an integer in [1, 1000]"),
    ("[sweep]\nseeds = 1001\n[axes.a]\nx = {}\n", "seeds must be an integer in [1, 1000]"),
    ("[base]\nmax_steps = 1000001\n[axes.a]\nx = {}\n", "max_steps = 1000001 is above the largest, 1000000"),
    ("[axes.a]\nx = { phase2_cap = 1000001, max_steps = 1000000 }\n", "phase2_cap = 1000001 is above"),
    ("[axes.a]\nx = { tuning_seeds = 1001 }\n", "tuning_seeds = 1001 is above the largest, 1000"),
    ("".join(f"[axes.a{i}]\nx = {{}}\ny = {{}}\n" for i in range(10)), "1024 readings"),
])
def test_bad_readings_files_are_refused_naming_the_entry(tmp_path, text, words):
    f = tmp_path / "r.toml"
    f.write_text(text)
    with pytest.raises(SettingError, match=None) as exc:
        readings.load(f)
    assert words in str(exc.value) and str(f) in str(exc.value)


def test_readings_files_may_reach_the_limits_of_table1s_flags():
    """The bounds of a readings file are table1's: its largest --d, --seeds, --tuning-seeds and --max-steps
    (held equal here) are accepted, one more is refused (the parametrised cases above)."""
    from app.commands import table1

    assert (readings.MAX_D, readings.MAX_SEEDS, readings.MAX_STEPS) == (table1.MAX_D, table1.MAX_SEEDS, table1.MAX_STEPS)
    g = readings.parse({"sweep": {"d": [8, readings.MAX_D], "seeds": readings.MAX_SEEDS},
                  "base": {"max_steps": readings.MAX_STEPS, "phase2_cap": readings.MAX_STEPS, "tuning_seeds": readings.MAX_SEEDS},
                  "axes": {f"a{i}": {"x": {}, "y": {}} for i in range(9)} | {"b": {"x": {}}}})
    assert g.d == (8, readings.MAX_D) and g.seeds == readings.MAX_SEEDS and len(g.readings) == 512


def test_survey_counts_the_seed_tasks(tmp_path):
    """TINY: two readings differing only in the three-phase schedule, rows occurrence (exact: seed 0 alone)
    and even pairs (2 seeds); per row 2 three-phase searches and one each of the three other plans, on each of
    two tuning draws for even pairs (occurrence's search is the same on every draw)."""
    g = readings.parse(__import__("tomllib").loads(TINY), "tiny", TINY)
    n = sweep.survey(g, units.Store(tmp_path / "store"))
    assert (n["searches"], n["ceilings"], n["seeds"]) == (5 + 2 * 5, 2, 5 * 1 + 2 * 5 * 2)
    big = readings.parse(__import__("tomllib").loads(TINY.replace("seeds = 2", "seeds = 1000")), "big", TINY)
    assert sweep.survey(big, units.Store(tmp_path / "store"))["seeds"] == 5 + 2 * 5 * 1000


def test_survey_estimates_what_is_left_from_the_stored_units_of_the_same_class(tmp_path):
    """The CPU left is each missing unit's class mean (kind, task, heads, plan, d, and the budget fields) over
    the stored units of this code and version, the coarser class's where the finer has none, and none where
    neither has; a stored search's seeds are looked up and counted once each, an unstored one's counted as its
    reported seeds, a search that diverged has none; an unparsable store file is skipped."""
    g = readings.parse(__import__("tomllib").loads(TINY.replace("d = [8]", "d = [8, 9]")), "tiny", TINY)
    store = units.Store(tmp_path / "store")
    p = sweep.plan(g)
    joint = {(s["config"]["d"], s["draw"]): (k, s) for k, s in p.searches.items()
             if s["task"] == "even_pairs" and s["plan"] == "joint"}
    assert sorted(joint) == [(8, 0), (8, 1), (9, 0), (9, 1)]  # two tuning draws at each d

    def put(spec, result, cpu):
        store.put(units.key_of(spec), spec, {"result": result, "cpu_s": cpu, "wall_s": cpu})

    (k0, s0), (k1, s1) = joint[(8, 0)], joint[(8, 1)]
    put(s0, {"search": {"chosen": {"out": 0.5}}}, 20.0)
    put(s1, {"search": {"chosen": {"out": 0.5}}}, 40.0)  # the same step sizes: the two draws share seed units
    seeds = [p.seed_spec(k0, s, {"out": 0.5}) for s in p.seeds(k0)]
    assert seeds == [p.seed_spec(k1, s, {"out": 0.5}) for s in p.seeds(k1)]
    put(seeds[0], {}, 4.0)
    (k9, s9) = joint[(9, 0)]
    put(s9, {"search": {"chosen": None}}, 60.0)  # diverged at d = 9: no seeds to run
    put({**s9, "heads": s9["heads"] + 1}, {"search": {"chosen": None}}, 1000.0)  # other heads: another class
    put({**s9, "code": "other-code"}, {"search": {"chosen": None}}, 900.0)  # another code: not in any mean
    put({**s9, "version": "0.0.1"}, {"search": {"chosen": None}}, 900.0)    # another version: neither
    put({**seeds[0], "seed": 99}, {}, 8.0)  # a second seed unit of the class: its mean is (4 + 8) / 2
    (tmp_path / "store" / "units" / "zz").mkdir()
    (tmp_path / "store" / "units" / "zz" / "broken.json").write_text("{not json")
    n = sweep.survey(g, store)
    assert n["stored"] == 3
    assert n["to_train"]["searches"] == n["searches"] - 3 and n["to_train"]["ceilings"] == 4
    # seeds: the stored searches' shared one left (once), and every unstored search's reported seeds (2 each)
    assert n["to_train"]["seeds"] == 1 + (n["seeds"] - 3 * 2)
    # estimated: that seed at d = 8's seed mean (6 s), and d = 9's other joint search at d = 9's mean (60 s;
    # d = 8's, (20 + 40) / 2, and the two-head one are other classes); its two seeds have none of theirs stored
    assert n["estimate_cpu_s"] == pytest.approx(6.0 + 60.0) and n["coarse"] == 0
    assert n["unestimated"] == sum(n["to_train"].values()) - 2


def test_the_estimate_falls_back_to_the_coarser_class_and_the_dry_run_says_so(tmp_path):
    """A unit under another optimizer or budget is estimated from those of its kind, task, heads, plan and d,
    and the dry run's line counts it apart; with nothing to train or nothing estimable it says so."""
    from app.commands import sweep as sweep_command

    g = readings.parse(__import__("tomllib").loads(TINY), "tiny", TINY)
    p = sweep.plan(g)
    store = units.Store(tmp_path / "store")
    (k, s) = next((k, s) for k, s in p.searches.items() if s["task"] == "even_pairs" and s["plan"] == "joint"
                  and s["draw"] == 0)
    other = {**s, "reading": {**s["reading"], "optimizer": "adam"}}
    store.put(units.key_of(other), other, {"result": {"search": {"chosen": None}}, "cpu_s": 10.0, "wall_s": 1.0})
    n = sweep.survey(g, store)
    assert n["stored"] == 0 and n["coarse"] == 2 and n["estimate_cpu_s"] == pytest.approx(20.0)
    line = sweep_command.left_line(n)
    assert "h of CPU for 2 of them" in line and "(2 from those of the same d under another optimizer or budget)" in line
    assert f"; {n['unestimated']} not estimated" in line
    assert sweep_command.left_line({**n, "unestimated": sum(n["to_train"].values())}).endswith(
        "no estimate of their CPU (no stored unit of their kind, task, heads, plan and d, nor of their class at two "
        "smaller d)")
    assert sweep_command.left_line({**n, "extrapolated": 3, "extrapolated_cpu_s": 5 * 3600.0}).count(
        "; roughly 5 h for 3 more, extrapolated") == 1
    done = {"to_train": {"searches": 0, "ceilings": 0, "seeds": 0}, "estimate_cpu_s": 0.0, "coarse": 0, "unestimated": 0}
    assert sweep_command.left_line(done).endswith("; nothing left")


def test_growth_in_d_is_the_power_law_through_the_two_largest_smaller_d():
    assert sweep.growth_in_d({10: 1.0, 20: 4.0, 40: 8.0}, 80) == pytest.approx(16.0)     # through 20 and 40
    assert sweep.growth_in_d({10: 1.0, 20: 4.0, 400: 1.0}, 40) == pytest.approx(16.0)    # none above d used
    assert sweep.growth_in_d({20: 3.0, 40: 3.0}, 80) == pytest.approx(3.0)
    assert sweep.growth_in_d({20: 4.0, 40: 2.0}, 80) == pytest.approx(2.0)               # no shrinking with d
    assert sweep.growth_in_d({20: 3.0}, 80) is None and sweep.growth_in_d({20: 0.0, 40: 1.0}, 80) is None


def test_a_class_with_nothing_stored_at_its_d_is_extrapolated_from_smaller_d(tmp_path):
    """A search with no unit of its class stored at its d is estimated from its class at the two largest
    smaller d, the finer class (same optimizer and budget) before the coarser, and a coarser class stored at
    its own d before either; the dry run's line says the measured and the extrapolated hours apart."""
    from app.commands import sweep as sweep_command

    g = readings.parse(__import__("tomllib").loads(TINY.replace("d = [8]", "d = [8, 16, 32]")), "tiny", TINY)
    p = sweep.plan(g)
    store = units.Store(tmp_path / "store")
    joint = {}
    for s in p.searches.values():
        if s["task"] == "even_pairs" and s["plan"] == "joint":
            joint.setdefault(s["config"]["d"], []).append(s)
    assert [len(joint[d]) for d in (8, 16, 32)] == [2, 2, 2]   # two tuning draws at each d

    def put(spec, cpu):
        store.put(units.key_of(spec), spec, {"result": {"search": {"chosen": None}}, "cpu_s": cpu, "wall_s": cpu})

    for d, cpu in ((8, 2.0), (16, 6.0)):
        for spec in joint[d]:
            put(spec, cpu)
            put({**spec, "reading": {**spec["reading"], "optimizer": "adam"}, "draw": 7}, 10 * cpu)  # coarse only
    n = sweep.survey(g, store, d=(32,))
    # d = 32's two joint searches at 6 * (32 / 16) ** log2(3) = 18 s each (the coarse class would give 180 s)
    assert n["extrapolated"] == 2 and n["coarse"] == 0 and n["extrapolated_cpu_s"] == pytest.approx(2 * 18.0)
    assert n["estimate_cpu_s"] == 0 and n["unestimated"] == sum(n["to_train"].values()) - 2
    line = sweep_command.left_line(n)
    assert "; roughly 0.01 h for 2, extrapolated from their class at the two largest smaller d stored" in line
    assert "h of CPU for" not in line
    # a unit of the coarser class at d = 32 itself comes before any extrapolation
    put({**joint[32][0], "reading": {**joint[32][0]["reading"], "optimizer": "adam"}, "draw": 7}, 50.0)
    n = sweep.survey(g, store, d=(32,))
    assert n["coarse"] == 2 and n["extrapolated"] == 0 and n["estimate_cpu_s"] == pytest.approx(2 * 50.0)


@pytest.mark.slow  # subprocesses
def test_a_readings_file_beyond_the_limits_is_refused_before_any_work(tmp_path):
    (tmp_path / "big.toml").write_text(TINY.replace("d = [8]", "d = [1000000]"))
    (tmp_path / "tiny.toml").write_text(TINY)
    for extra in ([], ["--dry-run"]):
        r = _cli("--readings", "big.toml", "--store", "store", "--out", "out", *extra, cwd=tmp_path, timeout=60)
        assert r.returncode == 2 and "d = 1000000 is above the largest, 400" in r.stderr, r.stderr
        assert not (tmp_path / "store").exists() and not (tmp_path / "out").exists()
    r = _cli("--readings", "tiny.toml", "--store", "store", "--dry-run", cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    assert ("15 step-size searches (0 of the searches and ceilings stored), 2 capacity ceilings, 25 seed tasks "
            "(one per reported seed of each search): 42 tasks in all") in r.stdout
    assert ("to train: 15 searches, 2 ceilings and about 25 seed tasks; no estimate of their CPU (no stored unit "
            "of their kind, task, heads, plan and d, nor of their class at two smaller d)") in r.stdout


# ------------------------------------------------------------------------------------------------
# units


def test_projection_shares_exactly_the_units_a_plan_does_not_depend_on():
    g = readings.load()
    p = sweep.plan(g)
    by = {}
    for (reading, d, row), info in p.rows.items():
        if d == 25 and row == "OR":
            by[reading] = info["plans"]
    base = "k2=plateau/shared/gd/plateau"
    for other, same, differ in [
        ("k2=1/shared/gd/plateau", ("joint", "output_only", "attention_only"), ("three_phase",)),
        ("k2=plateau/separate/gd/plateau", ("three_phase", "output_only", "attention_only"), ("joint",)),
        ("k2=plateau/shared/adam/plateau", (), ("three_phase", "joint", "output_only", "attention_only")),
        ("k2=plateau/shared/gd/fixed", (), ("three_phase", "joint", "output_only", "attention_only")),
    ]:
        for plan in same:
            assert by[base][plan] == by[other][plan], (other, plan)
        for plan in differ:
            assert by[base][plan] != by[other][plan], (other, plan)
    # the product's 36 readings need 18 three-phase, 12 joint and 6 each of output-only and attention-only
    # searches per row; the named long reading shares none of them
    per_row = {}
    for (reading, d, row), info in p.rows.items():
        if d == 25 and row == "OR" and "/" in reading:
            for plan, k in info["plans"].items():
                per_row.setdefault(plan, set()).add(k)
    assert {k: len(v) for k, v in per_row.items()} == {"three_phase": 18, "joint": 12, "output_only": 6,
                                                      "attention_only": 6}
    assert not any(by["long-adam"][plan] in keys for plan, keys in per_row.items())


def test_key_covers_the_version_and_the_configuration():
    g = readings.load()
    a, b = sweep.plan(g, version="1"), sweep.plan(g, version="2")
    assert set(a.searches).isdisjoint(b.searches)
    c = sweep.plan(g, version="1", code="0" * 16)              # same version, other code: nothing shared
    assert set(a.searches).isdisjoint(c.searches) and set(a.ceilings).isdisjoint(c.ceilings)
    assert units.key_of(units.call_spec("m:f", {}, "1", code="1" * 16)) != \
        units.key_of(units.call_spec("m:f", {}, "1", code="0" * 16))
    spec = next(iter(a.searches.values()))
    assert units.key_of({**spec, "config": {**spec["config"], "batch": 65}}) != units.key_of(spec)


def _changed(value, name: str, choices: dict):
    """Another valid value of a configuration or reading field: a choice swapped for another, an integer plus
    one, a float halved (every float field is positive, and the bounded ones stay inside their bounds)."""
    if name in choices:
        return next(c for c in choices[name] if c != value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AssertionError(f"no perturbation for field {name} = {value!r}: add its choices to the test")
    return value + 1 if isinstance(value, int) else value / 2


def _unit_keys(grid) -> dict:
    """Every unit key of the grid's plan by (reading, d, row, unit): each plan's search, a seed unit of it
    (seed 0 at a fixed chosen step) and the row's ceiling."""
    p = sweep.plan(grid, version="1", code="0" * 16)
    out = {}
    for (reading, d, row), info in p.rows.items():
        out[(reading, d, row, "ceiling")] = info["ceiling"]
        for plan, skey in info["plans"].items():
            out[(reading, d, row, plan)] = skey
            out[(reading, d, row, plan, "seed")] = units.key_of(p.seed_spec(skey, 0, {"out": 1.0, "att": 1.0}))
    return out


ALL_TASKS = {"sweep": {"tasks": list(runner_module.tasks_module.TASKS), "seeds": 2, "d": [8]}}
SMALL = {"max_steps": 40, "eval_every": 10, "patience": 3, "phase2_cap": 20}


def test_every_run_configuration_field_is_in_every_units_key():
    """Each field of runner.Config changed alone (to another valid value) changes the key of every unit of
    every row (searches, seeds, ceilings), except the fields ``sweep_units.CONFIG_FIELDS_OUT`` documents as
    not in a unit's spec: the unit names its own row (task, heads), seed and reading, and jobs is how many
    processes run, not what they compute; the seed ids and draws are named by the units themselves
    (test_protocol_draws).  A field added to runner.Config is taken in by the loop."""
    from dataclasses import fields

    choices = {"icl_loss": runner_module.ICL_LOSSES,
               "even_pairs_embedding": runner_module.tasks_module.EVEN_PAIRS_EMBEDDINGS,
               "attention_only_readout": runner_module.ATTENTION_ONLY_READOUTS,
               "length_multiples": ((1, 2, 5, 10, 20), (1, 2, 4)),
               "kernel": runner_module.engine.KERNELS, "and_heads_data": runner_module.AND_HEADS_DATA}
    base = readings.parse({**ALL_TASKS, "base": SMALL, "axes": {"a": {"x": {}}}}, "t")
    keys = _unit_keys(base)
    assert {k[2] for k in keys} == {"occurrence", "OR", "AND (H=2)", "AND (H=1)", "ICL", "SLR", "even_pairs"}
    checked = []
    for f in fields(runner_module.Config):
        if f.name in sweep_units.CONFIG_FIELDS_OUT:
            continue
        if f.name == "d":
            changed = {(r, 8, row, *u): k for (r, _, row, *u), k in _unit_keys(replace(base, d=(9,))).items()}
        else:
            value = getattr(base.run_config(8, base.tasks), f.name)
            other = replace(base, config={**base.config, f.name: _changed(value, f.name, choices)})
            other.run_config(8, other.tasks).validate()
            changed = _unit_keys(other)
        assert changed.keys() == keys.keys(), f.name
        same = [u for u in keys if changed[u] == keys[u]]
        assert not same, (f.name, same[:3])
        checked.append(f.name)
    assert set(sweep_units.CONFIG_FIELDS_OUT) == {"tasks", "seeds", "and_heads", "jobs", "reading", "seed_base",
                                                  "tuning_seed_base", "tuning_draws", "bimodal_seeds"}
    assert set(checked) | set(sweep_units.CONFIG_FIELDS_OUT) == {f.name for f in fields(runner_module.Config)}


@pytest.mark.parametrize("optimizer", ["gd", "momentum", "adam"])
def test_every_reading_field_a_plan_uses_is_in_its_units_keys(optimizer):
    """Each field of protocol.Reading changed alone, under each optimizer, changes the key of every unit of
    each plan whose training reads it, and of no other: a plan ignores exactly the fields
    ``sweep_units.PROJECTED`` lists for it and the constants of the optimizers not chosen (the momentum
    constant counts under the momentum optimizer alone), the ceilings ignore the reading (a row's capacity
    depends on neither reading nor seed), and the name enters no key."""
    from dataclasses import fields

    from numerics.experiments import protocol

    choices = {"k2": ("plateau", 3), "budget": protocol.BUDGETS, "joint_steps": protocol.JOINT_STEPS,
               "optimizer": protocol.OPTIMIZERS, "step_rule": protocol.STEP_RULES, "name": ("x", "y")}
    constants = {"momentum": ("momentum",), "adam": ("adam_beta1", "adam_beta2", "adam_eps")}
    base = protocol.Reading(optimizer=optimizer, **SMALL)
    for f in fields(protocol.Reading):
        other = replace(base, **{f.name: _changed(getattr(base, f.name), f.name, choices)}).validate()
        values = {n: {g.name: getattr(r, g.name) for g in fields(protocol.Reading) if g.name != "name"}
                  for n, r in (("base", base), ("other", other))}
        keys = _unit_keys(readings.parse({**ALL_TASKS, "axes": {"a": values}}, "t"))
        for (reading, d, row, *unit), key in keys.items():
            if reading != "other":
                continue
            plan = unit[0]
            ignored = (plan == "ceiling" or f.name == "name" or f.name in sweep_units.PROJECTED[plan]
                       or any(f.name in names for opt, names in constants.items() if opt != optimizer)
                       or (f.name == "fixed_lr" and base.step_rule != "fixed"))
            assert (key == keys[("base", d, row, *unit)]) == ignored, (f.name, row, unit)



# ------------------------------------------------------------------------------------------------
# the sweep on a cluster


@pytest.mark.slow  # the reference sweep on a dask cluster
def test_tiny_sweep_equals_table1s_runner_and_exports_a_tidy_table(reference):
    """Each cell of the sweep (units trained per plan, shared between readings) equals runner.run of the same
    reading (all plans trained together): same chosen step sizes, risks equal to rounding."""
    import pandas as pd

    out = reference / "out"
    tidy = _tidy(out)
    pd.testing.assert_frame_equal(tidy, pd.read_parquet(out / "tidy.parquet"), check_dtype=False)
    summary = json.loads((out / "sweep.json").read_text())
    assert summary["readings_file"]["text"] == TINY and summary["counts"]["failed"] == 0
    assert {k: summary["run_config"][k] for k in sweep.SEED_FIELDS} == {
        "seed_base": 0, "tuning_seed_base": 1000, "tuning_draws": 2, "bimodal_seeds": 10}
    g = readings.parse(__import__("tomllib").loads(TINY), "tiny", TINY)
    # one record per (reading, row, plan, seed, d): occurrence is exact (seed 0 only), even pairs has 2 seeds
    assert len(tidy) == len(g.readings) * 4 * (1 + 2)
    assert not tidy.duplicated(["reading", "d", "row", "plan", "seed"]).any()
    from threadpoolctl import threadpool_limits
    for name in g.readings:
        cfg = replace(g.run_config(8, g.tasks, name), jobs=1)
        with threadpool_limits(1):
            ref = runner_module.run(cfg, quiet=True)
        for row_name, row in ref["rows"].items():
            for plan, pr in row["plans"].items():
                got = tidy[(tidy.reading == name) & (tidy.row == row_name) & (tidy.plan == plan)].sort_values("seed")
                assert list(got.lr_out.fillna(0)) == pytest.approx([(pr["chosen"] or {}).get("out", 0)] * len(got),
                                                                   rel=1e-12)
                want = [r["test_risk"] for r in pr["seeds"]]
                assert list(got.test_risk) == pytest.approx(want, rel=1e-9, abs=1e-15)


def _start(where: Path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "app", "sweep", "--readings", "tiny.toml", "--store", "store",
                             "--out", "out", "--workers", "2"], cwd=where, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _wait_for_units(store: units.Store, proc, n: int) -> None:
    deadline = time.time() + 240
    while len(store.keys()) < n and proc.poll() is None and time.time() < deadline:
        time.sleep(0.1)


def _interrupt_then_kill(where: Path):
    """Ctrl-C a sweep after 4 stored units, then SIGKILL a second one after 4 more. Returns (the keys stored
    after each), or None when either run finished before its signal reached it (a race a loaded machine can
    lose: the driver may store its units in a burst just before it ends), so the caller tries again."""
    (where / "tiny.toml").write_text(TINY)
    store = units.Store(where / "store")
    proc = _start(where)
    _wait_for_units(store, proc, 4)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    if proc.returncode == 0 and (where / "out" / "sweep.json").exists():
        return None
    assert proc.returncode == 130 and "interrupted; every finished task is kept" in err and "Traceback" not in err
    first = set(store.keys())
    proc = _start(where)
    _wait_for_units(store, proc, len(first) + 4)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    # the second run got as far as its summary, or as its record in the store's log (which comes first),
    # before the SIGKILL: it was not killed in flight
    if (where / "out" / "sweep.json").exists() or sum(r.get("event") == "end" for r in store.runs()) > 1:
        return None
    return first, set(store.keys())


@pytest.mark.slow  # dask clusters
def test_sweep_interrupted_then_killed_resumes_training_only_what_was_missing(reference, tmp_path):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) stops cleanly with status 130 and
    keeps every finished unit; a SIGKILL later loses only the units in flight; the resumed sweep trains only
    what is missing and gives the same tidy table as an uninterrupted one.  A run that ends before its signal
    arrives is tried again in a fresh folder, three times at most (a sweep that ignored Ctrl-C would end with
    status 0 every time, and fail)."""
    for attempt in range(3):
        where = tmp_path / f"attempt{attempt}"
        where.mkdir()
        stored = _interrupt_then_kill(where)
        if stored is not None:
            break
    assert stored is not None, "each of three sweeps ended before its signal"
    first, kept = stored
    tmp_path = where
    assert 4 <= len(first) < len(kept)
    r = _cli("--readings", "tiny.toml", "--store", "store", "--out", "out", "--workers", "2", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "out" / "sweep.json").read_text())
    ref_counts = json.loads((reference / "out" / "sweep.json").read_text())["counts"]
    assert summary["counts"]["reused"] == len(kept) < ref_counts["trained"]
    assert summary["counts"]["trained"] + summary["counts"]["reused"] == ref_counts["trained"]
    # the Ctrl-C'd run recorded its end; the SIGKILLed run only its start (listed, without a wall time)
    assert [(r["completed"], r["wall_s"] is None) for r in summary["runs"]] == [(False, False), (False, True),
                                                                                 (True, False)]
    assert _tidy(tmp_path / "out").equals(_tidy(reference / "out"))


@pytest.mark.slow  # dask clusters
def test_corrupt_store_entries_are_retrained_not_used(reference, tmp_path):
    shutil.copytree(reference / "store", tmp_path / "store")
    (tmp_path / "tiny.toml").write_text(TINY)
    store = units.Store(tmp_path / "store")
    keys = store.keys()
    # a result changed behind its digest, a file cut short, and bytes that are not UTF-8
    changed = store.path(keys[0])
    entry = json.loads(changed.read_text())
    entry["result"] = json.loads(json.dumps(entry["result"]).replace("0.", "0.9", 1))
    changed.write_text(json.dumps(entry))
    cut = store.path(keys[1])
    cut.write_text(cut.read_text()[:100])
    store.path(keys[2]).write_bytes(b"\x00\xff garbage")
    r = _cli("--readings", "tiny.toml", "--store", "store", "--out", "out", "--quiet", "--workers", "1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    counts = json.loads((tmp_path / "out" / "sweep.json").read_text())["counts"]
    assert counts["corrupt_retrained"] == 3 and counts["trained"] == 3
    assert len(list((tmp_path / "store" / "corrupt").iterdir())) == 3
    assert _tidy(tmp_path / "out").equals(_tidy(reference / "out"))
    assert all(store.get(k, json.loads(store.path(k).read_text())["spec"]) is not None for k in keys)


@pytest.mark.slow  # dask clusters
def test_two_concurrent_sweeps_into_one_store_stay_consistent(reference, tmp_path):
    (tmp_path / "tiny.toml").write_text(TINY)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-m", "app", "sweep", "--readings", "tiny.toml", "--store", "store",
                               "--out", f"out{i}", "--workers", "1", "--quiet"], cwd=tmp_path, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for i in (1, 2)]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    store = units.Store(tmp_path / "store")
    for k in store.keys():
        entry = json.loads(store.path(k).read_text())
        assert store.get(k, entry["spec"]) is not None
    assert not (tmp_path / "store" / "corrupt").exists()
    for i in (1, 2):
        assert _tidy(tmp_path / f"out{i}").equals(_tidy(reference / "out"))


def _scheduler_address(sched_file, deadline):
    """The address in a dask scheduler file, once the scheduler has written it whole: the file can
    exist, empty or half-written, before its JSON is complete."""
    while time.time() < deadline:
        try:
            return json.loads(sched_file.read_text())["address"]
        except (FileNotFoundError, json.JSONDecodeError, KeyError):
            time.sleep(0.2)
    raise AssertionError(f"no scheduler address in {sched_file} by the deadline")


@pytest.mark.slow  # a dask scheduler and worker
def test_scheduler_address_runs_on_a_separate_worker_with_the_same_results(reference, tmp_path):
    (tmp_path / "tiny.toml").write_text(TINY)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    sched_file = tmp_path / "scheduler.json"
    sched = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                              "--port", "0", "--dashboard-address", ":0", "--scheduler-file", str(sched_file)],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    worker = None
    try:
        address = _scheduler_address(sched_file, deadline=time.time() + 60)
        worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
                                   "--nworkers", "1", "--no-dashboard"], env=env, cwd=ROOT,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        r = _cli("--readings", "tiny.toml", "--store", "store", "--out", "out", "--scheduler", address, "--quiet",
                 cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        summary = json.loads((tmp_path / "out" / "sweep.json").read_text())
        assert summary["scheduler"] == address and summary["workers"] == 1
        assert _tidy(tmp_path / "out").equals(_tidy(reference / "out"))
    finally:
        for p in (worker, sched):
            if p is not None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


@pytest.mark.slow  # a dask cluster
def test_a_unit_that_raises_is_recorded_and_the_sweep_goes_on(tmp_path, monkeypatch):
    from distributed import Client, LocalCluster

    g = readings.parse(__import__("tomllib").loads(TINY), "tiny", TINY)
    g.tasks = ("occurrence",)
    p = sweep.plan(g)
    real = sweep_units.search

    def broken(spec):
        if spec["plan"] == "attention_only":
            raise FloatingPointError("injected")
        return real(spec)

    monkeypatch.setattr(sweep_units, "search", broken)   # the in-process worker resolves the patched function
    reports: list = []
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        out = sweep.execute(p, units.Store(tmp_path / "store"), lambda: client, reports.append)
    assert len(out.failed) == 1 and "injected" in next(iter(out.failed.values()))["error"]
    _assert_totals_count_what_is_left(reports)
    assert len(out.trained) == len(p.searches) + len(p.ceilings) - 1 + sum(
        len(p.seeds(k)) for k in p.searches if k not in out.failed)
    for reading in g.readings:
        res = sweep.cell_results(p, out, reading, 8)
        assert res["rows"] == {} and "attention_only search failed: FloatingPointError: injected" in \
            res["missing_rows"]["occurrence"][0]
        verdicts = sweep.cell_verdicts(res)
        assert verdicts and all(v["verdict"] == "refused" and v["category"] == "training failed" for v in verdicts)


def _finished(c: dict) -> int:
    return c["done"] + c["reused"] + c["failed"] + c["skipped"]


def _assert_totals_count_what_is_left(reports: list) -> None:
    """The last progress report's total is the units the run finished: it ends neither short of its total nor
    beyond it."""
    assert reports and reports[-1]["submitted"] == 0 and reports[-1]["total"] == _finished(reports[-1])


@pytest.mark.slow  # dask clusters
def test_progress_total_shrinks_when_draws_share_seed_units(tmp_path, monkeypatch):
    """Every search made to choose its first draw's step sizes: the draws share their seed units, which the
    run learns as the searches come back, and the total ends at the units trained, fewer than one seed unit
    per reported seed of each search."""
    from distributed import Client, LocalCluster

    real = sweep_units.search
    monkeypatch.setattr(sweep_units, "search", lambda spec: real({**spec, "draw": 0}))
    g = readings.parse(__import__("tomllib").loads(TINY), "tiny", TINY)
    p = sweep.plan(g)
    reports: list = []
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        out = sweep.execute(p, units.Store(tmp_path / "store"), lambda: client, reports.append)
    per_search = len(p.ceilings) + sum(1 + len(p.seeds(k)) for k in p.searches)
    assert len(set(out.seed_keys.values())) < len(out.seed_keys) and not any(p.extended.values())
    assert reports[0]["total"] == per_search > len(out.trained)
    _assert_totals_count_what_is_left(reports)
    assert reports[-1]["total"] == len(out.trained) and not out.failed


@pytest.mark.slow  # dask clusters
def test_progress_total_grows_with_the_seeds_a_bimodal_row_adds(tmp_path, monkeypatch):
    """A row found bimodal gets ``bimodal_seeds`` seeds instead of its reported ones, which the run learns only
    once the row's first seeds are back: the progress total then grows to what the run trains (first run) and
    what it takes from the store (second run), not one seed unit per reported seed of each search."""
    from distributed import Client, LocalCluster

    monkeypatch.setattr(sweep.protocol, "bimodal", lambda risks: len(risks) == 2)   # even pairs' two seeds
    g = readings.parse(__import__("tomllib").loads(TINY), "tiny", TINY)
    p = sweep.plan(g)
    store = units.Store(tmp_path / "store")
    first: list = []
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        out = sweep.execute(p, store, lambda: client, first.append)
    per_search = len(p.ceilings) + sum(1 + len(p.seeds(k)) for k in p.searches)
    assert any(p.extended.values()) and first[0]["total"] == per_search < len(out.trained)
    _assert_totals_count_what_is_left(first)
    assert first[-1]["total"] == len(out.trained) and not out.failed
    again: list = []
    stored = sweep.execute(sweep.plan(g), store, None, again.append)
    _assert_totals_count_what_is_left(again)
    assert again[-1]["total"] == len(stored.reused) == len(out.trained) and not stored.skipped


@pytest.mark.slow  # subprocesses
@pytest.mark.parametrize("args, words", [
    (["--d", "9"], "--d 9"),
    (["--workers", "1", "--scheduler", "tcp://127.0.0.1:1"], "--workers"),
    (["--readings", "missing.toml"], "cannot read readings file"),
    (["--store", "file.txt"], "--store"),
    (["--out", "file.txt"], "--out"),
    (["--scheduler", "foo"], "--scheduler 'foo' is not a dask scheduler address (no port number); the form is "
                             "tcp://host:port"),
    (["--scheduler", ""], "--scheduler '' is not a dask scheduler address (it is empty); the form is tcp://host:port"),
    (["--quick", "--readings", "tiny.toml"], "--quick runs the shipped small readings file; drop --readings"),
])
def test_bad_usage_is_refused_before_any_work(tmp_path, args, words):
    (tmp_path / "tiny.toml").write_text(TINY)
    (tmp_path / "file.txt").write_text("x")
    base = ["--readings", "tiny.toml"] if "--readings" not in args else []
    r = _cli(*base, *args, cwd=tmp_path, timeout=60)
    assert r.returncode == 2, r.stderr
    assert words in r.stderr
    assert not (tmp_path / "store").exists() or args[0] == "--out"


@pytest.mark.slow  # a sweep on a dask cluster, about a minute of CPU
def test_quick_runs_the_shipped_small_readings_file_into_the_default_folders(tmp_path):
    """``sweep --quick``: the small readings file shipped with the package (four readings at d = 8), into the
    default --store and --out (sweep-store/ and sweep/ of the current folder), every cell complete."""
    r = _cli("--quick", "--workers", "2", "--quiet", cwd=tmp_path, timeout=900)
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "sweep" / "sweep.json").read_text())
    assert summary["readings_file"]["text"] == sweep.QUICK_FILE.read_text()
    assert summary["counts"]["failed"] == 0 and summary["incomplete_cells"] == []
    assert len(summary["cells"]) == 4 and {c["d"] for c in summary["cells"]} == {8}
    assert summary["store"] == "sweep-store" and units.Store(tmp_path / "sweep-store").keys()
    assert "No reading of this file is the protocol's default" in (tmp_path / "sweep" / "sweep.md").read_text()


def test_the_quick_readings_file_ships_with_the_package():
    """The quick file is package data beside the default one, and parses to a small grid."""
    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert sweep.QUICK_FILE.name in data["numerics.experiments"] and sweep.QUICK_FILE.parent == readings.DEFAULT_FILE.parent
    g = readings.load(sweep.QUICK_FILE)
    assert g.d == (8,) and len(g.readings) == 4 and g.default is None


@pytest.mark.slow  # subprocesses
def test_a_scheduler_address_where_another_service_answers_is_a_usage_error(tmp_path):
    """--scheduler at a port whose service greets with its own bytes (an SSH banner): exit 2 naming the
    address as not a dask scheduler, not "out of memory" (dask reads the banner as a frame length)."""
    (tmp_path / "tiny.toml").write_text(TINY)
    with _servers.banner_server() as address:
        r = _cli("--readings", "tiny.toml", "--store", "store", "--out", "out", "--scheduler", address, "--quiet",
                 cwd=tmp_path, timeout=120)
    assert r.returncode == 2, r.stderr
    assert f"--scheduler {address}: not a dask scheduler" in r.stderr and "memory" not in r.stderr


@pytest.mark.slow  # the reference sweep on a dask cluster
@pytest.mark.slow  # the reference sweep on a dask cluster
def test_from_tables_renders_the_pages_the_sweep_wrote(reference, tmp_path):
    """A sweep's pages render again from its own tables (sweep.json, and tidy.csv without the parquet file)
    without its store: every page, table and sweep.json the same bytes."""
    for name in ("sweep.json", "tidy.csv"):
        shutil.copy(reference / "out" / name, tmp_path / name)
    r = _cli("--from-tables", str(tmp_path), "--out", "out", "--quiet", cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    def outputs(folder):  # the pages and tables, not the folder's completion marker
        return sorted(p.name for p in folder.iterdir() if p.suffix in (".md", ".json", ".csv")
                      and not p.name.startswith("."))
    written = outputs(tmp_path / "out")
    assert written == outputs(reference / "out") and "sweep.md" in written
    for name in written:
        assert (tmp_path / "out" / name).read_bytes() == (reference / "out" / name).read_bytes(), name


@pytest.mark.slow  # dask clusters (the reference sweep)
def test_a_record_of_another_configuration_rule_is_counted_over_readings(reference, tmp_path):
    """A sweep.json whose verdicts name configurations of an earlier rule (no ``configuration_rule``: their
    seeds left out, so one configuration could hold different verdicts) renders, counting over readings and
    saying so, rather than stopping on a disagreement its rule could not see."""
    from app.render import sweep as sweep_render

    summary = json.loads((reference / "out" / "sweep.json").read_text())
    assert summary.pop("configuration_rule") == sweep.CONFIGURATION_RULE
    lags = [v for c in summary["cells"] for v in c["verdicts"] if v["claim"].startswith("attention lags output")
            and v["row"] == "even_pairs"]
    for v in lags:
        v["config"] = "one-old-configuration"
    lags[0]["verdict"], lags[1]["verdict"] = "holds", "does not hold"
    (tmp_path / "sweep.json").write_text(json.dumps(summary))
    shutil.copy(reference / "out" / "tidy.csv", tmp_path / "tidy.csv")
    loaded = sweep_render.from_tables(tmp_path)
    assert not any("config" in v for c in loaded["cells"] for v in c["verdicts"])
    page = sweep_render.robustness_markdown(loaded)
    assert sweep_render.RECORDED_NOTE in page and sweep_render.COUNTS_NOTE not in page


@pytest.mark.slow  # dask clusters (the reference sweep)
def test_a_training_run_first_says_what_is_left_and_a_resumed_one_nothing(reference, tmp_path):
    """Before any unit, a training sweep prints the dry run's line on what is left (a long run's size is
    known before it starts, not only at its rate so far); a run with nothing left to train prints none."""
    first = (reference / "stderr.txt").read_text().splitlines()
    assert first[0].startswith("sweep: to train: 15 searches, 2 ceilings and about 25 seed tasks; no estimate")
    shutil.copytree(reference / "store", tmp_path / "store")
    (tmp_path / "tiny.toml").write_text(TINY)
    r = _cli("--readings", "tiny.toml", "--store", "store", "--out", "out", "--workers", "1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "to train:" not in r.stderr


def test_no_train_renders_from_the_store_without_a_cluster(reference, tmp_path):
    r = _cli("--readings", str(reference / "tiny.toml"), "--store", str(reference / "store"), "--out", "out",
             "--no-train", "--quiet", cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert summary["scheduler"] == "none (every task stored)" and summary["counts"]["trained"] == 0
    assert _tidy(tmp_path / "out").equals(_tidy(reference / "out"))
    r = _cli("--readings", str(reference / "tiny.toml"), "--store", "empty", "--out", "out2", "--no-train",
             "--quiet", cwd=tmp_path, timeout=120)
    assert r.returncode == 3, r.stderr
    summary = json.loads((tmp_path / "out2" / "sweep.json").read_text())
    assert summary["cells"] == [] and len(summary["incomplete_cells"]) == 2
    assert "Cells not complete" in (tmp_path / "out2" / "sweep.md").read_text()
    causes = summary["counts"]["skipped_by_cause"]  # an empty store: nothing failed, every unit is missing
    assert causes["failed"] == causes["diverged"] == 0 and causes["render only"] > 0
    assert sum(causes.values()) == summary["counts"]["skipped"]


def test_robustness_counts_and_the_axis_a_verdict_depends_on():
    from app.render import sweep as sweep_render
    axes = {"schedule": ["k2=1", "k2=20"], "optimizer": ["gd", "adam"]}

    def v(verdict, category=None):
        return {"row": "OR", "claim": "c", "verdict": verdict, "reasons": ["x"] if category else [],
                "evidence": "", **({"category": category} if category else {})}

    # the verdict flips with the optimizer only (schedule changes nothing, all else equal)
    per = {"k2=1/gd": v("holds"), "k2=20/gd": v("holds"), "k2=1/adam": v("does not hold"),
           "k2=20/adam": v("does not hold")}
    assert sweep_render.depends_on(per, axes) == ["optimizer (2 pairs; holds under gd)"]
    per["k2=20/adam"] = v("refused", "edge step")
    assert sweep_render.depends_on(per, axes) == ["optimizer (1 pair; holds under gd)"]
    per["k2=1/adam"] = v("undecided")
    assert sweep_render.depends_on(per, axes) == []      # no pair differing in one axis flips holds <-> does not hold
    summary = {"default_reading": "k2=1/gd", "readings_file": {"axes": axes},
               "cells": [{"reading": r, "d": 8, "verdicts": [x]} for r, x in per.items()]}
    table = sweep_render.robustness_table(summary, 8)
    assert table[2] == "| OR | c | holds | 2/4 | 0/4 | 1/4 | 1/4: other 1 | 0 | 2/2 | - |"


@pytest.mark.parametrize("reasons, category", [
    (["three phase: chosen step at an untried grid edge (out high)"], "edge step"),
    (["joint: diverged on seeds [1]"], "divergence"),
    (["joint: ended above its starting risk (unstable) on seeds [0]"], "divergence"),
    (["not representable: ceiling risk in [0.05, 0.2] against the task's best 0"], "capacity ceiling"),
    (["joint: not converged within the budget on seeds [0, 2]"], "non-convergence"),
    (["training failed: joint search failed: ValueError: x"], "training failed"),
    (["t_half undefined (a block never moves)"], "other"),
    (["joint: not run (the row holds no results for it)"], "training failed"),
    (["joint: no finite held-out risk"], "other"),
])
def test_refusal_reasons_are_categorised(reasons, category):
    assert sweep.reason_category(reasons) == category


def test_docs_sweep_tables_agree_with_its_exports():
    """docs/sweep/ (the committed full sweep): the robustness counts of sweep.md equal those recomputed with
    pandas from verdicts.csv, the tidy table has one row per (reading, d, row, plan, seed), and docs/table1.md
    leads with the robustness table of that sweep."""
    import pandas as pd

    from app.render import sweep as sweep_render

    docs = ROOT / "docs" / "sweep"
    if not (docs / "sweep.json").exists():
        pytest.skip("no committed sweep in docs/sweep")
    summary = json.loads((docs / "sweep.json").read_text())
    verdicts = pd.read_csv(docs / "verdicts.csv")
    md = (docs / "sweep.md").read_text()
    for (d, row, claim), g in verdicts.groupby(["d", "row", "claim"]):
        if "config" in g and g.config.notna().all():  # counted over distinct configurations
            g = g.drop_duplicates("config")
        n = len(g)
        counts = g.verdict.value_counts()
        line = next(ln for ln in md.split(f"### Robustness at d = {d} ")[1].splitlines()
                    if ln.startswith(f"| {row} | {claim} |"))
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if cells[3].startswith(sweep_render.SAME_AS):  # counted at a smaller d
            continue
        assert cells[3:6] == [f"{counts.get(v, 0)}/{n}" for v in ("holds", "does not hold", "undecided")], line
        assert cells[6].split(" ")[0].split("/")[0] == str(counts.get("refused", 0)), line
    tidy = pd.read_parquet(docs / "tidy.parquet")
    assert not tidy.duplicated(["reading", "d", "row", "plan", "seed"]).any()
    assert set(zip(tidy.reading, tidy.d)) == {(c["reading"], c["d"]) for c in summary["cells"]}
    table1 = (ROOT / "docs" / "table1.md").read_text()
    assert table1.index("## Robustness") < table1.index("## Tasks")


def _git_reads(commit: str) -> bool:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{commit}^{{commit}}"],
                              capture_output=True).returncode == 0
    except OSError:
        return False


def test_code_digest_at_a_commit_is_the_digest_of_its_checkout():
    """``code_digest_at`` reads a commit's tracked files in ``code_digest``'s order: at HEAD it gives the working
    tree's digest when numerics/ and theory/ are clean (a file left out, another order, or another path form
    would not), and a commit whose code differs gives another digest."""
    if not _git_reads("HEAD"):
        pytest.skip("not a git checkout")
    clean = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", *units.CODE_PACKAGES],
                           capture_output=True, text=True, check=True).stdout == ""
    if not clean:
        pytest.skip("numerics/ or theory/ has uncommitted changes")
    assert units.code_digest_at("HEAD", ROOT) == units.code_digest()
    changed = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%H", "HEAD~1", "--", "numerics/*.py",
                              "numerics/*.toml"], capture_output=True, text=True).stdout.strip()
    if changed and _git_reads(changed + "~1"):
        assert units.code_digest_at(changed, ROOT) != units.code_digest_at(changed + "~1", ROOT)


def test_the_digest_orders_paths_part_by_part():
    """Both digests take their files in pathlib's order, part by part, which differs from the strings' order
    where a name holds a character below "/" ("-", "."): sorted as strings, this tree's files would come in the
    same order, so only names like these tell the two apart."""
    names = ["pkg/a.py", "pkg/a/b.py", "pkg/a-b.py", "pkg/b.toml"]
    assert units._in_digest_order(names) == ["pkg/a/b.py", "pkg/a-b.py", "pkg/a.py", "pkg/b.toml"]
    assert sorted(names) != units._in_digest_order(names)


def test_committed_sweep_was_rendered_from_the_code_of_its_recorded_commit():
    """docs/sweep/sweep.json records the commit that rendered it (clean) and the code digest of that checkout
    (``units.code_digest``): the two agree, so the pages name the code that rendered them."""
    summary = json.loads((ROOT / "docs" / "sweep" / "sweep.json").read_text())
    assert summary["dirty"] is False
    if not _git_reads(summary["commit"]):
        pytest.skip(f"the clone does not hold commit {summary['commit'][:12]}")
    assert units.code_digest_at(summary["commit"], ROOT) == summary["code"]


def test_committed_sweep_names_no_folder_of_the_machine_it_ran_on():
    """The committed record gives its readings file, store and folders relative to the repository root."""
    summary = json.loads((ROOT / "docs" / "sweep" / "sweep.json").read_text())
    assert summary["readings_file"]["path"] == "numerics/experiments/readings.toml"
    assert not Path(summary["store"]).is_absolute()
    assert not any(Path(a).is_absolute() for a in summary["command"])


def test_committed_sweep_bounds_its_exact_population_risks():
    """The committed sweep ran on exact populations within tolerances of 1e-16: every reported
    seed of an exact-population row (occurrence, OR) in tidy.parquet records both bounds on its population
    risk, the left-out mass's and the rounding allowance's, and they sum to at most 1e-12 on every seed (the
    largest, occurrence's output-only run at d = 200 under the default reading, 4.9e-13); sampled rows record
    neither."""
    import pandas as pd

    docs = ROOT / "docs" / "sweep"
    if not (docs / "sweep.json").exists():
        pytest.skip("no committed sweep in docs/sweep")
    summary = json.loads((docs / "sweep.json").read_text())
    assert summary["run_config"]["mass_tol"] <= 1e-16 and summary["run_config"]["len_tol"] <= 1e-16
    tidy = pd.read_parquet(docs / "tidy.parquet")
    exact = tidy[tidy.task.isin(["occurrence", "OR"]) & ~tidy.diverged.astype(bool)]
    # one run per plan (an exact population has no seeds to draw), four plans, both rows in every cell; none diverged
    assert len(exact) == len(tidy[tidy.task.isin(["occurrence", "OR"])]) == 2 * 4 * summary["counts"]["cells"]
    assert exact.truncation_bound.notna().all() and exact.rounding_bound.notna().all()
    assert float((exact.truncation_bound + exact.rounding_bound).max()) <= 1e-12
    sampled = tidy[~tidy.task.isin(["occurrence", "OR"])]
    assert len(sampled) and sampled.truncation_bound.isna().all() and sampled.rounding_bound.isna().all()


def test_progress_gives_the_time_left_at_the_runs_rate(capsys):
    """The time left is the tasks left at the mean wall time a finished task so far, said as such; "none left"
    only when no task is left, whatever the elapsed time."""
    from app.commands import sweep as sweep_command

    progress = sweep_command.Progress(quiet=True)
    counts = {"done": 2, "reused": 0, "failed": 0, "skipped": 0, "running": 2, "total": 6, "elapsed": 120.0}
    progress._log(counts)
    assert capsys.readouterr().err.rstrip().endswith("2.0 min, about 4 min left at this run's rate so far")
    progress._log(counts | {"elapsed": 0.0})
    assert capsys.readouterr().err.rstrip().endswith("0.0 min, about 0 min left at this run's rate so far")
    progress._log(counts | {"done": 6})
    assert capsys.readouterr().err.rstrip().endswith(", none left")
    progress._log(counts | {"done": 0})
    assert capsys.readouterr().err.rstrip().endswith("2.0 min")
    progress.close()


def test_progress_without_a_terminal_beats_while_tasks_run(capsys):
    """stderr not a terminal (pytest captures it): after the first line, a heartbeat line whenever none was
    printed for the heartbeat interval while tasks are left, and none after the last task or after close."""
    from app.commands import sweep as sweep_command

    progress = sweep_command.Progress(quiet=False, heartbeat_s=0.2)
    counts = {"done": 0, "reused": 0, "failed": 0, "skipped": 0, "running": 2, "total": 5, "elapsed": 0.0}
    t0 = time.monotonic()
    progress(counts)
    beats: list = []
    while len(beats) < 4 and time.monotonic() - t0 < 20:
        time.sleep(0.05)
        beats += capsys.readouterr().err.splitlines()
    took = time.monotonic() - t0
    assert beats[0].startswith("sweep: 0/5 tasks; done 0 (stored before 0), running 2, failed 0; 0.0 min")
    assert len(beats) >= 4 and took >= 3 * 0.2                      # no beat before its interval
    assert all("alive, no task finished in the last" in ln for ln in beats[1:])
    progress(counts | {"done": 5, "elapsed": 30.0})                  # every task finished: its line, then quiet
    time.sleep(0.5)
    progress.close()
    time.sleep(0.3)
    assert capsys.readouterr().err.splitlines() == ["sweep: 5/5 tasks; done 5 (stored before 0), running 2, "
                                                    "failed 0; 0.5 min, none left"]
    busy = sweep_command.Progress(quiet=False, heartbeat_s=0.2)      # tasks finishing faster than the heartbeat
    t0 = time.monotonic()
    while time.monotonic() - t0 < 1.0:
        busy(counts | {"done": 1, "elapsed": time.monotonic() - t0})
        time.sleep(0.05)
    busy.close()
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "alive" not in lines[0]                # the first line, then none for a minute
    quiet = sweep_command.Progress(quiet=True, heartbeat_s=0.1)
    quiet(counts)
    time.sleep(0.4)
    quiet.close()
    assert capsys.readouterr().err == ""


def test_recorded_commands_give_folders_inside_the_repository_relative_to_its_root(tmp_path, monkeypatch):
    """A recorded command names --store, --out and --readings inside the repository relative to its root
    (typed absolute, or relative to a folder inside it), whether written "--out X" or "--out=X"; a path outside
    the root is kept as typed, and the other arguments are left alone."""
    from app.commands import sweep as sweep_command

    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    argv = ["--store", str(root / "stores" / "s"), f"--out={root / 'docs' / 'sweep'}", "--readings",
            str(elsewhere / "r.toml"), "--d", "25", "--quiet"]
    assert sweep_command.recorded_folders(argv, root) == [
        "--store", "stores/s", "--out=docs/sweep", "--readings", str(elsewhere / "r.toml"), "--d", "25", "--quiet"]
    monkeypatch.chdir(root / "docs")
    assert sweep_command.recorded_folders(["--out", "sweep", "--store", "../s", "--store", "../../x"], root) == \
        ["--out", "docs/sweep", "--store", "s", "--store", "../../x"]
    assert sweep_command.recorded_folders(["--out", "--store"], root) == ["--out", "docs/--store"]
    monkeypatch.chdir(tmp_path)
    assert sweep_command.recorded_folders(["--out", "sweep"], root) == ["--out", "sweep"]


@pytest.mark.slow  # subprocesses
def test_a_run_records_its_folders_relative_to_the_repository_root(reference, tmp_path):
    """A render-only run from this checkout with an absolute --out inside it records the folder relative to
    the root, in sweep.json's command and store and in the store's run log."""
    out = ROOT / "build" / f"sweep-record-test-{os.getpid()}"
    try:
        r = _cli("--readings", str(reference / "tiny.toml"), "--store", str(reference / "store"), "--out", str(out),
                 "--no-train", "--quiet", cwd=tmp_path, timeout=120)
        assert r.returncode == 0, r.stderr
        summary = json.loads((out / "sweep.json").read_text())
    finally:
        shutil.rmtree(out, ignore_errors=True)
    rel = out.relative_to(ROOT).as_posix()
    assert summary["command"][summary["command"].index("--out") + 1] == rel
    assert summary["store"] == str(reference / "store")                    # outside the checkout: as typed
    assert summary["readings_file"]["path"] == str(reference / "tiny.toml")
    logged = summary["runs"][-1]["command"]                               # this run, the last to start
    assert logged == summary["command"] and logged[logged.index("--out") + 1] == rel


def _counts(**kw) -> dict:
    return {"cells": 2, "trained": 0, "reused": 27, "failed": 0, "skipped": 0, "corrupt_retrained": 0} | kw


def test_a_render_only_run_says_corrupt_entries_were_moved_not_retrained():
    """--no-train trains nothing: the corrupt entries it met were moved to corrupt/, not retrained; a run that
    trains retrains them."""
    from app.render import sweep as sweep_render
    no_train = sweep_render.summary_text({"counts": _counts(reused=24, corrupt_retrained=3, skipped=3), "wall_s": 6.0})
    assert "3 corrupt store entries moved to corrupt/;" in no_train and "retrained" not in no_train
    assert "0 tasks trained" in no_train
    trained = sweep_render.summary_text({"counts": _counts(trained=3, reused=24, corrupt_retrained=3), "wall_s": 60.0})
    assert "3 tasks trained" in trained and "3 corrupt store entries moved to corrupt/ and retrained;" in trained
    clean = sweep_render.summary_text({"counts": _counts(trained=3), "wall_s": 60.0})
    assert "no corrupt store entry;" in clean


def test_the_pages_header_says_what_the_run_did():
    """A run that trained nothing says it rendered from the store (in seconds, not "0 min", and no cluster
    named "none"); a run that trained names its tasks, time and cluster."""
    from app.render import sweep as sweep_render
    stored = sweep_render.run_line({"counts": _counts(), "wall_s": 6.2, "scheduler": "none (every task stored)"})
    assert stored == "this rendering trained nothing: every task it shows came from the results store (6 s)"
    partial = sweep_render.run_line({"counts": _counts(skipped=4), "wall_s": 3.0, "scheduler": "none (every task stored)"})
    assert "4 tasks were not run" in partial and "; no cell has units missing" in partial
    causes = {"diverged": 3, "failed": 0, "not stored": 1}
    named = sweep_render.run_line({"counts": _counts(skipped=4, skipped_by_cause=causes), "wall_s": 3.0,
                                   "scheduler": "none (every task stored)"})
    assert "4 tasks were not run: 3 seed tasks after a search that diverged at every step size" in named
    assert "1 seed tasks whose search is not in the store" in named and "failed" not in named
    assert sweep.skip_causes({"a": sweep.SKIP_DIVERGED, "b": "search 0123456789ab failed",
                              "c": sweep.SKIP_NOT_STORED, "d": sweep.SKIP_DIVERGED, "e": units.NOT_IN_STORE,
                              "f": "some new reason"}) == \
        {"diverged": 2, "failed": 1, "not stored": 1, "render only": 1, "other": 1}
    other = sweep_render.run_line({"counts": _counts(skipped=2, skipped_by_cause={"render only": 1, "other": 1}),
                                   "wall_s": 3.0, "scheduler": "none (every task stored)"})
    assert "2 tasks were not run: 1 tasks not in the store themselves, 1 tasks for another cause" in other
    missing = sweep_render.run_line({"counts": _counts(skipped=4, incomplete_cells=2), "wall_s": 3.0,
                                     "scheduler": "none (every task stored)"})
    assert "; 2 cells with units missing are left out" in missing
    trained = sweep_render.run_line({"counts": _counts(trained=1638), "wall_s": 77 * 60.0,
                           "scheduler": "LocalCluster (2 workers)"})
    assert trained == "this run trained 1638 tasks in 77 min wall on LocalCluster (2 workers)"
    assert [sweep_render.duration(x) for x in (0.4, 59.0, 60.0, 5399.0, 5400.0, 4.5 * 3600)] == \
        ["0 s", "59 s", "1 min", "90 min", "1.5 h", "4.5 h"]


def test_committed_sweep_page_is_its_rendering():
    """docs/sweep/sweep.md is ``markdown`` of docs/sweep/sweep.json, the record beside it."""
    from app.render import sweep as sweep_render
    docs = ROOT / "docs" / "sweep"
    if not (docs / "sweep.json").exists():
        pytest.skip("no committed sweep in docs/sweep")
    assert (docs / "sweep.md").read_text() == sweep_render.markdown(json.loads((docs / "sweep.json").read_text()))


def test_cost_section_adds_up():
    """The cost table lists every (d, task) of the summary, largest first, with CPU hours that add up to the
    units' total and the wall time of every run on the store."""
    from app.render import sweep as sweep_render
    by = {"d=25 OR": 1800.0, "d=50 ICL": 5400.0, "d=25 occurrence": 3600.0}
    summary = {"runs": [{"wall_s": 3600.0}, {"wall_s": 1800.0}], "runs_wall_s": 5400.0,
               "units_cpu_s_by": by, "units_cpu_s": sum(by.values())}
    lines = sweep_render.cost_markdown(summary)
    rows = [ln.split("|")[1:-1] for ln in lines if ln.startswith("| d=")]
    assert [r[0].strip() for r in rows] == ["d=50 ICL", "d=25 occurrence", "d=25 OR"]
    assert sum(float(r[1]) for r in rows) == pytest.approx(3.0)
    assert [r[2].strip() for r in rows] == ["50%", "33%", "17%"]
    assert "1.50 h wall" in lines[2] and "2 invocations" in lines[2]


# ------------------------------------------------------------------------------------------------
# generic units (kind "call"): the studies of `occ-companion scope` run through the same store and loop


def square_or_fail(args: dict) -> dict:
    """A generic unit for the tests: x^2, or a ValueError on negative x."""
    if args["x"] < 0:
        raise ValueError(f"negative x = {args['x']}")
    return {"square": args["x"] ** 2, "pid": os.getpid()}


@pytest.mark.slow  # a dask cluster
def test_call_units_are_stored_resumed_and_a_failing_one_is_recorded(tmp_path):
    from distributed import Client, LocalCluster

    fn = f"{__name__}:square_or_fail"
    specs = {units.key_of(s): s for s in (units.call_spec(fn, {"x": x}) for x in (2, 3, -1))}
    bad = next(k for k, s in specs.items() if s["args"]["x"] < 0)
    store = units.Store(tmp_path / "store")
    connected = []
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        def connect():
            connected.append(1)
            return client

        first = units.execute_calls(specs, store, connect)
        assert sorted(first.results[k]["square"] for k in first.trained) == [4, 9]
        assert list(first.failed) == [bad] and "ValueError: negative x = -1" in first.failed[bad]["error"]
        assert set(store.keys()) == set(specs) - {bad}
        again = units.execute_calls(specs, store, connect)  # resume: only the failed unit is run again
        assert sorted(again.reused) == sorted(set(specs) - {bad}) and again.trained == [] and list(again.failed) == [bad]
        assert len(connected) == 2
    stored_only = units.execute_calls(specs, store, None)   # render only: nothing trained, the missing unit listed
    assert stored_only.skipped == {bad: "not in the store (not trained: render only)"}
    assert {k: v["square"] for k, v in stored_only.results.items()} == {k: first.results[k]["square"] for k in first.trained}
    other = units.call_spec(fn, {"x": 2}, version="0.0.0")  # the key covers the version
    assert units.key_of(other) not in specs


@pytest.mark.parametrize("fn, words", [("nomodule", "module:name"), ("numerics.nothing_here:f", "not found"),
                                        ("numerics.units:STORE_FORMAT", "not callable")])
def test_call_units_refuse_a_bad_function_reference(fn, words):
    with pytest.raises(SettingError, match=words):
        units.resolve(fn)


def test_call_spec_refuses_arguments_that_are_not_json():
    with pytest.raises(TypeError):
        units.call_spec("numerics.units:canonical", {"x": object()})


def _copy_code(tmp_path) -> dict:
    """Copies of the computing packages under ``tmp_path`` ({package: its folder}, as ``units`` takes roots)."""
    roots = {}
    for pkg, root in units.package_roots().items():
        roots[pkg] = tmp_path / pkg
        shutil.copytree(root, roots[pkg], ignore=shutil.ignore_patterns("__pycache__"))
    return roots


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, (path, old)
    path.write_text(text.replace(old, new))


def test_code_digest_follows_every_source_file_of_the_computing_packages(tmp_path):
    """The provenance digest: an edit of any .py or .toml file under numerics/ or theory/ (here: copies of both
    packages) changes it, and an edit elsewhere does not."""
    roots = _copy_code(tmp_path)
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "x.py").write_text("x = 1\n")
    base = units.code_digest(roots)
    assert base == units.code_digest()                                # the copy is the installed code
    (tmp_path / "app" / "x.py").write_text("x = 2\n")
    assert units.code_digest(roots) == base                           # presentation code is not in it
    for rel in ("numerics/experiments/verdicts.py", "theory/claims.toml"):
        f = tmp_path / rel
        old = f.read_bytes()
        f.write_bytes(old + b"\n")
        assert units.code_digest(roots) != base, rel
        f.write_bytes(old)
    assert units.code_digest(roots) == base


def test_training_unit_keys_follow_the_code_they_import_not_its_text_or_place(tmp_path):
    """The code digest in every training unit's key (``units.unit_code`` of the units' module), on copies of
    the packages: docstrings, comments, layout, a verdict rule and a module moved to another folder (its
    importer's import line with it) leave it; one constant or one operator changed in a module the units
    import changes it."""
    roots = _copy_code(tmp_path)
    root = sweep.UNIT_MODULE
    base = units.unit_code(root, roots)
    assert base == units.unit_code(root) == sweep.plan(readings.parse(__import__("tomllib").loads(TINY), "t", TINY)).code
    runner, lag = tmp_path / "numerics/experiments/runner.py", tmp_path / "numerics/experiments/lag.py"
    text = runner.read_text()
    doc = text.index('"""') + 3
    runner.write_text(text[:doc] + "Reworded. " + text[doc:] + "\n\n# a comment at the end\n")
    _edit(runner, "def rows(cfg: Config) -> list[Row]:\n", "def rows(cfg: Config) -> list[Row]:  # a comment\n\n")
    _edit(lag, "from numerics.experiments import engine\n", "from numerics.experiments import (\n    engine,\n)\n")
    _edit(tmp_path / "numerics/experiments/verdicts.py", "MATCH_SHARE = 0.1", "MATCH_SHARE = 0.2")  # a rule
    assert units.unit_code(root, roots) == base
    # lag.py moved to numerics/theorem/, the runner importing it from there
    (tmp_path / "numerics/theorem/lag.py").write_text(lag.read_text())
    lag.unlink()
    _edit(runner, "from numerics.experiments import lag as lag_module\n", "from numerics.theorem import lag as lag_module\n")
    assert units.unit_code(root, roots) == base
    moved = tmp_path / "numerics/theorem/lag.py"
    for path, old, new in [(moved, "r >= 0.5", "r >= 0.25"), (moved, "r >= 0.5", "r > 0.5"),
                           (tmp_path / "numerics/experiments/engine.py", "SUM_BLOCK = ", "SUM_BLOCK = 1 + ")]:
        kept = path.read_text()
        path.write_text(kept.replace(old, new, 1))
        assert old in kept and units.unit_code(root, roots) != base, (path.name, old, new)
        path.write_text(kept)
    assert units.unit_code(root, roots) == base


def test_unit_keys_follow_the_data_file_beside_a_module_and_not_its_comments(tmp_path):
    """A module's data file (theory/claims.toml, read by theory.claims, which the regime study imports) is in
    the key with its parsed content: a comment leaves the key, a changed value changes it."""
    roots = _copy_code(tmp_path)
    study = "numerics.scope.regime"
    base = units.unit_code(study, roots)
    claims = tmp_path / "theory" / "claims.toml"
    text = claims.read_text()
    claims.write_text("# a comment\n" + text)
    assert units.unit_code(study, roots) == base
    first = text.index('= "') + 3
    claims.write_text(text[:first] + "x" + text[first:])
    assert units.unit_code(study, roots) != base


def test_a_store_entry_that_is_not_utf8_is_moved_aside_as_corrupt(tmp_path):
    store = units.Store(tmp_path / "store")
    spec = {"kind": "call", "fn": "m:f", "args": {}}
    key = units.key_of(spec)
    store.put(key, spec, {"result": {"x": 1.5}, "cpu_s": 0.0, "wall_s": 0.0})
    assert store.get(key, spec)["result"] == {"x": 1.5}
    store.path(key).write_bytes(b"\x00\xff garbage")
    assert store.get(key, spec) is None and not store.path(key).exists()
    assert store.corrupt_found == [key] and len(list((tmp_path / "store" / "corrupt").iterdir())) == 1
    (tmp_path / "store" / "runs.jsonl").write_bytes(b'{"event": "start"}\n\xff\xfe\n')
    assert store.runs() == [{"event": "start"}]


def test_a_run_killed_by_a_signal_is_listed_without_its_wall_time():
    """The run log: a start record whose run ended is listed as its end record (with the wall time), in the
    order the runs started; a start record without one (a run killed by SIGKILL, or still running) is
    listed, marked, and kept out of the total; end records of older logs (no event) count as ended runs.
    Runs pair by their id: two starts in the same second by the same process id (other hosts) stay apart,
    and older start records without an id pair by start time and process id together."""
    from app.render import sweep as sweep_render
    cmd = ["occ-companion", "sweep"]
    lines = [{"started": "t0", "wall_s": 60.0, "trained": 5, "command": cmd},  # an older log's end record
             {"event": "start", "run_id": "a", "started": "t1", "pid": 7, "command": cmd},
             {"event": "start", "run_id": "b", "started": "t1", "pid": 7, "command": cmd},  # same second, same pid
             {"event": "start", "started": "t2", "pid": 8, "command": cmd},  # no id: pairs by (started, pid)
             {"event": "start", "started": "t3", "pid": 8, "command": cmd},
             {"event": "end", "run_id": "b", "started": "t1", "pid": 7, "wall_s": 1800.0, "trained": 9, "command": cmd},
             {"event": "end", "started": "t3", "pid": 8, "wall_s": 600.0, "trained": 2, "command": cmd}]
    runs = sweep_render.invocations(lines)
    assert [(r["started"], r.get("run_id"), r["wall_s"]) for r in runs] == [
        ("t0", None, 60.0), ("t1", "a", None), ("t1", "b", 1800.0), ("t2", None, None), ("t3", None, 600.0)]
    assert sweep_render.recorded_wall_s(runs) == 2460.0  # the three ended runs; the two without an end are left out
    summary = {"runs": runs, "runs_wall_s": sweep_render.recorded_wall_s(runs), "units_cpu_s_by": {"d=25 OR": 3600.0}, "units_cpu_s": 3600.0}
    out = sweep_render.cost_markdown(summary)
    assert "3 invocations" in out[2] and "0.68 h" in out[2] and "2 more left no end record" in out[2]
    assert sum("no end record | unknown |" in ln for ln in out) == 2
    assert any(ln.startswith("| t1 |") and "| 9 | 30.0 min |" in ln for ln in out)


def test_the_cost_counts_the_runs_that_trained_these_units():
    """An invocation counts in a sweep's cost when it ran the plan's units (their code digest), whatever the
    checkout's verdict rules or pages were; an older record without that digest is matched on the checkout's."""
    from types import SimpleNamespace

    p = SimpleNamespace(code="units-a")
    assert sweep.same_units({"unit_code": "units-a", "code": "checkout-1"}, p, "checkout-2")
    assert not sweep.same_units({"unit_code": "units-b", "code": "checkout-2"}, p, "checkout-2")
    assert sweep.same_units({"code": "checkout-2"}, p, "checkout-2")
    assert not sweep.same_units({"code": "checkout-1"}, p, "checkout-2")


def test_the_cost_counts_runs_of_the_same_units_at_the_grids_sizes():
    """A run of the same units counts whether it ran this readings file or another at one of its d (the same
    grid with limits, whose units this one reuses); a run at other sizes only, of other units, or of another
    version does not."""
    from types import SimpleNamespace

    p = SimpleNamespace(code="units-a", version="1.0")
    grid = SimpleNamespace(sha256="file-full", d=(25, 50, 100, 200))
    run = {"unit_code": "units-a", "version": "1.0", "readings_sha256": "file-limited", "d": [25, 50, 100, 200]}
    assert sweep.counts_for(run, grid, p, "checkout")
    assert sweep.counts_for({**run, "readings_sha256": "file-full", "d": [8]}, grid, p, "checkout")
    assert not sweep.counts_for({**run, "d": [8]}, grid, p, "checkout")
    assert not sweep.counts_for({**run, "unit_code": "units-b"}, grid, p, "checkout")
    assert not sweep.counts_for({**run, "version": "0.9"}, grid, p, "checkout")


def test_the_cost_lists_the_runs_that_trained_and_counts_the_renders():
    """Invocations that trained, or left no end record, are rows of the cost table; render-only ones are one
    line with their count and wall time, so re-rendering the pages does not grow the table."""
    from app.render import sweep as sweep_render

    runs = [{"started": "t0", "command": ["occ-companion", "sweep"], "trained": 10, "wall_s": 600.0},
            {"started": "t1", "command": ["occ-companion", "sweep", "--no-train"], "trained": 0, "wall_s": 5.0},
            {"started": "t2", "command": ["occ-companion", "sweep", "--no-train"], "trained": 0, "wall_s": 6.0},
            {"started": "t3", "command": ["occ-companion", "sweep"]}]
    text = "\n".join(sweep_render.cost_markdown({"runs": runs, "runs_wall_s": 611.0, "units_cpu_s": 3600.0,
                                                 "units_cpu_s_by": {"d=8 occurrence": 3600.0}}))
    assert "| t0 |" in text and "| t3 |" in text and "| t1 |" not in text and "| t2 |" not in text
    assert "and 2 that trained nothing and only rendered the pages from the store (11 s wall in all)." in text


def test_the_cost_counts_the_lag_map_beside_the_pages(tmp_path):
    """The lag map recorded beside a sweep's pages (docs/lag_map/ beside docs/sweep/) enters its cost section
    with its units' CPU, and the total adds both; the quick map, or no map, adds nothing."""
    from app.render import sweep as sweep_render

    out = tmp_path / "docs" / "sweep"
    out.mkdir(parents=True)
    assert sweep_render.lag_beside(out) == []
    record = {"quick": False, "config": {"d": 50, "seeds": 3}, "cells": 168, "rows": ["occurrence", "ICL"],
              "rhos": [1.0, 4.0, 16.0], "start_scales": [0.0, 0.1], "units_cpu_s": 1800.0,
              "command": ["occ-companion", "lag", "--d", "50"], "commit": "0123456789abcdef"}
    (tmp_path / "docs" / "lag_map").mkdir()
    (tmp_path / "docs" / "lag_map" / "lag_map.json").write_text(json.dumps(record))
    beside = sweep_render.lag_beside(out)
    assert [(b["d"], b["cells"], b["rows"], b["rhos"], b["starts"], b["units_cpu_s"]) for b in beside] == \
        [(50, 168, 2, 3, 2, 1800.0)]
    summary = {"runs": [], "runs_wall_s": 0.0, "units_cpu_s_by": {"d=25 OR": 3600.0}, "units_cpu_s": 3600.0,
               "beside": beside}
    text = sweep_render.cost_markdown(summary)[2]
    assert "0.50 h of unit CPU" in text and "took 1.50 h of unit CPU in all" in text
    assert "`occ-companion lag --d 50` at commit 0123456789" in text
    assert "Beside it" not in sweep_render.cost_markdown({**summary, "beside": []})[2]
    two = {**summary, "beside": beside + [{**beside[0], "d": 25, "units_cpu_s": 900.0, "dirty": True}]}
    text = sweep_render.cost_markdown(two)[2]
    assert "took 1.75 h of unit CPU in all" in text and text.count(" (dirty)") == 1 and "(d = 25, " in text
    (tmp_path / "docs" / "lag_map" / "lag_map.json").write_text(json.dumps({**record, "quick": True}))
    assert sweep_render.lag_beside(out) == []
    (tmp_path / "docs" / "lag_map" / "lag_map.json").write_text(json.dumps({"quick": False, "cells": 3}))
    with pytest.raises(KeyError):
        sweep_render.lag_beside(out)


@pytest.mark.slow  # the reference sweep on a dask cluster
def test_the_lag_map_beside_enters_both_render_paths_and_a_broken_one_is_refused_first(reference, tmp_path):
    """--no-train and --from-tables both count the lag map beside --out (from-tables keeps the one its record
    holds); an unreadable lag record is refused with exit 2, naming the file, before any store is opened."""
    docs = tmp_path / "docs"
    (docs / "lag_map").mkdir(parents=True)
    record = {"quick": False, "config": {"d": 8, "seeds": 2}, "cells": 4, "rows": ["occurrence"], "rhos": [1.0, 4.0],
              "start_scales": [0.0, 0.1], "units_cpu_s": 360.0, "command": ["occ-companion", "lag"], "commit": "abc"}
    (docs / "lag_map" / "lag_map.json").write_text(json.dumps(record))
    r = _cli("--readings", str(reference / "tiny.toml"), "--store", str(reference / "store"), "--out",
             str(docs / "sweep"), "--no-train", "--quiet", cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "Beside it, the lag map in `../lag_map/` (d = 8, 4 cells" in (docs / "sweep" / "sweep.md").read_text()
    assert json.loads((docs / "sweep" / "sweep.json").read_text())["beside"][0]["units_cpu_s"] == 360.0
    r = _cli("--from-tables", str(docs / "sweep"), "--out", str(tmp_path / "elsewhere"), "--quiet", cwd=tmp_path,
             timeout=120)
    assert r.returncode == 0, r.stderr
    assert "(d = 8, 4 cells" in (tmp_path / "elsewhere" / "sweep.md").read_text()  # the recorded one, kept
    older = tmp_path / "older"  # a record from before the lag map was counted (no "beside"): the one beside --out
    older.mkdir()
    shutil.copy(reference / "out" / "tidy.csv", older / "tidy.csv")
    summary = json.loads((reference / "out" / "sweep.json").read_text())
    summary.pop("beside")
    (older / "sweep.json").write_text(json.dumps(summary))
    r = _cli("--from-tables", str(older), "--out", str(docs / "sweep"), "--quiet", cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "(d = 8, 4 cells" in (docs / "sweep" / "sweep.md").read_text()
    (docs / "lag_map" / "lag_map.json").write_text("{broken")
    r = _cli("--readings", str(reference / "tiny.toml"), "--store", str(tmp_path / "new-store"), "--out",
             str(docs / "sweep"), "--quiet", cwd=tmp_path, timeout=120)
    assert r.returncode == 2 and "lag_map.json" in r.stderr and "cannot be read as a lag map record" in r.stderr
    assert not (tmp_path / "new-store").exists()


def test_incomplete_cells_are_said_by_d():
    """Every reading incomplete at a d is one phrase with the rows missing in any of them; a d where only some
    readings are incomplete lists each cell."""
    from app.render import sweep as sweep_render

    inc = [{"reading": "a", "d": 100, "rows_missing": ["ICL"]}, {"reading": "b", "d": 100, "rows_missing": ["SLR"]},
           {"reading": "a", "d": 200, "rows_missing": ["ICL", "OR"]}]
    assert sweep_render.incomplete_words(inc, ["a", "b"]) == [
        "every reading (2) at d = 100 (rows missing in some: ICL, SLR)", "`a` at d = 200 (ICL, OR)"]
    assert sweep_render.incomplete_words(inc[:1], ["a"]) == ["`a` at d = 100 (ICL)"]


def test_an_interrupted_run_is_listed_as_training_not_as_a_render():
    """A run stopped by Ctrl-C records its wall time but no count of tasks trained: it is a row of the table
    (its count not recorded), not one of the runs that only rendered."""
    from app.render import sweep as sweep_render

    runs = [{"started": "t0", "command": ["occ-companion", "sweep"], "trained": None, "wall_s": 600.0},
            {"started": "t1", "command": ["occ-companion", "sweep", "--no-train"], "trained": 0, "wall_s": 6.0}]
    out = sweep_render.cost_markdown({"runs": runs, "runs_wall_s": 606.0, "units_cpu_s_by": {"d=25 OR": 60.0},
                                      "units_cpu_s": 60.0})
    assert any(ln.startswith("| t0 |") and "| not recorded (interrupted) | 10.0 min |" in ln for ln in out)
    assert "and 1 that trained nothing and only rendered the pages from the store (6 s wall in all)." in out
