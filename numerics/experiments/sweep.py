"""The readings sweep: Table 1 over readings x tasks x seeds x d, as independent units of work on a
``dask.distributed`` client, with every finished unit kept in a content-addressed results store.

Units (each a picklable call of one function on a JSON-ready *spec*):

* ``search``: one plan's step-size search for one row at one d under one reading (``runner.search`` on the
  tuning seeds);
* ``seed``: that plan trained on one reported seed at the chosen step sizes and measured (``runner.report_seed``);
* ``ceiling``: the row's capacity ceiling (``capacity.ceiling``; it depends on neither reading nor seed);
* ``call``: a generic unit, any function named "module:name" on JSON-ready arguments (``call_spec``; the
  studies of ``occ-companion scope`` run as such units, through ``execute_calls``).

A unit's spec holds only what its result depends on: the run configuration, the row, the plan, and the
reading *projected on the plan* (``relevant``: the three-phase schedule matters only to the three-phase plan,
joint GD's step convention only to joint GD, momentum and Adam constants only under their optimizer).  Readings
that differ only in fields a plan ignores share that plan's units, which is what makes a product of readings
affordable; every reading still gets every plan's result.  The store key is the SHA-256 of the canonical JSON of
the spec, which includes the package version and a digest of the computing code (``code_digest``: every source
file of the ``numerics`` and ``theory`` packages), so an edit of that code within one version recomputes
instead of returning results of the old code.

Store (``Store``): one JSON file per finished unit, ``<store>/units/<key[:2]>/<key>.json``, written atomically
(temporary sibling, fsync, rename), holding the spec, the result and the SHA-256 of the result.  An entry whose
file does not parse, whose spec differs from the one asked for, or whose digest does not match is *corrupt*:
it is moved to ``<store>/corrupt/`` and the unit is trained again.  Two sweeps may share a store: each entry
is written whole by one rename, and both writers of a unit write the same deterministic result.

The driver (``Driver``, shared by ``execute`` and ``execute_calls``) submits every unit whose result is not in
the store (searches and ceilings first, each seed unit when its search has finished), writes each result as it arrives, records a unit that raised with
its error (its dependants are skipped, the sweep goes on), and on Ctrl-C cancels what is left: every finished
unit is already in the store, so the same command resumes where it stopped.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import time
import traceback
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Callable

from numerics.experiments import engine as E
from numerics.experiments import runner as RN
from numerics.experiments import verdicts as V
from numerics.experiments.protocol import Reading
from numerics.experiments.readings import Grid

STORE_FORMAT = 1
PROJECTED = {"three_phase": ("joint_steps",), "joint": ("k1", "k2", "phase2_cap"),
             "output_only": ("k1", "k2", "phase2_cap", "joint_steps"),
             "attention_only": ("k1", "k2", "phase2_cap", "joint_steps")}
"""Reading fields a plan does not use (``relevant``; the constants of the optimizers not chosen are ignored too)."""
CONFIG_FIELDS_OUT = ("tasks", "seeds", "and_heads", "jobs", "reading")
"""Config fields that are not part of a unit's spec (the unit names its own row, seed and reading)."""


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
    for f in ignored:
        out[f] = getattr(base, f)
    return out


def canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def key_of(spec: dict) -> str:
    return hashlib.sha256(canonical(spec).encode()).hexdigest()


CODE_PACKAGES = ("numerics", "theory")
"""The packages whose source a unit's result can depend on (``app`` only presents results)."""


@lru_cache(maxsize=1)
def code_digest() -> str:
    """SHA-256 (first 16 hex digits) of the source files (.py, .toml) of ``CODE_PACKAGES``, each with its path
    relative to its package's parent: part of every unit's spec.  Any edit, even of a comment, changes it, which
    errs on the side of recomputing."""
    import importlib

    files = []
    for pkg in CODE_PACKAGES:
        root = Path(importlib.import_module(pkg).__file__).resolve().parent
        names = [p.relative_to(root.parent).as_posix() for p in root.rglob("*")
                 if p.suffix in (".py", ".toml") and p.is_file() and "__pycache__" not in p.parts]
        files += [(name, (root.parent / name).read_bytes()) for name in _in_digest_order(names)]
    return _digest(files)


