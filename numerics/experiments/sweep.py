"""The readings sweep: Table 1 over readings x tasks x seeds x d, as independent units of work on a
``dask.distributed`` cluster, every finished unit kept in a content-addressed results store
(``numerics.units``).

``run_sweep`` is the whole of it: the plan (every unit the grid needs), the execution (the units the store
lacks, trained on the cluster), the cells (each reading at each d assembled as ``runner.run`` returns it, with
its verdicts) and the tidy records.  The units are those of ``numerics.experiments.sweep_units``: a step-size
search per (reading, row, plan, d), a unit per reported seed of that plan, and a capacity ceiling per row.

A unit's spec holds only what its result depends on: the run configuration, the row, the plan, and the
reading *projected on the plan* (``sweep_units.relevant``: the three-phase schedule matters only to the
three-phase plan, joint GD's step convention only to joint GD, momentum and Adam constants only under their
optimizer).  Readings that differ only in fields a plan ignores share that plan's units, which is what makes a
product of readings affordable; every reading still gets every plan's result.  The spec also holds the package
version and the digest of the code the units import (``units.unit_code`` of ``sweep_units``): the verdict
rules and the presentation are not in it, so changing them re-renders from the store without training.

Searches and ceilings are submitted first, each seed unit when its search has finished; a unit that raised is
recorded with its error (its seeds are skipped, its row's claims refused) and the sweep goes on.
"""
from __future__ import annotations

import datetime
import math
import os
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from numerics import units
from numerics.experiments import protocol
from numerics.experiments import runner
from numerics.experiments import sweep_units
from numerics.experiments import verdicts as verdicts_module
from numerics.experiments.readings import Grid

QUICK_FILE = Path(__file__).with_name("readings_quick.toml")
"""The small readings file of ``occ-companion sweep --quick``, shipped with the package: a try of the sweep and
its dask path in about a minute of CPU (four readings at d = 8), not a result."""
UNIT_MODULE = sweep_units.__name__
"""The module of the training units: the root of their store keys."""


SKIP_DIVERGED = "every step size diverged on the tuning seeds"
SKIP_NOT_STORED = "its search is not in the store"
"""Why a seed unit is not run (``execute``), besides its search's failure ("search KEY failed")."""


def skip_causes(skipped: dict) -> dict:
    """The units not run (``units.Outcome.skipped``: key -> why) counted by cause: seed units whose search
    diverged at every step size, failed, or is not in the store, (in a render-only run) units that are not in
    the store themselves, and any other cause."""
    out = {"diverged": 0, "failed": 0, "not stored": 0, "render only": 0, "other": 0}
    for why in skipped.values():
        if why == SKIP_DIVERGED:
            out["diverged"] += 1
        elif why == SKIP_NOT_STORED:
            out["not stored"] += 1
        elif why == units.NOT_IN_STORE:
            out["render only"] += 1
        elif why.startswith("search ") and why.endswith(" failed"):
            out["failed"] += 1
        else:  # a cause this count does not know yet: counted, not a crash after hours of training
            out["other"] += 1
    return out


def _fn(kind: str) -> str:
    return f"{UNIT_MODULE}:{kind}"


# ------------------------------------------------------------------------------------------------
# the plan of a sweep


@dataclass
class Plan:
    """Every unit a sweep needs and how the cells use them.

    ``searches[key] = spec``; ``ceilings[key] = spec``; ``rows[(reading, d, row)] = {"task", "heads",
    "plans": {plan: search key of draw 0}, "draws": [{plan: search key} per tuning draw], "ceiling": key}``;
    seed units are known once their search is done."""

    grid: Grid
    searches: dict = field(default_factory=dict)
    ceilings: dict = field(default_factory=dict)
    rows: dict = field(default_factory=dict)
    version: str = ""
    code: str = ""
    extended: dict = field(default_factory=dict)
    """(row key, draw) -> the plans whose risks were bimodal on the row's seeds (empty: none), once every plan
    of the row's draw has its seeds (``execute``)."""

    def seeds(self, skey: str) -> list[int]:
        spec = self.searches[skey]
        cfg = replace(sweep_units.config(spec, spec["reading"], (spec["task"],)), seeds=self.grid.seeds,
                      seed_base=self.grid.config.get("seed_base", runner.Config.seed_base))
        return runner.reported_seeds(runner.Row.of(cfg, spec["task"], spec["heads"]))

    def row_seeds(self, skey: str, rkey: tuple, draw: int) -> list[int]:
        """The seeds of a search in a row's draw: its own (``seeds``), or, when some plan of that row's draw was
        bimodal (``extended``), ``bimodal_seeds`` of them from the seed base (as ``runner`` extends a row)."""
        if not self.extended.get((rkey, draw)):
            return self.seeds(skey)
        cfg = self.cell_config(rkey[0], rkey[1], (self.rows[rkey]["task"],))
        return list(range(cfg.seed_base, cfg.seed_base + cfg.bimodal_seeds))

    def seed_spec(self, skey: str, seed: int, chosen: dict) -> dict:
        """The seed unit of a search at its chosen step sizes: the same unit for every draw that chose them."""
        spec = {k: v for k, v in self.searches[skey].items() if k not in sweep_units.SEARCH_ONLY}
        return {**spec, "kind": "seed", "fn": _fn("seed"), "seed": seed, "chosen": chosen,
                "records_data": seed == self.seeds(skey)[0]}

    def cell_config(self, reading: str, d: int, tasks: tuple) -> runner.Config:
        """The run configuration of a cell (``readings.Grid.run_config``)."""
        return self.grid.run_config(d, tuple(dict.fromkeys(tasks)), reading).validate()

    def cells(self) -> list[tuple[str, int]]:
        return sorted({(r, d) for r, d, _ in self.rows}, key=lambda c: (c[1], list(self.grid.readings).index(c[0])))


