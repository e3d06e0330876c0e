"""The training units of the readings sweep (``numerics.experiments.sweep``), one function per kind, each run
on a worker on its spec (``numerics.units.run_unit``):

* ``search``: one plan's step-size search for one row at one d under one reading on one tuning draw
  (``runner.search`` on the draw's tuning seeds);
* ``seed``: that plan trained on one reported seed at the chosen step sizes and measured (``runner.report_seed``);
* ``ceiling``: the row's capacity ceiling (``capacity.ceiling``; it depends on neither reading nor seed).

This module is the root of the units' store keys (``numerics.units.unit_code``): what it imports, transitively,
is the code their results depend on, so it imports the runner and nothing of the verdicts or the presentation.
"""
from __future__ import annotations

from dataclasses import replace

from numerics.experiments import engine
from numerics.experiments import runner
from numerics.experiments.protocol import Reading

PROJECTED = {"three_phase": ("joint_steps",), "joint": ("k1", "k2", "phase2_cap"),
             "output_only": ("k1", "k2", "phase2_cap", "joint_steps"),
             "attention_only": ("k1", "k2", "phase2_cap", "joint_steps")}
"""Reading fields a plan does not use (``relevant``; the constants of the optimizers not chosen, and the fixed
learning rate under the searched step rule, are ignored too)."""
CONFIG_FIELDS_OUT = ("tasks", "seeds", "and_heads", "jobs", "reading", "seed_base", "tuning_seed_base", "tuning_draws",
                     "bimodal_seeds")
"""Config fields that are not part of a unit's spec (the unit names its own row, seed and reading; a search
names its tuning draw and the first tuning id, ``search_fields``; how many seeds and draws a cell runs decides
which units it needs, not what any of them computes)."""


def search_fields(cfg: runner.Config, row: runner.Row, draw: int) -> dict:
    """What a search unit's spec holds of its tuning seeds: the draw and the first tuning id.  A search that
    no tuning seed enters (an exact row: its data and zero start are the same on every seed; the fixed step
    rule: nothing is searched) is draw 0's on every draw, so the draws share its unit."""
    same = row.exact or cfg.reading.step_rule == "fixed"
    return {"draw": 0 if same else draw, "tuning_seed_base": cfg.tuning_seed_base}


SEARCH_ONLY = ("draw", "tuning_seed_base")
"""The fields of a search spec that its seed units leave out: a seed trained at the same step sizes is the same
unit whichever draw chose them."""


def relevant(reading: Reading, plan: str) -> dict:
    """The reading's fields that the plan's training depends on; the others set to the protocol's defaults
    (and the name dropped), so that readings differing only there share the plan's units."""
    base = Reading()
    out = reading.to_dict()
    out.pop("name")
    ignored = list(PROJECTED[plan])
    if reading.optimizer != "momentum":
        ignored.append("momentum")
    if reading.optimizer != "adam":
        ignored += ["adam_beta1", "adam_beta2", "adam_eps"]
    if reading.step_rule != "fixed":
        ignored.append("fixed_lr")
    for f in ignored:
        out[f] = getattr(base, f)
    return out


def config_spec(cfg: runner.Config) -> dict:
    """The run configuration's fields that enter a unit's spec."""
    return {k: v for k, v in cfg.to_dict().items() if k not in CONFIG_FIELDS_OUT}


def config(spec: dict, reading: dict, tasks=None) -> runner.Config:
    """The run configuration of a unit: its spec's configuration under ``reading``, with ``tasks``."""
    cfg = replace(runner.Config.from_dict(dict(spec["config"])), reading=Reading.from_dict({**reading, "name": "unit"}))
    return cfg if tasks is None else replace(cfg, tasks=tasks)


def setup() -> None:
    """The worker's preparation before a unit: the engine's temporaries kept on the heap
    (``engine.keep_temporaries_on_heap``; where memory comes from does not enter the arithmetic)."""
    engine.keep_temporaries_on_heap()


def search(spec: dict) -> dict:
    cfg = replace(config(spec, spec["reading"], (spec["task"],)), tuning_seed_base=spec["tuning_seed_base"])
    found = runner.search(runner.Row.of(cfg, spec["task"], spec["heads"]), plans=(spec["plan"],), draw=spec["draw"])
    return {"search": found[spec["plan"]], "steps": found["_steps"]}


def seed(spec: dict) -> dict:
    cfg = config(spec, spec["reading"], (spec["task"],))
    row = runner.Row.of(cfg, spec["task"], spec["heads"])
    res = runner.report_seed(row, spec["seed"], {spec["plan"]: spec["chosen"]})
    info = runner.make_data(row, spec["seed"]).info if spec["records_data"] else {}
    return {"seed_result": res[spec["plan"]], "data": {k: v for k, v in info.items() if not hasattr(v, "shape")}}


def ceiling(spec: dict) -> dict:
    cfg = config(spec, Reading().to_dict(), (spec["task"],))
    return {"ceiling": runner.ceiling_of(runner.Row.of(cfg, spec["task"], spec["heads"]))}