def _in_digest_order(names: list[str]) -> list[str]:
    """Relative paths in the digest's order: part by part (as pathlib sorts paths), not as strings
    ("a/b.py" before "a-b.py" before "a.py")."""
    from pathlib import PurePosixPath

    return sorted(names, key=PurePosixPath)


def _digest(files) -> str:
    """``code_digest`` of (path, bytes) pairs in their order."""
    h = hashlib.sha256()
    for rel, data in files:
        h.update(rel.encode() + b"\0" + data + b"\0")
    return h.hexdigest()[:16]


def code_digest_at(commit: str, repo) -> str:
    """``code_digest`` of the tracked files of ``CODE_PACKAGES`` at a git commit of the repository ``repo``
    (what a checkout of that commit computes, untracked files aside): the check that a result's recorded code
    digest is the one its recorded commit gives.  Raises ``subprocess.CalledProcessError`` where git cannot
    read the commit."""
    import subprocess
    from pathlib import PurePosixPath

    def git(*args) -> bytes:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True).stdout

    files = []
    for pkg in CODE_PACKAGES:
        listed = git("ls-tree", "-r", "-z", "--name-only", commit, "--", f"{pkg}/").decode().split("\0")
        names = [n for n in listed if n and PurePosixPath(n).suffix in (".py", ".toml")]
        files += [(name, git("show", f"{commit}:{name}")) for name in _in_digest_order(names)]
    return _digest(files)


def config_spec(cfg: RN.Config) -> dict:
    return {k: v for k, v in cfg.to_dict().items() if k not in CONFIG_FIELDS_OUT}


def _config(spec: dict, reading: dict, tasks=None) -> RN.Config:
    cfg = RN.Config.from_dict(dict(spec["config"]))
    cfg = replace(cfg, reading=Reading.from_dict({**reading, "name": "unit"}))
    if tasks is not None:
        cfg = replace(cfg, tasks=tasks)
    return cfg


# ------------------------------------------------------------------------------------------------
# the units (run on the workers)


def run_unit(spec: dict) -> dict:
    """Run one unit on one BLAS thread (units run in parallel processes), the engine's temporaries kept on the
    heap (``engine.keep_temporaries_on_heap``); returns its result with its CPU and wall time."""
    from threadpoolctl import threadpool_limits

    E.keep_temporaries_on_heap()
    cpu0, wall0 = time.process_time(), time.time()
    with threadpool_limits(limits=1):
        out = UNITS[spec["kind"]](spec)
    return {"result": out, "cpu_s": time.process_time() - cpu0, "wall_s": time.time() - wall0,
            "host": os.uname().nodename, "pid": os.getpid()}


def _search(spec: dict) -> dict:
    cfg = _config(spec, spec["reading"], (spec["task"],))
    found = RN.search(RN.Row.of(cfg, spec["task"], spec["heads"]), plans=(spec["plan"],))
    return {"search": found[spec["plan"]], "steps": found["_steps"]}


def _seed(spec: dict) -> dict:
    cfg = _config(spec, spec["reading"], (spec["task"],))
    res = RN.report_seed(RN.Row.of(cfg, spec["task"], spec["heads"]), spec["seed"], {spec["plan"]: spec["chosen"]})
    info = RN.make_data(RN.Row.of(cfg, spec["task"], spec["heads"]), spec["seed"]).info if spec["seed"] == 0 else {}
    return {"seed_result": res[spec["plan"]], "data": {k: v for k, v in info.items() if not hasattr(v, "shape")}}


def _ceiling(spec: dict) -> dict:
    cfg = _config(spec, Reading().to_dict(), (spec["task"],))
    return {"ceiling": RN.ceiling_of(RN.Row.of(cfg, spec["task"], spec["heads"]))}


def _call(spec: dict) -> dict:
    """A generic unit: the function named "module:name" in ``spec["fn"]`` called on ``spec["args"]``."""
    return resolve(spec["fn"])(spec["args"])


def resolve(fn: str) -> Callable[[dict], dict]:
    """The function of a "module:name" reference (a SettingError when it does not name one)."""
    import importlib

    from theory.validation import SettingError

    module, sep, name = fn.partition(":")
    if not sep or not module or not name:
        raise SettingError(f"a call unit names its function as 'module:name', got {fn!r}")
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise SettingError(f"call unit function {fn!r} not found ({exc})") from None
    if not callable(found):
        raise SettingError(f"call unit function {fn!r} is not callable")
    return found


