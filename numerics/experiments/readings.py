"""The readings grid of a sweep, read from a TOML file (the default ships as ``readings.toml`` beside this module).

A file has ``[sweep]`` (tasks, reported seeds, alphabet sizes d), optional ``[config]`` (run-configuration
fields of ``runner.Config`` other than tasks, d, seeds and jobs: batch, validation and test sizes, ...), ``[base]`` (Reading fields set for every
reading), ``[axes.<axis>]`` tables (each value a name and the Reading fields it sets; the readings are the
Cartesian product of the axes, in file order, named by joining the value names with "/") and optional
``[[limit]]`` entries (at the listed d, only the listed readings and/or tasks run), and optional
``[readings.<name>]`` tables: named readings outside the product (the Reading fields each sets on top of
[base]; a name without "/", so it is never a product's), run after the product's readings.  Every error names the file
and the entry, before any work; sizes are bounded by the limits of ``occ-companion table1``'s flags (``MAX_D``,
``MAX_SEEDS``, ``MAX_STEPS``) and the number of readings by ``MAX_READINGS``.
"""
from __future__ import annotations

import hashlib
import itertools
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from theory.validation import SettingError

from numerics.experiments import runner
from numerics.experiments import tasks as tasks_module
from numerics.experiments.protocol import Reading

CONFIG_FIELDS = ("and_heads", "init_scale", "batch", "val_size", "test_size", "mass_tol", "len_tol", "curve_points",
                 "lag_points", "icl_loss", "even_pairs_embedding", "attention_only_readout",
                 "attention_only_readout_scale", "length_multiples", "length_test_size", "kernel", "seed_base",
                 "tuning_seed_base", "tuning_draws", "bimodal_seeds")
"""The run-configuration fields a readings file may set in [config] (the rest come from the cells)."""

MAX_D = 400
"""Largest alphabet size a readings file may name: table1's --d limit (``app.commands.table1.MAX_D``, which a
test holds equal): the engine is benchmarked to d = 200, and exact populations take minutes to build beyond a
few hundred."""
MAX_SEEDS = 1000
"""Largest [sweep] seeds and reading tuning_seeds: table1's --seeds and --tuning-seeds limit (each seed trains
every plan of every row again)."""
MAX_STEPS = 10**6
"""Largest reading max_steps and phase2_cap: table1's --max-steps limit (every plan of every seed keeps a
snapshot per evaluation; one plan of one seed at this cap takes minutes)."""
READING_LIMITS = (("max_steps", MAX_STEPS, "--max-steps"), ("phase2_cap", MAX_STEPS, "--max-steps"),
                  ("k1", MAX_STEPS, "--k1"), ("tuning_seeds", MAX_SEEDS, "--tuning-seeds"))
"""(reading field, largest value, the table1 flag whose limit it is): checked on every reading of a file
(k2 is below max_steps by the reading's own check)."""
MAX_READINGS = 1000
"""Largest number of readings (the product of the axes' sizes), checked before the product is built."""

DEFAULT_FILE = Path(__file__).with_name("readings.toml")
DEFAULT_READING = Reading()
"""The reading whose fields (besides its name) are the protocol's defaults is the sweep's *default reading*."""


@dataclass(frozen=True)
class Limit:
    d: tuple[int, ...]
    readings: tuple[str, ...] | None = None
    tasks: tuple[str, ...] | None = None