def plan(grid: Grid, version: str | None = None, code: str | None = None) -> Plan:
    """The units of every cell of the grid (readings x d x rows x plans), deduplicated by spec; ``version``
    and ``code`` (default: the installed version, ``units.unit_code`` of the units' module) enter every key."""
    version, code = version or units.package_version(), code or units.unit_code(UNIT_MODULE)
    out = Plan(grid, version=version, code=code)
    for rname, d, tasks in grid.cells():
        reading = grid.readings[rname]
        cfg = out.cell_config(rname, d, tasks)
        cspec = sweep_units.config_spec(cfg)
        for name, task, heads in ((row.name, row.task, row.heads) for row in runner.rows(cfg)):
            cspec_c = {"kind": "ceiling", "fn": _fn("ceiling"), "version": version, "code": code, "config": cspec,
                       "task": task, "heads": heads}
            ckey = units.key_of(cspec_c)
            out.ceilings[ckey] = cspec_c
            draws = []
            for j in range(cfg.tuning_draws):
                plans = {}
                for p in runner.PLANS:
                    spec = {"kind": "search", "fn": _fn("search"), "version": version, "code": code,
                            "config": cspec, "reading": sweep_units.relevant(reading, p), "task": task,
                            "heads": heads, "plan": p,
                            **sweep_units.search_fields(cfg, runner.Row.of(cfg, task, heads), j)}
                    k = units.key_of(spec)
                    out.searches[k] = spec
                    plans[p] = k
                draws.append(plans)
            out.rows[(rname, d, name)] = {"task": task, "heads": heads, "plans": draws[0], "draws": draws,
                                          "ceiling": ckey}
    return out


# ------------------------------------------------------------------------------------------------
# the execution


COST = {"ICL": 10, "AND": 4, "SLR": 3, "OR": 2, "even_pairs": 1, "occurrence": 1}


def _priority(spec: dict) -> float:
    """Smaller alphabets first (their cells complete early, so a sweep stopped early has whole cells), and
    within one d the heavier units first (so the last units to finish are short)."""
    return -1000 * spec["config"]["d"] + COST[spec["task"]] * spec["heads"] + (100 if spec["kind"] == "search" else 0)