def call_spec(fn: str, args: dict, version: str | None = None, code: str | None = None) -> dict:
    """The spec of a generic unit: ``fn`` ("module:name") called on the JSON-ready ``args``; the key covers
    the function, the arguments, the package version and the code digest (a new version or an edit of the
    computing code recomputes)."""
    canonical(args)  # refuses arguments that are not JSON-ready, before any work
    return {"kind": "call", "version": version or RN.package_version(), "code": code or code_digest(), "fn": fn,
            "args": args}


UNITS: dict[str, Callable[[dict], dict]] = {"search": _search, "seed": _seed, "ceiling": _ceiling, "call": _call}


# ------------------------------------------------------------------------------------------------
# the store


class Store:
    """Finished units, one file each (see the module docstring); safe to share between sweeps."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.corrupt_found: list[str] = []

    def path(self, key: str) -> Path:
        return self.root / "units" / key[:2] / f"{key}.json"

    def get(self, key: str, spec: dict) -> dict | None:
        """The stored entry of the unit, or None when it is missing or corrupt (a corrupt one is moved aside)."""
        p = self.path(key)
        try:
            text = p.read_text()
        except FileNotFoundError:
            return None
        try:
            entry = json.loads(text)
            ok = (entry["format"] == STORE_FORMAT and entry["key"] == key and canonical(entry["spec"]) == canonical(spec)
                  and hashlib.sha256(canonical(entry["result"]).encode()).hexdigest() == entry["digest"])
        except (ValueError, KeyError, TypeError):
            ok = False
        if ok:
            return entry
        self._quarantine(p, key)
        return None

    def _quarantine(self, p: Path, key: str) -> None:
        dest = self.root / "corrupt" / f"{key}.{time.time_ns()}.json"
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(p, dest)
        except FileNotFoundError:  # another sweep moved or rewrote it meanwhile
            pass
        self.corrupt_found.append(key)

    def put(self, key: str, spec: dict, done: dict) -> None:
        from theory.files import atomic_write_text

        entry = {"format": STORE_FORMAT, "key": key, "spec": spec, "result": done["result"],
                 "digest": hashlib.sha256(canonical(done["result"]).encode()).hexdigest(),
                 "cpu_s": done["cpu_s"], "wall_s": done["wall_s"], "host": done.get("host"),
                 "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        atomic_write_text(self.path(key), canonical(entry))

    def log_run(self, record: dict) -> None:
        """Append one record of a sweep invocation (its start, or its end) to ``<store>/runs.jsonl`` (one short
        line, one append)."""
        self.root.mkdir(parents=True, exist_ok=True)
        line = (json.dumps(record, sort_keys=True) + "\n").encode()
        fd = os.open(self.root / "runs.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def runs(self) -> list[dict]:
        """Every record of the sweep invocations on this store, starts and ends (lines that do not parse are
        skipped; ``app.render.sweep.invocations`` pairs them)."""
        try:
            lines = (self.root / "runs.jsonl").read_text().splitlines()
        except FileNotFoundError:
            return []
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    def keys(self) -> list[str]:
        return sorted(p.stem for p in (self.root / "units").glob("*/*.json"))


# ------------------------------------------------------------------------------------------------
# the plan of a sweep


@dataclass
class Plan:
    """Every unit a sweep needs and how the cells use them.

    ``searches[key] = spec``; ``ceilings[key] = spec``; ``rows[(reading, d, row)] = {"task", "heads",
    "plans": {plan: search key}, "ceiling": key}``; seed units are known once their search is done."""

    grid: Grid
    searches: dict = field(default_factory=dict)
    ceilings: dict = field(default_factory=dict)
    rows: dict = field(default_factory=dict)
    version: str = ""
    code: str = ""

    def seeds(self, skey: str) -> list[int]:
        spec = self.searches[skey]
        cfg = _config(spec, spec["reading"], (spec["task"],))
        cfg = replace(cfg, seeds=self.grid.seeds)
        return RN.reported_seeds(RN.Row.of(cfg, spec["task"], spec["heads"]))

    def seed_spec(self, skey: str, seed: int, chosen: dict) -> dict:
        return {**self.searches[skey], "kind": "seed", "seed": seed, "chosen": chosen}

    def cell_config(self, reading: str, d: int, tasks: tuple) -> RN.Config:
        """The run configuration of a cell (``readings.Grid.run_config``)."""
        return self.grid.run_config(d, tuple(dict.fromkeys(tasks)), reading).validate()

    def cells(self) -> list[tuple[str, int]]:
        return sorted({(r, d) for r, d, _ in self.rows}, key=lambda c: (c[1], list(self.grid.readings).index(c[0])))


def plan(grid: Grid, version: str | None = None, code: str | None = None) -> Plan:
    """The units of every cell of the grid (readings x d x rows x plans), deduplicated by spec."""
    version, code = version or RN.package_version(), code or code_digest()
    out = Plan(grid, version=version, code=code)
    for rname, d, tasks in grid.cells():
        reading = grid.readings[rname]
        cfg = out.cell_config(rname, d, tasks)
        cspec = config_spec(cfg)
        for name, task, heads in ((row.name, row.task, row.heads) for row in RN.rows(cfg)):
            cspec_c = {"kind": "ceiling", "version": version, "code": code, "config": cspec, "task": task, "heads": heads}
            ckey = key_of(cspec_c)
            out.ceilings[ckey] = cspec_c
            plans = {}
            for p in RN.PLANS:
                spec = {"kind": "search", "version": version, "code": code, "config": cspec, "reading": relevant(reading, p),
                        "task": task, "heads": heads, "plan": p}
                k = key_of(spec)
                out.searches[k] = spec
                plans[p] = k
            out.rows[(rname, d, name)] = {"task": task, "heads": heads, "plans": plans, "ceiling": ckey}
    return out


# ------------------------------------------------------------------------------------------------
# the driver


@dataclass
class Outcome:
    """What ``execute`` did: results by unit key, the units it trained and reused, the failures."""

    results: dict = field(default_factory=dict)
    seed_keys: dict = field(default_factory=dict)   # (search key, seed) -> seed unit key
    trained: list = field(default_factory=list)
    reused: list = field(default_factory=list)
    failed: dict = field(default_factory=dict)      # key -> {"spec", "error", "traceback"}
    skipped: dict = field(default_factory=dict)     # key -> why (a failed dependency)
    interrupted: bool = False
    corrupt: list = field(default_factory=list)
    unit_cpu: dict = field(default_factory=dict)   # key -> CPU seconds of the unit (trained now or stored)
    cpu_s: float = 0.0
    wall_s: float = 0.0


COST = {"ICL": 10, "AND": 4, "SLR": 3, "OR": 2, "even_pairs": 1, "occurrence": 1}


def _priority(spec: dict) -> float:
    """Smaller alphabets first (their cells complete early, so a sweep stopped early has whole cells), and
    within one d the heavier units first (so the last units to finish are short); generic units in order."""
    if spec["kind"] == "call":
        return 0.0
    return -1000 * spec["config"]["d"] + COST[spec["task"]] * spec["heads"] + (100 if spec["kind"] == "search" else 0)


class Driver:
    """The execution loop every kind of unit shares: look a unit up in the store, else submit it to the dask
    client (connected at the first unit to train), write each result to the store as it arrives, record a
    unit that raised with its error, and on Ctrl-C cancel what is left.

    ``on_done(key, spec)`` is called after a unit's result is in ``outcome.results`` (trained now or read
    from the store), ``on_failed(key, spec)`` after a unit raised: there the caller submits or skips the
    units that depend on it.  With ``connect=None`` nothing is trained and ``not_trained(key, spec)`` is
    called for every missing unit instead."""

    def __init__(self, store: Store, connect: Callable[[], object] | None, out: Outcome | None = None, *,
                 on_done: Callable[[str, dict], None] | None = None,
                 on_failed: Callable[[str, dict], None] | None = None,
                 not_trained: Callable[[str, dict], None] | None = None):
        self.store, self.connect = store, connect
        self.out = out if out is not None else Outcome()
        self.on_done, self.on_failed, self.not_trained = on_done, on_failed, not_trained
        self.client = None
        self.futures: dict = {}
        self.ac = None
        self.t0 = time.time()

    def lookup(self, key: str, spec: dict) -> bool:
        """Take the unit's result from the store when it is there (True), else False."""
        entry = self.store.get(key, spec)
        if entry is None:
            return False
        out = self.out
        out.results[key] = entry["result"]
        out.reused.append(key)
        out.unit_cpu[key] = entry.get("cpu_s", 0.0)
        if self.on_done is not None:
            self.on_done(key, spec)
        return True

    def need(self, key: str, spec: dict) -> None:
        """The unit's result: from the store, or trained (submitted now)."""
        if not self.lookup(key, spec):
            self.submit(key, spec)

    def submit(self, key: str, spec: dict) -> None:
        from distributed import as_completed

        if self.connect is None:
            self.out.skipped[key] = "not in the store (not trained: render only)"
            if self.not_trained is not None:
                self.not_trained(key, spec)
            return
        if self.client is None:
            self.client = self.connect()
            self.ac = as_completed()
        fut = self.client.submit(run_unit, spec, key=f"{spec['kind']}-{key[:16]}", pure=False,
                                 priority=_priority(spec))
        self.futures[fut.key] = (key, spec, fut)
        self.ac.add(fut)

    def run(self, total: int, progress: Callable[[dict, object], None] | None = None) -> Outcome:
        """Wait for every submitted unit (and the units their hooks submit); ``progress(counts, client)`` is
        called after every unit."""
        out = self.out

        def report():
            if progress is not None:
                progress({"done": len(out.trained), "reused": len(out.reused), "failed": len(out.failed),
                          "skipped": len(out.skipped), "submitted": len(self.futures), "total": total,
                          "elapsed": time.time() - self.t0}, self.client)

        report()
        try:
            for fut in self.ac or ():
                key, spec, _ = self.futures.pop(fut.key)
                if fut.status == "error":
                    exc = fut.exception()
                    tb = "".join(traceback.format_exception(type(exc), exc, fut.traceback()))
                    out.failed[key] = {"spec": spec, "error": f"{type(exc).__name__}: {exc}", "traceback": tb}
                    if self.on_failed is not None:
                        self.on_failed(key, spec)
                elif fut.status == "finished":
                    done = fut.result()
                    self.store.put(key, spec, done)
                    out.results[key] = done["result"]
                    out.trained.append(key)
                    out.cpu_s += done["cpu_s"]
                    out.unit_cpu[key] = done["cpu_s"]
                    if self.on_done is not None:
                        self.on_done(key, spec)
                fut.release()
                report()
        except KeyboardInterrupt:
            out.interrupted = True
            if self.client is not None:
                self.client.cancel([f for _, _, f in self.futures.values()])
            raise
        finally:
            out.wall_s = time.time() - self.t0
            out.corrupt = list(self.store.corrupt_found)
        return out