@dataclass
class Grid:
    """A parsed readings file: the readings in order, the tasks, seeds and d, the limits, and the file."""

    readings: dict[str, Reading]
    tasks: tuple[str, ...]
    seeds: int
    d: tuple[int, ...]
    limits: tuple[Limit, ...] = ()
    path: str = ""
    text: str = ""
    axes: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    @property
    def default(self) -> str | None:
        """The name of the default reading (the protocol's defaults), if the grid has it."""
        ref = {**DEFAULT_READING.to_dict(), "name": None}
        return next((n for n, r in self.readings.items() if {**r.to_dict(), "name": None} == ref), None)

    def run_config(self, d: int, tasks: tuple[str, ...], reading: str | None = None) -> runner.Config:
        """The run configuration of a cell: ``runner.Config`` with [config], these tasks, d, the seeds and the
        reading (the protocol's default when None)."""
        kw = {**self.config, "tasks": tuple(tasks), "d": d, "seeds": self.seeds}
        if reading is not None:
            kw["reading"] = self.readings[reading]
        return runner.Config(**{k: tuple(v) if isinstance(v, list) else v for k, v in kw.items()})

    def cells(self) -> list[tuple[str, int, tuple[str, ...]]]:
        """(reading name, d, tasks) of every cell the limits allow, in file order (d outermost)."""
        out = []
        for d in self.d:
            lims = [lim for lim in self.limits if d in lim.d]
            for name in self.readings:
                tasks = self.tasks
                if any(lim.readings is not None and name not in lim.readings for lim in lims):
                    continue
                for lim in lims:
                    if lim.tasks is not None:
                        tasks = tuple(t for t in tasks if t in lim.tasks)
                tasks = tuple(t for t in tasks if d >= tasks_module.MIN_D[t])
                if tasks:
                    out.append((name, d, tasks))
        return out

    def to_dict(self) -> dict:
        return {"path": self.path, "sha256": self.sha256, "text": self.text, "tasks": list(self.tasks),
                "seeds": self.seeds, "d": list(self.d), "readings": {n: r.to_dict() for n, r in self.readings.items()},
                "limits": [{"d": list(lim.d), "readings": None if lim.readings is None else list(lim.readings),
                            "tasks": None if lim.tasks is None else list(lim.tasks)} for lim in self.limits],
                "axes": self.axes, "config": self.config, "default": self.default}


def with_config(grid: Grid, changes: dict) -> Grid:
    """The grid with run-configuration fields changed (``CONFIG_FIELDS``), checked as the file's own [config]
    is, for every reading at every d (SettingError before any work: overlapping seed ids, say)."""
    from dataclasses import replace

    unknown = set(changes) - set(CONFIG_FIELDS)
    if unknown:
        raise SettingError(f"unknown run-configuration fields {', '.join(sorted(unknown))}")
    out = replace(grid, config={**grid.config, **changes})
    for d in out.d:
        for name in out.readings:
            out.run_config(d, out.tasks, name).validate()
    return out


def load(path: str | Path | None = None) -> Grid:
    """Parse and check a readings file (the shipped default when ``path`` is None)."""
    p = Path(path) if path is not None else DEFAULT_FILE
    try:
        text = p.read_text()
    except OSError as exc:
        raise SettingError(f"cannot read readings file {p}: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SettingError(f"readings file {p} is not valid TOML: {exc}") from None
    return parse(data, str(p), text)


def _int_list(value, what: str, low: int = 1, high: int | None = None, why: str = "") -> tuple[int, ...]:
    if not isinstance(value, list) or not value or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= low for v in value):
        raise SettingError(f"{what} must be a non-empty list of integers >= {low}, got {value!r}")
    above = [v for v in value if high is not None and v > high]
    if above:
        raise SettingError(f"{what} = {above[0]} is above the largest, {high}{' (' + why + ')' if why else ''}")
    if len(set(value)) != len(value):
        raise SettingError(f"{what} lists a value twice: {value!r}")
    return tuple(value)


def _name_list(value, what: str, known) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise SettingError(f"{what} must be a non-empty list of names, got {value!r}")
    unknown = [v for v in value if v not in known]
    if unknown:
        raise SettingError(f"{what} names unknown {', '.join(map(repr, unknown))}; known: {', '.join(known)}")
    return tuple(value)