def execute(p: Plan, store: units.Store, connect: Callable[[], object] | None,
            progress: Callable[[dict], None] | None = None) -> units.Outcome:
    """Run every unit of the plan that the store lacks on the dask client that ``connect()`` returns (called
    once, at the first unit to train: a sweep whose units are all stored starts no cluster); see the module
    docstring.  ``progress(counts)`` is called after every unit.  With ``connect=None`` nothing is
    trained: the outcome holds what the store has, and every missing unit is listed in ``skipped``."""
    out = units.Outcome()
    needed: set = set()
    first_round = [True]  # stored searches get their seeds after every first-round unit is looked up or submitted

    def skip_seeds(skey, why):
        for s in p.seeds(skey):
            out.skipped[f"{skey}/{s}"] = why

    users: dict = {}         # seed unit key -> the search keys whose seed it is
    rows_of: dict = {}       # search key -> the (row, draw) pairs that use it
    for rkey, info in p.rows.items():
        for j, plans in enumerate(info["draws"]):
            for skey in plans.values():
                rows_of.setdefault(skey, []).append((rkey, j))

    def need_seeds(skey, seeds):
        chosen = out.results[skey]["search"]["chosen"]
        for s in seeds:
            spec = p.seed_spec(skey, s, chosen)
            k = units.key_of(spec)
            out.seed_keys[(skey, s)] = k
            users.setdefault(k, set()).add(skey)
            if k not in needed:   # another draw's search chose the same step sizes: one unit serves both
                needed.add(k)
                driver.need(k, spec)

    def seeds_of(skey):
        if out.results[skey]["search"]["chosen"] is None:
            skip_seeds(skey, SKIP_DIVERGED)
        else:
            need_seeds(skey, p.seeds(skey))
        for rkey, j in rows_of.get(skey, []):
            extend_if_bimodal(rkey, j)

    def extend_if_bimodal(rkey, j):
        """Once every plan of the row's draw has its seeds, the further seeds of a bimodal row
        (``Plan.row_seeds``)."""
        if (rkey, j) in p.extended:
            return
        plans = p.rows[rkey]["draws"][j]
        risks = {}
        for plan_name, skey in plans.items():
            if skey not in out.results:
                return
            if out.results[skey]["search"]["chosen"] is None:
                continue
            keys = [out.seed_keys.get((skey, s)) for s in p.seeds(skey)]
            if not all(k in out.results for k in keys):
                return
            risks[plan_name] = [out.results[k]["seed_result"]["test_risk"] for k in keys]
        cfg = p.cell_config(rkey[0], rkey[1], (p.rows[rkey]["task"],))
        bimodal = [pl for pl, r in risks.items() if len(r) < cfg.bimodal_seeds and protocol.bimodal(r)]
        p.extended[(rkey, j)] = bimodal
        if bimodal:
            for skey in (plans[pl] for pl in risks):
                need_seeds(skey, p.row_seeds(skey, rkey, j))

    to_come = {}   # search key -> its seed units, counted while the search is neither finished nor failed

    def on_done(key, spec):
        to_come.pop(key, None)
        if spec["kind"] == "search" and not first_round[0]:
            seeds_of(key)
        if spec["kind"] == "seed":
            for skey in users.get(key, ()):
                for rkey, j in rows_of.get(skey, []):
                    extend_if_bimodal(rkey, j)

    def on_failed(key, spec):
        to_come.pop(key, None)
        if spec["kind"] == "search":
            skip_seeds(key, f"search {key[:12]} failed")

    def not_trained(key, spec):
        if spec["kind"] == "search":
            skip_seeds(key, SKIP_NOT_STORED)

    driver = units.Driver(store, connect, out, on_done=on_done, on_failed=on_failed, not_trained=not_trained,
                          setup=sweep_units.setup, priority=_priority)
    for key, spec in list(p.ceilings.items()) + list(p.searches.items()):
        driver.need(key, spec)
    first_round[0] = False
    for skey in p.searches:
        if skey in out.results:
            seeds_of(skey)
    to_come.update((k, len(p.seeds(k))) for k in driver.outstanding() if k in p.searches)

    def total():
        """The units finished, submitted and still to come (the reported seeds of every search not yet back).
        It moves as the run learns its rows: up when a row is found bimodal (its further seeds), down when a
        draw's search chose the step sizes another draw did (they share the seed units)."""
        c = driver.counts()
        return c["done"] + c["reused"] + c["failed"] + c["skipped"] + c["submitted"] + sum(to_come.values())

    return driver.run(total, progress)


@dataclass
class Sweep:
    """What ``run_sweep`` did: the plan and the outcome of its units, the complete cells (each reading at each
    d: verdicts, lag measures, risks, step-size searches, rows not assembled) with their results, the cells with units missing
    from the store, the tidy records (``TIDY_COLUMNS``) and the store's run log (this grid's invocations)."""

    plan: Plan
    outcome: units.Outcome
    cells: list = field(default_factory=list)
    results: dict = field(default_factory=dict)   # (reading, d) -> the cell's results (``cell_results``)
    incomplete: list = field(default_factory=list)
    tidy: list = field(default_factory=list)
    runs: list = field(default_factory=list)
    run_config: dict = field(default_factory=dict)
    """The run configuration of every cell (``sweep_units.config_spec`` at the grid's first d, without d), with
    the seed ids, tuning draws and bimodal seeds (``SEED_FIELDS``), which the units name themselves."""
    code: str = ""
    """The provenance digest of the checkout's code (``units.code_digest``), as the run log records it."""


SEED_FIELDS = ("seed_base", "tuning_seed_base", "tuning_draws", "bimodal_seeds")
"""The run-configuration fields of a sweep's seeds: recorded with its run configuration."""


def restricted(grid: Grid, d: tuple[int, ...] | None) -> Grid:
    """The grid at the alphabet sizes ``d`` only (all of its own with None); the limits that name none of
    them are dropped."""
    if d is None:
        return grid
    keep = tuple(x for x in grid.d if x in d)
    return replace(grid, d=keep, limits=tuple(lim for lim in grid.limits if set(lim.d) & set(keep)))