def execute(p: Plan, store: Store, connect: Callable[[], object] | None,
            progress: Callable[[dict, object], None] | None = None) -> Outcome:
    """Run every unit of the plan that the store lacks on the dask client that ``connect()`` returns (called
    once, at the first unit to train: a sweep whose units are all stored starts no cluster); see the module
    docstring.  ``progress(counts, client)`` is called after every unit.  With ``connect=None`` nothing is
    trained: the outcome holds what the store has, and every missing unit is listed in ``skipped``."""
    out = Outcome()
    first_round = [True]  # stored searches get their seeds after every first-round unit is looked up or submitted

    def skip_seeds(skey, why):
        for s in p.seeds(skey):
            out.skipped[f"{skey}/{s}"] = why

    def seeds_of(skey):
        res = out.results[skey]["search"]
        if res["chosen"] is None:
            skip_seeds(skey, "every step size diverged on the tuning seeds")
            return
        for s in p.seeds(skey):
            spec = p.seed_spec(skey, s, res["chosen"])
            k = key_of(spec)
            out.seed_keys[(skey, s)] = k
            driver.need(k, spec)

    def on_done(key, spec):
        if spec["kind"] == "search" and not first_round[0]:
            seeds_of(key)

    def on_failed(key, spec):
        if spec["kind"] == "search":
            skip_seeds(key, f"search {key[:12]} failed")

    def not_trained(key, spec):
        if spec["kind"] == "search":
            skip_seeds(key, "its search is not in the store")

    driver = Driver(store, connect, out, on_done=on_done, on_failed=on_failed, not_trained=not_trained)
    for key, spec in list(p.ceilings.items()) + list(p.searches.items()):
        driver.need(key, spec)
    first_round[0] = False
    for skey in p.searches:
        if skey in out.results:
            seeds_of(skey)
    total = len(p.ceilings) + sum(1 + len(p.seeds(k)) for k in p.searches)
    return driver.run(total, progress)


