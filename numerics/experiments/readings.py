"""The readings grid of a sweep, read from a TOML file (the default ships as ``readings.toml`` beside this module).

A file has ``[sweep]`` (tasks, reported seeds, alphabet sizes d), optional ``[config]`` (run-configuration
fields of ``runner.Config`` other than tasks, d, seeds and jobs: batch, validation and test sizes, ...), ``[base]`` (Reading fields set for every
reading), ``[axes.<axis>]`` tables (each value a name and the Reading fields it sets; the readings are the
Cartesian product of the axes, in file order, named by joining the value names with "/") and optional
``[[limit]]`` entries (at the listed d, only the listed readings and/or tasks run).  Every error names the file
and the entry, before any work.
"""
from __future__ import annotations

import hashlib
import itertools
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from theory.validation import SettingError

from numerics.experiments import runner as RN
from numerics.experiments import tasks as TK
from numerics.experiments.protocol import Reading

CONFIG_FIELDS = ("and_heads", "init_scale", "batch", "val_size", "test_size", "mass_tol", "len_tol", "curve_points",
                 "lag_points", "icl_loss", "even_pairs_embedding", "kernel")
"""The run-configuration fields a readings file may set in [config] (the rest come from the cells)."""

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

    def run_config(self, d: int, tasks: tuple[str, ...], reading: str | None = None) -> RN.Config:
        """The run configuration of a cell: ``runner.Config`` with [config], these tasks, d, the seeds and the
        reading (the protocol's default when None)."""
        kw = {**self.config, "tasks": tuple(tasks), "d": d, "seeds": self.seeds}
        if reading is not None:
            kw["reading"] = self.readings[reading]
        return RN.Config(**{k: tuple(v) if isinstance(v, list) else v for k, v in kw.items()})

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
                tasks = tuple(t for t in tasks if d >= TK.MIN_D[t])
                if tasks:
                    out.append((name, d, tasks))
        return out

    def to_dict(self) -> dict:
        return {"path": self.path, "sha256": self.sha256, "text": self.text, "tasks": list(self.tasks),
                "seeds": self.seeds, "d": list(self.d), "readings": {n: r.to_dict() for n, r in self.readings.items()},
                "limits": [{"d": list(lim.d), "readings": None if lim.readings is None else list(lim.readings),
                            "tasks": None if lim.tasks is None else list(lim.tasks)} for lim in self.limits],
                "axes": self.axes, "config": self.config, "default": self.default}


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


def _int_list(value, what: str, low: int = 1) -> tuple[int, ...]:
    if not isinstance(value, list) or not value or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= low for v in value):
        raise SettingError(f"{what} must be a non-empty list of integers >= {low}, got {value!r}")
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
    unknown = set(data) - {"sweep", "config", "base", "axes", "limit"}
    if unknown:
        raise SettingError(f"{where}: unknown top-level entries {', '.join(sorted(unknown))} "
                           "(expected sweep, config, base, axes, limit)")
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
    tasks = _name_list(sweep.get("tasks", list(TK.TASKS)), f"{where}: [sweep] tasks", TK.TASKS)
    seeds = sweep.get("seeds", 5)
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise SettingError(f"{where}: [sweep] seeds must be an integer >= 1, got {seeds!r}")
    ds = _int_list(sweep.get("d", [50]), f"{where}: [sweep] d", 2)
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
    readings: dict[str, Reading] = {}
    for combo in itertools.product(*[list(v.items()) for v in axes.values()]):
        name = "/".join(vname for vname, _ in combo)
        fields_set = dict(base)
        for _, setting in combo:
            fields_set.update(setting)
        try:
            readings[name] = Reading(name=name, **fields_set).validate()
        except (SettingError, TypeError) as exc:
            raise SettingError(f"{where}: reading {name}: {exc}") from None
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
    except (SettingError, TypeError) as exc:
        raise SettingError(f"{where}: [config]: {exc}") from None
    return grid