def run_sweep(grid: Grid, store: units.Store, cluster: units.Cluster,
              progress: Callable[[dict], None] | None = None, *, d: tuple[int, ...] | None = None,
              train: bool = True, command: list | None = None) -> Sweep:
    """The sweep of ``grid`` (at the alphabet sizes ``d`` only, when given): plan, train on ``cluster`` what
    ``store`` lacks (with ``train`` False nothing is trained, and the cells whose units are missing are listed
    as incomplete), then the cells and the tidy records.  The cluster is connected at the first unit to train
    and closed at the end.  The invocation is logged in the store (``command`` and the cluster's address),
    its start before any unit and its end however the run ends; on Ctrl-C the finished units are in the store
    and KeyboardInterrupt goes on up.  ``progress(counts)`` is called after every unit."""
    grid = restricted(grid, d)
    p = plan(grid)
    started = time.time()
    run = {"started": datetime.datetime.fromtimestamp(started, datetime.timezone.utc).isoformat(timespec="seconds"),
           "run_id": uuid.uuid4().hex, "pid": os.getpid(), "command": command or [], "readings_sha256": grid.sha256,
           "version": p.version, "code": units.code_digest(), "unit_code": p.code, "d": list(grid.d),
           "scheduler": cluster.scheduler or "LocalCluster"}
    store.log_run(run | {"event": "start"})  # SIGKILL or a crash leaves this line alone
    outcome = None
    try:
        outcome = execute(p, store, cluster.connect if train else None, progress)
    finally:
        cluster.close()
        store.log_run(run | {"event": "end", "wall_s": time.time() - started, "completed": outcome is not None,
                             "trained": None if outcome is None else len(outcome.trained),
                             "trained_cpu_s": None if outcome is None else outcome.cpu_s})
    first = grid.run_config(grid.d[0], grid.tasks)
    out = Sweep(p, outcome, code=run["code"],
                run_config={**{k: v for k, v in sweep_units.config_spec(first).items() if k != "d"},
                            **{k: getattr(first, k) for k in SEED_FIELDS}})
    for reading, dd in p.cells():
        res = cell_results(p, outcome, reading, dd)
        not_run = sorted(name for name, why in res["missing_rows"].items() if any(w.endswith("not run") for w in why))
        if not_run:  # units missing from the store (a render-only run, or a sweep stopped early)
            out.incomplete.append({"reading": reading, "d": dd, "rows_missing": not_run})
            continue
        verdicts = cell_verdicts(res)
        for v in verdicts:
            v["config"] = configuration(p, reading, dd, v, res["missing_rows"])
        lag = {name: {m: {k: row["lag"][m][k] for k in ("t_half_att", "t_half_out", "ratio", "resolution")}
                      for m in row["lag"]} for name, row in res["rows"].items()}
        risks = {name: {pl: pr["risk"] for pl, pr in row["plans"].items()} for name, row in res["rows"].items()}
        out.cells.append({"reading": reading, "d": dd, "verdicts": verdicts, "lag": lag, "risk": risks,
                          "plans": search_record(res), "missing_rows": res["missing_rows"]})
        out.results[(reading, dd)] = res
        out.tidy += tidy_rows(res, reading, dd)
    out.runs = [r for r in store.runs() if counts_for(r, grid, p, out.code)]
    return out


def counts_for(run: dict, grid: Grid, p: Plan, code: str) -> bool:
    """Whether a logged invocation counts in the cost of ``grid``'s sweep: it ran the same units' code
    (``same_units``) at this version, on this readings file or on another one that shares one of its alphabet
    sizes.  Unit keys do not depend on the readings file, so a run of a restriction of this grid (``--d``, or
    ``[[limit]]`` entries) trained units this one reuses; a run of another file at a shared d is counted too,
    whether or not its units are this grid's, and a grid at other sizes only (the quick file's) is not."""
    if run.get("version") != p.version or not same_units(run, p, code):
        return False
    return run.get("readings_sha256") == grid.sha256 or bool(set(run.get("d") or ()) & set(grid.d))


def same_units(run: dict, p: Plan, code: str) -> bool:
    """Whether a logged invocation ran this plan's units: the digest of the code its units import
    (``unit_code``) is this plan's, so a checkout that changed only the verdict rules or the pages still counts
    the run that trained them; a record without ``unit_code`` is matched on the whole checkout's digest."""
    if "unit_code" in run:
        return run["unit_code"] == p.code
    return run.get("code") == code


def search_record(results: dict) -> dict:
    """{row: {plan: chosen step sizes, grid edges, insensitive, and the risk per length bucket where measured}}
    of a cell's results: what its pages say of each plan that the tidy table (one record per reported seed)
    cannot, for a plan without seeds has no record there, whether the search was step-insensitive is no
    seed's metric, and the length buckets are summaries over seeds."""
    return {name: {pl: {"chosen": pr["chosen"], "edge": list(pr["search"]["edge"]),
                        "insensitive": bool(pr["search"]["insensitive"]),
                        **({"length_risk": pr["length_risk"]} if pr.get("length_risk") else {})}
                   for pl, pr in row["plans"].items()} for name, row in results["rows"].items()}