def parse(data: dict, path: str = "<readings>", text: str = "") -> Grid:
    where = f"readings file {path}"
    unknown = set(data) - {"sweep", "config", "base", "axes", "limit", "readings"}
    if unknown:
        raise SettingError(f"{where}: unknown top-level entries {', '.join(sorted(unknown))} "
                           "(expected sweep, config, base, axes, limit, readings)")
    config = data.get("config", {})
    allowed = set(CONFIG_FIELDS)
    if not isinstance(config, dict) or set(config) - allowed:
        raise SettingError(f"{where}: [config] sets unknown fields "
                           f"{', '.join(sorted(set(config) - allowed)) if isinstance(config, dict) else config!r} "
                           f"(allowed: {', '.join(sorted(allowed))})")
    sweep = data.get("sweep", {})
    bad = set(sweep) - {"tasks", "seeds", "d"}
    if bad:
        raise SettingError(f"{where}: [sweep] has unknown keys {', '.join(sorted(bad))} (expected tasks, seeds, d)")
    tasks = _name_list(sweep.get("tasks", list(tasks_module.TASKS)), f"{where}: [sweep] tasks", tasks_module.TASKS)
    seeds = sweep.get("seeds", 5)
    if isinstance(seeds, bool) or not isinstance(seeds, int) or not 1 <= seeds <= MAX_SEEDS:
        raise SettingError(f"{where}: [sweep] seeds must be an integer in [1, {MAX_SEEDS}] (table1's --seeds "
                           f"limit), got {seeds!r}")
    ds = _int_list(sweep.get("d", [50]), f"{where}: [sweep] d", 2, MAX_D, "the largest size table1 runs, its --d "
                   "limit: the engine is benchmarked to d = 200, exact populations take minutes beyond a few hundred")
    base = data.get("base", {})
    axes = data.get("axes", {})
    if not isinstance(axes, dict) or not axes or not all(isinstance(v, dict) and v for v in axes.values()):
        raise SettingError(f"{where}: needs at least one [axes.<name>] table with at least one value")
    fields = set(Reading.__dataclass_fields__) - {"name"}
    for axis, values in axes.items():
        for vname, setting in values.items():
            if not isinstance(setting, dict):
                raise SettingError(f"{where}: axes.{axis}.{vname} must be a table of reading fields")
            bad = set(setting) - fields
            if bad:
                raise SettingError(f"{where}: axes.{axis}.{vname} sets unknown reading fields {', '.join(sorted(bad))}")
            if "/" in vname:
                raise SettingError(f"{where}: axes.{axis}.{vname}: value names cannot contain '/'")
    bad = set(base) - fields
    if bad:
        raise SettingError(f"{where}: [base] sets unknown reading fields {', '.join(sorted(bad))}")
    named = data.get("readings", {})
    if not isinstance(named, dict) or not all(isinstance(v, dict) for v in named.values()):
        raise SettingError(f"{where}: [readings] must hold one table of reading fields per named reading")
    for rname, setting in named.items():
        bad = set(setting) - fields
        if bad:
            raise SettingError(f"{where}: readings.{rname} sets unknown reading fields {', '.join(sorted(bad))}")
        if "/" in rname:
            raise SettingError(f"{where}: readings.{rname}: a named reading's name cannot contain '/'")
    n_readings = math.prod(len(v) for v in axes.values()) + len(named)
    if n_readings > MAX_READINGS:
        raise SettingError(f"{where}: the axes make {n_readings} readings ("
                           + " x ".join(f"{len(v)} {a}" for a, v in axes.items())
                           + f"), above the largest number a sweep runs, {MAX_READINGS}")
    readings: dict[str, Reading] = {}
    combos = [("/".join(vname for vname, _ in combo), [setting for _, setting in combo])
              for combo in itertools.product(*[list(v.items()) for v in axes.values()])]
    for name, settings in combos + [(rname, [setting]) for rname, setting in named.items()]:
        fields_set = dict(base)
        for setting in settings:
            fields_set.update(setting)
        try:
            readings[name] = Reading(name=name, **fields_set).validate()
        except (SettingError, TypeError) as exc:
            raise SettingError(f"{where}: reading {name}: {exc}") from None
        for f, high, flag in READING_LIMITS:
            if getattr(readings[name], f) > high:
                raise SettingError(f"{where}: reading {name}: {f} = {getattr(readings[name], f)} is above the "
                                   f"largest, {high} (table1's {flag} limit)")
    limits = []
    for i, lim in enumerate(data.get("limit", [])):
        what = f"{where}: [[limit]] entry {i + 1}"
        bad = set(lim) - {"d", "readings", "tasks"}
        if bad:
            raise SettingError(f"{what} has unknown keys {', '.join(sorted(bad))} (expected d, readings, tasks)")
        ld = _int_list(lim.get("d"), f"{what} d", 2)
        missing = [v for v in ld if v not in ds]
        if missing:
            raise SettingError(f"{what} names d = {missing} not in [sweep] d = {list(ds)}")
        limits.append(Limit(ld, None if "readings" not in lim else _name_list(lim["readings"], f"{what} readings",
                                                                              list(readings)),
                            None if "tasks" not in lim else _name_list(lim["tasks"], f"{what} tasks", tasks)))
    grid = Grid(readings, tasks, seeds, ds, tuple(limits), path, text,
                {axis: list(values) for axis, values in axes.items()}, dict(config))
    try:
        for d in ds:
            grid.run_config(d, tasks).validate()
            for name in readings:   # the seed ids of each reading's tuning draws against the reported ones
                grid.run_config(d, tasks, name).validate()
    except (SettingError, TypeError) as exc:
        raise SettingError(f"{where}: [config]: {exc}") from None
    return grid