def execute_calls(specs: dict[str, dict], store: Store, connect: Callable[[], object] | None,
                  progress: Callable[[dict, object], None] | None = None) -> Outcome:
    """Run the generic units ``specs`` (key -> ``call_spec``) that the store lacks, as ``execute`` does for the
    Table 1 units (same store, same loop); a unit that raised is in ``failed``, with ``connect=None`` a
    missing unit is in ``skipped``."""
    driver = Driver(store, connect)
    for key, spec in specs.items():
        driver.need(key, spec)
    return driver.run(len(specs), progress)


# ------------------------------------------------------------------------------------------------
# from units to cells, verdicts and the tidy table


def cell_results(p: Plan, out: Outcome, reading: str, d: int) -> dict:
    """The results dict of one cell (one reading at one d), as ``runner.run`` returns, from the units; rows
    with a failed or missing unit are left out and listed under ``missing_rows`` with why."""
    rows, missing = {}, {}
    r = p.grid.readings[reading]
    for (rn, dd, name), info in p.rows.items():
        if (rn, dd) != (reading, d):
            continue
        why = []
        found, per_plan, steps = {}, {}, 0
        for plan_name, skey in info["plans"].items():
            if skey not in out.results:
                why.append(f"{plan_name} search " + ("failed: " + out.failed[skey]["error"] if skey in out.failed
                                                     else "not run"))
                continue
            found[plan_name] = out.results[skey]["search"]
            steps += out.results[skey]["steps"]
            recs = []
            if found[plan_name]["chosen"] is not None:
                for s in p.seeds(skey):
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
            missing[name] = why
            continue
        cfg = p.cell_config(reading, d, (info["task"],))
        data = {}
        for plan_name, skey in info["plans"].items():
            k = out.seed_keys.get((skey, 0))
            if k in out.results and out.results[k]["data"]:
                data = out.results[k]["data"]
                break
        if not data:
            data = {"p": RN.TK.length_parameter(info["task"], d)}
        row = RN.assemble_row(RN.Row.of(cfg, info["task"], info["heads"]), found, per_plan,
                              out.results[info["ceiling"]]["ceiling"], data)
        row["tuning_steps"] = steps
        rows[name] = row
    cfg = p.cell_config(reading, d, tuple(info["task"] for (rn, dd, _), info in p.rows.items()
                                          if (rn, dd) == (reading, d)))
    return {"suite": "occurrence-companion", "version": p.version, "config": cfg.to_dict(), "reading": r.to_dict(),
            "rows": rows, "missing_rows": missing}


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