def survey(grid: Grid, store: units.Store, d: tuple[int, ...] | None = None) -> dict:
    """The size of the sweep of ``grid`` (at ``d`` only, when given) without running it: cells, rows,
    searches, ceilings, seeds (the seed units: one per reported seed of each search, fewer when a search
    finds no step size), how many of the searches and ceilings the store holds, and what is left to train
    with its estimated CPU (``estimate``)."""
    p = plan(restricted(grid, d))
    held = {k: store.get(k, s) for k, s in {**p.ceilings, **p.searches}.items()}
    out = {"cells": len(p.cells()), "rows": len(p.rows), "searches": len(p.searches),
           "stored": sum(v is not None for v in held.values()), "ceilings": len(p.ceilings),
           "seeds": sum(len(p.seeds(k)) for k in p.searches)}
    return out | estimate(p, store, held)


BUDGET_FIELDS = ("optimizer", "budget", "max_steps")
"""The reading's fields that set how long a unit trains, which the finer cost class adds (``cost_class``)."""


def cost_class(spec: dict, fine: bool = True) -> tuple:
    """What a unit's CPU is estimated from: the units of the same kind, task, heads, plan and d, and (``fine``)
    the same optimizer, budget rule and step cap (a ceiling has no reading: its class is the same either way)."""
    coarse = (spec["kind"], spec["task"], spec["heads"], spec.get("plan"), spec["config"]["d"])
    reading = spec.get("reading") or {}
    return coarse + tuple(reading.get(f) for f in BUDGET_FIELDS) if fine else coarse


def growth_in_d(means: dict, d: int) -> float | None:
    """A class's mean CPU at ``d`` from its means at other d (``means``: d -> mean CPU): the power law in d
    through the two largest stored d below ``d``, its exponent at least 0 (a unit's work does not shrink as
    d grows; a falling pair of means is noise), None with fewer than two (or a mean that is not positive)."""
    below = sorted(x for x in means if x < d)
    if len(below) < 2:
        return None
    d0, d1 = below[-2:]
    m0, m1 = means[d0], means[d1]
    if m0 <= 0 or m1 <= 0:
        return None
    return m1 * (d / d1) ** max(0.0, math.log(m1 / m0) / math.log(d1 / d0))


def estimate(p: Plan, store: units.Store, held: dict) -> dict:
    """The units of plan ``p`` left to train and their estimated CPU: each one's the mean CPU of the stored
    units of its ``cost_class`` trained by this code and version, of the coarser class where the finer has
    none (``coarse``: how many; both in ``estimate_cpu_s``), else extrapolated from the same class at smaller
    d (``growth_in_d``, the finer class first; ``extrapolated``: how many, ``extrapolated_cpu_s``: their
    CPU), none where neither is stored (``unestimated``).  ``held`` maps every search and ceiling key to its
    stored entry or None.  A stored search's missing seed units are counted once each (two tuning draws that
    chose the same step sizes share one); an unstored one's are its reported seeds, an upper bound where
    draws will share and a lower bound where a bimodal row takes more."""
    cpu: dict = {}
    for entry in store.entries():
        spec = entry.get("spec") or {}
        if spec.get("code") == p.code and spec.get("version") == p.version and "config" in spec:
            for fine in (True, False):
                cpu.setdefault(cost_class(spec, fine), []).append(float(entry.get("cpu_s", 0.0)))
    mean = {k: sum(v) / len(v) for k, v in cpu.items()}
    by_d: dict = {}   # a class without its d -> {d: mean}
    for k, m in mean.items():
        by_d.setdefault(k[:4] + k[5:], {})[k[4]] = m
    todo = {"searches": 0, "ceilings": 0, "seeds": 0}
    out = {"estimate_cpu_s": 0.0, "extrapolated_cpu_s": 0.0, "coarse": 0, "extrapolated": 0, "unestimated": 0}

    def add(spec, n=1):
        todo[{"search": "searches", "ceiling": "ceilings", "seed": "seeds"}[spec["kind"]]] += n
        fine, coarse = cost_class(spec), cost_class(spec, fine=False)
        how, m = "fine", mean.get(fine)
        if m is None:
            how, m = "coarse", mean.get(coarse)
        if m is None:
            d = spec["config"]["d"]
            how, m = "extrapolated", next((g for g in (growth_in_d(by_d.get(c[:4] + c[5:], {}), d)
                                                       for c in (fine, coarse)) if g is not None), None)
        if m is None:
            how = "unestimated"
        else:
            out["extrapolated_cpu_s" if how == "extrapolated" else "estimate_cpu_s"] += n * m
        if how != "fine":
            out[how] += n

    for k, spec in p.ceilings.items():
        if held[k] is None:
            add(spec)
    missing_seeds: dict = {}
    for k, spec in p.searches.items():
        entry = held[k]
        if entry is None:
            add(spec)
            add({**spec, "kind": "seed"}, len(p.seeds(k)))
            continue
        chosen = entry["result"]["search"]["chosen"]
        if chosen is None:  # diverged at every step size: its seeds are not run
            continue
        for s in p.seeds(k):
            sspec = p.seed_spec(k, s, chosen)
            key = units.key_of(sspec)
            if key not in missing_seeds and store.get(key, sspec) is None:
                missing_seeds[key] = sspec
    for sspec in missing_seeds.values():
        add(sspec)
    return {"to_train": todo, **out}


