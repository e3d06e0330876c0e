"""Running the studies of ``occ-companion scope`` (``numerics.scope.STUDIES``): every unit of a study is a
generic unit of ``numerics.units`` (``units.call_spec`` of the study module's ``unit``), so its store key
covers the code that study module imports, its arguments and the package version.  ``plan`` lists the units,
``run_studies`` computes those the store lacks and summarises each study.
"""
from __future__ import annotations

from numerics import units
from numerics.experiments import engine
from numerics.scope import computation, unit_function


def plan(names: list[str], quick: bool, version: str | None = None) -> dict:
    """Per study: its configuration and its units as {unit name: (store key, spec)}."""
    out = {}
    for name in names:
        mod = computation(name)
        cfg = mod.config(quick)
        specs = {}
        for uname, args in mod.units(cfg).items():
            spec = units.call_spec(unit_function(name), args, version)
            specs[uname] = (units.key_of(spec), spec)
        out[name] = {"module": mod, "config": cfg, "units": specs}
    return out


def summarise(entry: dict, outcome) -> dict:
    """A study's record (``plan``'s entry): configuration, summary of the units that finished, failures."""
    results, failed = {}, {}
    for uname, (key, _) in entry["units"].items():
        if key in outcome.results:
            results[uname] = outcome.results[key]
        elif key in outcome.failed:
            failed[uname] = outcome.failed[key]["error"]
        else:
            failed[uname] = outcome.skipped.get(key, "not run")
    return {"title": entry["module"].TITLE, "config": entry["config"], "units": len(entry["units"]),
            "failed": failed, "summary": entry["module"].summarise(entry["config"], results),
            "units_cpu_s": sum(outcome.unit_cpu.get(k, 0.0) for k, _ in entry["units"].values())}


def run_studies(names: list[str], quick: bool, store, cluster, progress=None, version: str | None = None):
    """Compute every unit of the studies ``names`` that ``store`` (a ``units.Store``) lacks on ``cluster`` (a
    ``units.Cluster``, connected at the first unit to compute, closed at the end) and summarise each study.
    Returns (the number of units, the ``units.Outcome``, {study: its record}); ``progress(counts)`` is called
    after every unit; on Ctrl-C the finished units are in the store and KeyboardInterrupt goes on up."""
    studies = plan(names, quick, version)
    specs = {key: spec for entry in studies.values() for key, spec in entry["units"].values()}
    try:  # the engine's allocator setting in the workers, as the sweep's units have it (values unchanged)
        outcome = units.execute_calls(specs, store, cluster.connect, progress, setup=engine.keep_temporaries_on_heap)
    finally:
        cluster.close()
    return len(specs), outcome, {name: summarise(entry, outcome) for name, entry in studies.items()}