def cell_verdicts(results: dict) -> list[dict]:
    """``verdicts.assess`` on a cell, with every claim of a row that could not be assembled refused."""
    out = V.assess(results) if results["rows"] else []
    for name, why in results["missing_rows"].items():
        row = {"name": name, "task": name.split(" ")[0], "lag": {}, "rows": {}}
        for claim in claims_of(row["task"]):
            out.append({"row": name, "claim": claim, "verdict": "refused", "reasons": ["training failed: " + w for w in why],
                        "evidence": ""})
    for v in out:
        if v["verdict"] == "refused":
            v["category"] = reason_category(v["reasons"])
    return out


def claims_of(task: str) -> list[str]:
    """The claims the paper makes about a task's row (as ``verdicts.assess`` names them)."""
    out = []
    if task in V.PAPER_MATCH:
        out.append("three-phase matches joint GD")
    if task == "AND":
        out += ["three-phase falls short of joint GD", "attention-only is competitive (matches three-phase)"]
    out += [f"attention lags output under joint GD ({m})" for m in V.MEASURES if m != "alignment" or task != "AND"]
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
                for m in V.MEASURES:
                    rec_out[f"lag_{m}"] = lag.get(m, {}).get("ratio")
                for m in ("displacement", "function"):
                    rec_out[f"t_half_att_{m}"] = lag.get(m, {}).get("t_half_att")
                    rec_out[f"t_half_out_{m}"] = lag.get(m, {}).get("t_half_out")
                out.append({k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                            for k, v in rec_out.items()})
    return out