# ------------------------------------------------------------------------------------------------
# from units to cells, verdicts and the tidy table


def cell_results(p: Plan, out: units.Outcome, reading: str, d: int) -> dict:
    """The results dict of one cell (one reading at one d), as ``runner.run`` returns, from the units: the rows
    of tuning draw 0, and under ``"tuning_draws"`` a results dict per further draw; rows with a failed or
    missing unit (in any draw) are left out and listed under ``missing_rows`` with why."""
    r = p.grid.readings[reading]
    infos = {name: info for (rn, dd, name), info in p.rows.items() if (rn, dd) == (reading, d)}
    n_draws = max((len(info["draws"]) for info in infos.values()), default=1)
    drawn = [{} for _ in range(n_draws)]
    missing: dict = {}
    for name, info in infos.items():
        why = []
        for j, plans in enumerate(info["draws"]):
            row, row_why = _cell_row(p, out, reading, d, name, info, plans, j)
            why += [w if j == 0 else f"draw {j}: {w}" for w in row_why]
            if row is not None:
                row["tuning_draw"] = j
                drawn[j][name] = row
        if why:
            missing[name] = why
            for rows_j in drawn:
                rows_j.pop(name, None)
    cfg = p.cell_config(reading, d, tuple(info["task"] for info in infos.values()))
    head = {"suite": "occurrence-companion", "version": p.version, "config": cfg.to_dict(), "reading": r.to_dict(),
            "decision_rules": verdicts_module.rules()}
    for name, row in drawn[0].items():
        row["tuning_draw_chosen"] = [{pl: rows_j[name]["plans"][pl]["chosen"] for pl in row["plans"]}
                                     for rows_j in drawn]
    return {**head, "rows": drawn[0], "missing_rows": missing,
            "tuning_draws": [{**head, "tuning_draw": j, "rows": rows_j} for j, rows_j in enumerate(drawn) if j]}


def _cell_row(p: Plan, out: units.Outcome, reading: str, d: int, name: str, info: dict, plans: dict, draw: int):
    """One row of a cell on tuning draw ``draw`` (``plans``: each plan's search key), and why it is missing.  A
    search that the draws share (``sweep_units.search_fields``) says which draw's it is (``reused_from_draw``)."""
    why = []
    found, per_plan, steps = {}, {}, 0
    for plan_name, skey in plans.items():
        if skey not in out.results:
            why.append(f"{plan_name} search " + ("failed: " + out.failed[skey]["error"] if skey in out.failed
                                                 else "not run"))
            continue
        found[plan_name] = out.results[skey]["search"]
        if p.searches[skey]["draw"] != draw:
            found[plan_name] = {**found[plan_name], "reused_from_draw": p.searches[skey]["draw"]}
        steps += out.results[skey]["steps"]
        recs = []
        if found[plan_name]["chosen"] is not None:
            for s in p.row_seeds(skey, (reading, d, name), draw):
                k = out.seed_keys.get((skey, s))
                if k is None or k not in out.results:
                    why.append(f"{plan_name} seed {s} " + ("failed: " + out.failed[k]["error"]
                                                          if k in out.failed else "not run"))
                    continue
                recs.append(out.results[k]["seed_result"])
        per_plan[plan_name] = recs
    if info["ceiling"] not in out.results:
        why.append("capacity ceiling " + ("failed: " + out.failed[info["ceiling"]]["error"]
                                          if info["ceiling"] in out.failed else "not run"))
    if why:
        return None, why
    cfg = p.cell_config(reading, d, (info["task"],))
    data = {}
    for plan_name, skey in plans.items():
        k = out.seed_keys.get((skey, p.seeds(skey)[0]))
        if k in out.results and out.results[k]["data"]:
            data = out.results[k]["data"]
            break
    if not data:
        data = {"p": runner.tasks_module.length_parameter(info["task"], d)}
    seeds = next((p.row_seeds(skey, (reading, d, name), draw) for skey in plans.values()), None)
    row = runner.assemble_row(runner.Row.of(cfg, info["task"], info["heads"]), found, per_plan,
                              out.results[info["ceiling"]]["ceiling"], data, seeds)
    row["tuning_steps"] = steps
    row["bimodal_extended"] = p.extended.get(((reading, d, name), draw), [])
    return row, []


def canonical_spec(spec: dict) -> dict:
    """A unit's spec up to the identities between rows, so that units computing the same thing compare equal:
    OR at d is occurrence at d/2 (both lengths have p = 2/(d - 2) and each token is marked with probability
    2/d; from the symmetric zero start every unmarked symbol keeps the same weights, so the output depends
    only on the length and the number of marked tokens, whose law is the same: the risks and t_half agree, only
    the scale of the chosen step sizes differs), and even pairs does not depend on d (its tokens and length law
    do not involve it)."""
    cfg = dict(spec["config"])
    task = spec["task"]
    if task == "OR" and cfg["d"] % 2 == 0:
        task, cfg["d"] = "occurrence", cfg["d"] // 2
    elif task == "even_pairs":
        cfg["d"] = None
    return {**spec, "task": task, "config": cfg}


LAG_CLAIMS = ("attention lags output", verdicts_module.NEAR_ONE, verdicts_module.LEAST)
"""Claims judged on joint GD alone (``verdicts.lag_verdict`` and the even-pairs claims)."""


CONFIGURATION_RULE = 2
"""What ``configuration`` digests (recorded with a sweep's verdicts): 2 adds, to the units' canonical specs,
each draw's seeds and the rows missing from the cell; a record of another rule counts over readings."""


def configuration(p: Plan, reading: str, d: int, verdict: dict, missing: dict | None = None) -> str:
    """The identity of the evidence a verdict of the cell (reading, d) rests on: the digest of the claim, of
    the canonical specs (``canonical_spec``) of the units it reads, of the seeds each tuning draw of their
    row reported (``Plan.row_seeds``: a row found bimodal takes more seeds for every plan, whichever plan was
    bimodal) and of the rows it reads that the cell lacks (``missing``: the cell's ``missing_rows``, whose
    claims are refused whichever unit failed).  A lag verdict reads joint GD's units only (and "least lag"
    those of every row of the cell), so readings that differ in what joint GD ignores (the three-phase
    schedule) give one configuration unless they extend the row's seeds differently or lack the row; a
    comparison reads its plans', output-only's and joint GD's (its margin is a share of their difference) and
    the ceiling's units.  Call it after ``execute``, which finds the bimodal rows."""
    info = p.rows[(reading, d, verdict["row"])]
    claim = verdict["claim"]
    missing = missing or {}
    if claim.startswith(verdicts_module.LEAST):
        specs = sorted((_evidence(p, rkey, "joint") for rkey in p.rows if rkey[:2] == (reading, d)),
                       key=units.canonical)
        lacking = sorted(missing)
    else:
        lacking = [verdict["row"]] if verdict["row"] in missing else []
        if claim.startswith(LAG_CLAIMS):
            specs = [_evidence(p, (reading, d, verdict["row"]), "joint")]
        else:
            plans = sorted(set(verdict.get("plans") or []) | {"output_only", "joint"})  # the margin reads both
            specs = [_evidence(p, (reading, d, verdict["row"]), q) for q in plans if q in info["plans"]]
            specs.append(canonical_spec(p.ceilings[info["ceiling"]]))
    return units.key_of({"claim": claim, "units": specs, "missing": lacking})[:16]


def _evidence(p: Plan, rkey: tuple, plan: str) -> dict:
    """What a verdict reads of one plan of a row: its search's canonical spec and each draw's seeds."""
    draws = p.rows[rkey]["draws"]
    return {"search": canonical_spec(p.searches[draws[0][plan]]),
            "seeds": [p.row_seeds(draw[plan], rkey, j) for j, draw in enumerate(draws)]}


REASONS = (("edge step", ("grid edge",)), ("divergence", ("diverged", "unstable")),
           ("capacity ceiling", ("representable", "capacity", "ceiling")),
           ("non-convergence", ("not converged",)), ("training failed", ("failed", "not run")))
"""Categories of refusal reasons (first match in this order): each reason string is searched for the words."""


def reason_category(reasons: list[str]) -> str:
    """The category of a refused verdict's first reason (``REASONS``; "other" when none matches)."""
    for reason in reasons:
        for cat, words in REASONS:
            if any(w in reason for w in words):
                return cat
    return "other"


CAUSES = (("capacity", ("representable", "capacity", "ceiling")), ("three-phase", ("three phase", "three_phase")),
          ("joint", ("joint",)), ("output-only", ("output only", "output_only")),
          ("attention-only", ("attention only", "attention_only")), ("measure", ("measure", "t_half")),
          ("other rows", ("other row",)))
"""Who caused a refusal (first match in this order, on the start of the first reason): the capacity ceiling,
a plan, a lag measure that is missing or undefined, or the other rows a comparison across rows needs."""


def refusal_cause(reasons: list[str]) -> str:
    """Which plan (or the capacity ceiling, a missing measure) caused a refused verdict: its first reason's
    subject (``CAUSES``; "other" when none matches)."""
    for reason in reasons[:1]:
        head = reason.removeprefix("training failed: ").split(":")[0]
        for cause, words in CAUSES:
            if any(w in head for w in words):
                return cause
    return "other"


def cell_verdicts(results: dict) -> list[dict]:
    """``verdicts.assess`` on a cell, with every claim of a row that could not be assembled refused; each
    refused verdict records its reason's category and its cause (``refusal_cause``)."""
    out = verdicts_module.assess(results) if results["rows"] else []
    for name, why in results["missing_rows"].items():
        row = {"name": name, "task": name.split(" ")[0], "lag": {}, "rows": {}}
        for claim in claims_of(row["task"]):
            plans = (["joint"] if claim.startswith(LAG_CLAIMS) else ["attention_only", "three_phase"]
                     if claim == verdicts_module.COMPETITIVE else ["three_phase", "joint"])
            out.append({"row": name, "claim": claim, "plans": plans, "verdict": "refused",
                        "reasons": ["training failed: " + w for w in why], "evidence": ""})
    for v in out:
        if v["verdict"] == "refused":
            v["category"] = reason_category(v["reasons"])
            v["cause"] = refusal_cause(v["reasons"])
    return out


def claims_of(task: str) -> list[str]:
    """The claims the paper makes about a task's row (as ``verdicts.assess`` names them)."""
    out = []
    if task in verdicts_module.PAPER_MATCH:
        out.append("three-phase matches joint GD")
    if task == "AND":
        out += ["three-phase falls short of joint GD", "attention-only is competitive (matches three-phase)"]
    out += [f"attention lags output under joint GD ({m})" for m in verdicts_module.MEASURES if m != "alignment" or task != "AND"]
    return out


TIDY_COLUMNS = ("reading", "d", "row", "task", "heads", "plan", "seed", "test_risk", "test_acc", "val_risk",
                "test_acc_tied", "steps", "converged", "capped", "diverged", "unstable", "lr_out", "lr_att", "edge",
                "k1", "k2", "budget", "max_steps", "joint_steps", "optimizer",
                "lag_displacement", "lag_function", "lag_alignment",
                "t_half_att_displacement", "t_half_out_displacement", "t_half_att_function", "t_half_out_function",
                "ceiling_lower", "ceiling_upper", "best_risk", "truncation_bound", "rounding_bound")


def tidy_rows(results: dict, reading: str, d: int) -> list[dict]:
    """One record per (reading, row, plan, seed, d) of a cell, with every metric (``TIDY_COLUMNS``)."""
    out = []
    r = results["reading"]
    for name, row in results["rows"].items():
        c = row.get("ceiling") or {}
        for plan_name, pr in row["plans"].items():
            chosen = pr["chosen"] or {}
            for rec in pr["seeds"]:
                lag = rec.get("lag", {})
                rec_out = {"reading": reading, "d": d, "row": name, "task": row["task"], "heads": row["heads"],
                           "plan": plan_name, "seed": rec["seed"], "test_risk": rec["test_risk"],
                           "test_acc": rec["test_acc"], "test_acc_tied": rec.get("test_acc_tied"),
                           "val_risk": rec["val_risk"], "steps": rec["steps"],
                           "converged": rec["converged"], "capped": rec["capped"], "diverged": rec["diverged"],
                           "unstable": rec["unstable"], "lr_out": chosen.get("out"), "lr_att": chosen.get("att"),
                           "edge": ";".join(pr["search"]["edge"]) or None,
                           "k1": r["k1"], "k2": str(r["k2"]), "budget": r["budget"], "max_steps": r["max_steps"],
                           "joint_steps": r["joint_steps"], "optimizer": r["optimizer"],
                           "ceiling_lower": c.get("lower"), "ceiling_upper": c.get("upper"),
                           "best_risk": c.get("best_risk"), "truncation_bound": rec.get("truncation_bound"),
                           "rounding_bound": rec.get("rounding_bound")}
                for m in verdicts_module.MEASURES:
                    rec_out[f"lag_{m}"] = lag.get(m, {}).get("ratio")
                for m in ("displacement", "function"):
                    rec_out[f"t_half_att_{m}"] = lag.get(m, {}).get("t_half_att")
                    rec_out[f"t_half_out_{m}"] = lag.get(m, {}).get("t_half_out")
                out.append({k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                            for k, v in rec_out.items()})
    return out
