"""Every writing command, killed at random moments and at every step of its commit, leaves its output
folder holding either the old complete result or the new complete result, never a mix (``app.io``).

The commands run in children of a multiprocessing fork server that imported and warmed the suite once
(``tests/_kill_child.py``), so a kill costs the command's own work and not a Python start-up; the
children run ``app.cli.main`` with the real arguments.  Each folder is compared file by file with reference results of both argument lists,
made by uninterrupted runs (timestamps, wall times and paths removed from the JSON records), so the
check does not trust the implementation's own completion marker.

* ``test_kill_at_every_commit_step``: the child dies (``os._exit``, as under SIGKILL) just before its
  k-th rename or unlink inside the folder, for every k until it finishes: every window of the commit.
* ``test_random_kills``: ``KILLS`` (>= 50) kills per command, SIGKILL or SIGINT at a time drawn
  uniformly over the command's duration, several children at once.  After SIGINT the folder must be
  consistent even before recovery, the exit status 130 or 0, and no traceback printed.

``OCC_KILLS`` raises the count (``HYPOTHESIS_PROFILE=thorough`` multiplies it by 8).

The benchmarks run at their ``--tiny`` size; ``sweep`` and ``scope`` render from a results store that the
module's fixture fills once (a tiny readings file; two quick studies), so no dask cluster starts in a killed
child (kills while units train are ``tests/experiments/test_sweep.py``'s).  ``scope`` shares one store between all its
children, as concurrent users do (the store is only read); ``sweep`` gets a fresh copy of the store for every
run, since each run appends its record to the store's run log, which its pages list.  After every kill the
store is checked too: every unit entry parses and matches its digest, no unit is lost or changed, no temporary
file is left, and every line of the run log parses.
"""
from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import random
import re
import shutil
import signal
import time
from pathlib import Path

import pytest

from app.cli import main
from app.io import complete_result, recover
from app.render.report import CLAIMS_BEGIN, CLAIMS_END

pytestmark = pytest.mark.slow  # every test kills commands many times over

KILLS = int(os.environ.get("OCC_KILLS", "50")) * (8 if os.environ.get("HYPOTHESIS_PROFILE") == "thorough" else 1)
PARALLEL = 3

VOLATILE = {"timestamp", "wall_seconds", "command", "git_commit", "git_dirty", "seconds", "out",
            "elapsed_s", "cpu_s", "wall_s", "commit", "dirty",  # these five: table1's records
            "started", "pid", "run_id", "store", "driver_cpu_s", "runs_wall_s"}  # sweep's and scope's records
NUMBER = re.compile(rb"[0-9]+(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?")


def _normalise(name: str, data: bytes):
    """A file's content with the fields that differ between identical runs (times, paths) removed."""
    if name.startswith("benchmarks"):  # measured times: the page's headings and last line, numbers masked
        lines = [ln for ln in data.split(b"\n") if ln.strip()]
        keep = [ln for ln in lines if ln.startswith(b"#") and b"Where the time goes" not in ln] + lines[-1:]
        return [NUMBER.sub(b"#", ln) for ln in keep]
    if name.endswith(".md"):  # lines naming the command (paths) and table1.md's version, commit and times go;
        # numbers in lines of wall times are masked
        return [NUMBER.sub(b"#", ln) if b"wall" in ln else ln for ln in data.split(b"\n")
                if not ln.startswith(b"occurrence-companion ") and b"`occ-companion " not in ln]
    if not name.endswith(".json"):
        return data

    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in VOLATILE}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x
    return strip(json.loads(data))


def visible(folder: Path) -> dict:
    """{relative name: normalised content} of every non-hidden file under ``folder``."""
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if path.is_file() and not any(part.startswith(".") for part in rel.parts):
            out[str(rel)] = _normalise(path.name, path.read_bytes())
    return out


def hidden_leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob(".*") if p.name.endswith((".tmp", ".journal")))


# ------------------------------------------------------------------------------------------------
# the commands: two argument lists each (A and B give different results), and how to prepare a folder

class Command:
    """``store``: None, "shared" (one store for every child: ``{store}`` in the arguments) or "fresh" (a copy
    of the filled store beside each folder, made before every run)."""

    def __init__(self, name, argv_a, argv_b, result=None, fresh=None, store=None):
        self.name, self.argv, self.result, self.fresh = name, {"A": argv_a, "B": argv_b}, result, fresh
        self.store = store

    def store_of(self, folder: Path) -> Path | None:
        if self.store is None:
            return None
        return STORES[self.name] if self.store == "shared" else folder.with_name("store-" + folder.name)

    def args(self, variant: str, folder: Path) -> list[str]:
        """The arguments of a run into ``folder`` (for a "fresh" store, its copy is made here)."""
        store = self.store_of(folder)
        if self.store == "fresh":
            shutil.rmtree(store, ignore_errors=True)
            shutil.copytree(STORES[self.name], store)
        return [a.replace("{out}", str(folder)).replace("{store}", str(store))
                .replace("{readings_A}", str(READINGS.get("A"))).replace("{readings_B}", str(READINGS.get("B")))
                for a in self.argv[variant]]


def _docs_old_state(root: Path) -> None:
    """A checkout whose README claims block and derivations page are both stale (the "A" result)."""
    (root / "docs").mkdir(parents=True, exist_ok=True)
    (root / "README.md").write_text(f"# x\n\n{CLAIMS_BEGIN}\nold claims\n{CLAIMS_END}\n")
    (root / "docs" / "derivations.md").write_text("old derivations\n")


def _page_old_state(name: str):
    """A folder holding an earlier page ``name`` written by hand (the "A" result of a page writer)."""
    def fresh(folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("# An earlier page\n\nold numbers 1 2 3\n")
    return fresh


TINY_READINGS = """
[sweep]
tasks = ["occurrence"]
seeds = 1
d = [5]
[config]
val_size = 64
test_size = 64
lag_points = 20
[base]
max_steps = 20
eval_every = 10
patience = 3
phase2_cap = 10
tuning_seeds = 1
max_extensions = 1
"""
"""A sweep of one task at d = 5 (trained once by the fixture); "A" sweeps two schedules, "B" one."""
AXES = {"A": '[axes.schedule]\n"k2=1" = { k2 = 1 }\n"k2=plateau" = { k2 = "plateau" }\n',
        "B": '[axes.schedule]\n"k2=1" = { k2 = 1 }\n'}
STORES: dict[str, Path] = {}
STORE_CONTENT: dict[str, dict] = {}
"""The filled results store of sweep and scope (set by the ``stores`` fixture)."""
READINGS: dict[str, Path] = {}

COMMANDS = {
    "run": Command("run", ["run", "--d", "5", "--steps", "10", "--epsilon", "0.01", "--quiet", "--out", "{out}"],
                   ["run", "--d", "5", "--steps", "12", "--epsilon", "0.01", "--no-plot", "--quiet", "--out", "{out}"],
                   result="run"),
    "prove": Command("prove", ["prove", "--d", "3", "--out", "{out}"], ["prove", "--d", "4", "--out", "{out}"]),
    "latex": Command("latex", ["latex", "--only", "kappa", "--out", "{out}/formulas.tex"],
                     ["latex", "--lengths", "nonnegative", "--only", "kappa", "--out", "{out}/formulas.tex"]),
    # docs: "A" is the stale pair written by hand, "B" the regenerated pair
    "docs": Command("docs", None, ["docs", "--root", "{out}"], fresh=_docs_old_state),
    # table1: one exact row at the quick size (every verdict decided: exit 0); B's shorter attention phase
    # changes its numbers
    "table1": Command("table1", ["table1", "--quick", "--tasks", "occurrence", "--jobs", "1", "--quiet", "--out", "{out}"],
                      ["table1", "--quick", "--tasks", "occurrence", "--k2", "3", "--jobs", "1", "--quiet",
                       "--out", "{out}"], result="table1"),
    # the benchmarks: "A" an earlier page, "B" a new page at the smoke size
    "benchmark": Command("benchmark", None, ["benchmark", "--tiny", "--out", "{out}/benchmarks.md"],
                         fresh=_page_old_state("benchmarks.md")),
    "benchmark-engine": Command("benchmark-engine", None, ["benchmark-engine", "--tiny", "--no-torch", "--out",
                                                           "{out}/benchmarks_engine.md"],
                                fresh=_page_old_state("benchmarks_engine.md")),
    # sweep and scope: rendered from the filled store (no unit to train); B drops a reading / adds a study
    "sweep": Command("sweep", ["sweep", "--readings", "{readings_A}", "--store", "{store}", "--no-train", "--quiet",
                               "--out", "{out}"],
                     ["sweep", "--readings", "{readings_B}", "--store", "{store}", "--no-train", "--quiet",
                      "--out", "{out}"], result="sweep", store="fresh"),
    "scope": Command("scope", ["scope", "--quick", "--studies", "kqv", "--store", "{store}", "--quiet", "--out", "{out}"],
                     ["scope", "--quick", "--studies", "kqv,regime", "--store", "{store}", "--quiet", "--out", "{out}"],
                     result="scope", store="shared"),
}


def _fill_stores(base: Path) -> None:
    """Fill the results stores of sweep (the tiny readings file "A", trained by the command on a LocalCluster
    of one worker: "B"'s units are a subset) and scope (the units of the quick kqv and regime studies, run in
    this process), once."""
    import subprocess
    import sys

    from numerics import units
    from numerics.scope import studies

    for variant, axes in AXES.items():
        READINGS[variant] = base / f"readings_{variant}.toml"
        READINGS[variant].write_text(TINY_READINGS + axes)
    STORES["sweep"] = base / "sweep-store"
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-m", "app", "sweep", "--readings", str(READINGS["A"]), "--store",
                           str(STORES["sweep"]), "--out", str(base / "sweep-out"), "--workers", "1", "--quiet"],
                          env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    STORES["scope"] = base / "scope-store"
    store = units.Store(STORES["scope"])
    for entry in studies.plan(["kqv", "regime"], True, units.package_version()).values():
        for key, spec in entry["units"].values():
            store.put(key, spec, units.run_unit(spec))
    STORE_CONTENT.update({name: _store_content(path) for name, path in STORES.items()})


def _store_content(store: Path) -> dict:
    """{unit file: its bytes} of a results store, after checking every entry: it parses, names its own key and
    matches its digest; nothing else (a temporary file, a quarantined entry) is in the store; every line of
    the run log parses."""
    from numerics import units

    found = {}
    for path in sorted(store.rglob("*")):
        rel = str(path.relative_to(store))
        if path.is_dir():
            assert rel == "units" or (rel.startswith("units/") and rel.count("/") == 1), f"store: {rel}"
            continue
        if rel == "runs.jsonl":
            assert all(json.loads(line) for line in path.read_text().splitlines()), "store: a broken run record"
            continue
        assert rel.startswith("units/") and rel.endswith(".json") and not path.name.startswith("."), f"store: {rel}"
        entry = json.loads(path.read_bytes())
        assert entry["key"] == path.stem and entry["digest"] == hashlib.sha256(
            units.canonical(entry["result"]).encode()).hexdigest(), f"store: {rel} does not match its digest"
        found[rel] = path.read_bytes()
    return found


class References:
    """Per command, made on first use (so ``-k`` selects the cost too): the normalised content of the folder
    after uninterrupted runs of "A" and "B" (``refs[name][variant]``), each run's duration, and a copy of each
    complete folder (marker included) that ``_prepare`` puts in place of a run."""

    def __init__(self, base: Path):
        self.base, self.refs, self.durations, self.snapshots = base, {}, {}, {}

    def of(self, name: str) -> "References":
        if name in self.refs:
            return self
        cmd = COMMANDS[name]
        if cmd.store is not None and not STORES:
            _fill_stores(self.base)
        self.refs[name] = {}
        for variant in ("A", "B"):
            folder = self.base / f"{name}-{variant}"
            if cmd.fresh is not None:
                cmd.fresh(folder)
            if cmd.argv[variant] is not None:
                _silent(main, cmd.args(variant, folder))  # warm: caches, imports
                t = time.perf_counter()
                assert _silent(main, cmd.args(variant, folder)) == 0
                self.durations[(name, variant)] = time.perf_counter() - t
            self.refs[name][variant] = visible(folder)
            self.snapshots[(name, variant)] = folder
        assert self.refs[name]["A"] != self.refs[name]["B"]
        return self


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    return References(tmp_path_factory.mktemp("refs"))


def _silent(fn, *args):
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return fn(*args)


_CONTEXT = None


def _context():
    """The multiprocessing fork server whose children run the commands (see tests/_kill_child.py)."""
    global _CONTEXT
    if _CONTEXT is None:
        _CONTEXT = multiprocessing.get_context("forkserver")
        _CONTEXT.set_forkserver_preload(["tests._kill_child"])
    return _CONTEXT


def spawn(argv: list[str], log: Path, die_at: int | None = None, folder: Path | None = None):
    """Start a child running ``main(argv)`` (stderr into ``log``); with ``die_at`` it dies, as under
    SIGKILL, just before its die_at-th rename or unlink under ``folder``."""
    from tests import _kill_child

    proc = _context().Process(target=_kill_child.child, args=(argv, str(log), die_at,
                                                               None if folder is None else str(folder)))
    proc.start()
    return proc


def _wait(proc, timeout: float = 300) -> int:
    proc.join(timeout)
    if proc.exitcode is None:  # a hung command is a failure, not a hung test run
        proc.kill()
        proc.join()
        raise AssertionError(f"a child did not finish within {timeout} s")
    return proc.exitcode


def _prepare(cmd: Command, references: References, folder: Path, variant: str) -> None:
    """Put the complete result ``variant`` (a copy of its reference folder) into a fresh ``folder``."""
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(references.snapshots[(cmd.name, variant)], folder)
    assert visible(folder) == references.refs[cmd.name][variant]


def _state(cmd: Command, refs, folder: Path) -> str:
    """Which complete result the folder holds, after the recovery any next command does: "A" or "B"."""
    recover(folder)
    now = visible(folder)
    found = [v for v in ("A", "B") if refs[cmd.name][v] == now]
    assert found, f"{cmd.name}: the folder holds a mix of results: {sorted(now)}"
    assert hidden_leftovers(folder) == [], f"{cmd.name}: leftovers after recovery"
    if cmd.result is not None:
        manifest = complete_result(folder, cmd.result)
        assert manifest is not None and set(manifest["files"]) == set(now), f"{cmd.name}: marker disagrees"
    if cmd.store is not None:  # no unit lost, changed or half-written; no temporary file left
        assert _store_content(cmd.store_of(folder)) == STORE_CONTENT[cmd.name], f"{cmd.name}: the store changed"
    return found[0]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_kill_at_every_commit_step(name, references, tmp_path):
    refs = references.of(name).refs
    cmd = COMMANDS[name]
    folder = tmp_path / "out"
    for old, new in ([("A", "B")] if cmd.argv["A"] is None else [("A", "B"), ("B", "A")]):
        seen, k = set(), 1
        while True:
            _prepare(cmd, references, folder, old)
            rc = _wait(spawn(cmd.args(new, folder), tmp_path / "log", die_at=k, folder=folder.resolve()))
            assert rc in (0, 137), (tmp_path / "log").read_text()
            seen.add(_state(cmd, refs, folder))
            if rc == 0:
                break
            k += 1
        assert seen == {old, new} and k >= 2  # the kills fell before and after the commit point


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_random_kills(name, references, tmp_path):
    refs, durations = references.of(name).refs, references.durations
    cmd = COMMANDS[name]
    rng = random.Random(f"kills-{name}")
    variants = [v for v in ("A", "B") if cmd.argv[v] is not None]
    lanes = [tmp_path / f"lane{i}" for i in range(PARALLEL)]
    current = {}
    for lane in lanes:
        _prepare(cmd, references, lane, "A")
        current[lane] = "A"
    outcomes = {"old": 0, "new": 0}
    for start in range(0, KILLS, PARALLEL):
        running = []
        for lane in lanes[:KILLS - start]:
            if cmd.fresh is not None and cmd.argv["A"] is None:  # docs: always from the stale pair
                _prepare(cmd, references, lane, "A")
                current[lane] = "A"
            target = "B" if current[lane] == "A" or len(variants) == 1 else "A"
            sig = rng.choice([signal.SIGKILL, signal.SIGINT])
            delay = rng.uniform(0, 1.2 * durations[(name, target)])
            log = lane.with_suffix(".log")
            log.unlink(missing_ok=True)
            running.append((lane, target, sig, log, spawn(cmd.args(target, lane), log), delay))
        # each kill's clock starts when its child runs the command (it opens its log first), not during
        # multiprocessing's own start-up, which is not the suite's code
        begun, killed, deadline = {}, set(), time.perf_counter() + 120
        while len(killed) < len(running) and time.perf_counter() < deadline:
            now = time.perf_counter()
            for i, (lane, target, sig, log, proc, delay) in enumerate(running):
                if i not in begun and (log.exists() or proc.exitcode is not None):
                    begun[i] = now
                if i in begun and i not in killed and now >= begun[i] + delay:
                    killed.add(i)
                    try:
                        os.kill(proc.pid, sig)
                    except ProcessLookupError:
                        pass
            time.sleep(0.0005)
        for lane, target, sig, log, proc, delay in running:
            rc = _wait(proc)
            text = log.read_text()
            assert "Traceback" not in text, text
            if sig == signal.SIGINT:
                assert rc in (0, 130), (rc, text)
                now = visible(lane)  # Ctrl-C never leaves a mix, even before any recovery
                assert now in (refs[name]["A"], refs[name]["B"]), f"{name}: mix after Ctrl-C"
            else:
                assert rc in (0, -signal.SIGKILL), (rc, text)
            state = _state(cmd, refs, lane)
            assert state in (current[lane], target)
            outcomes["new" if state == target and state != current[lane] else "old"] += 1
            current[lane] = state
    assert sum(outcomes.values()) >= KILLS


def _children(pid: int) -> set[int]:
    """The live (not zombie) child processes of ``pid``, from /proc."""
    out = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            state, ppid = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:2]
        except (OSError, ValueError):
            continue
        if int(ppid) == pid and state != "Z":
            out.add(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc")
def test_sigkill_of_table1_ends_its_pool_workers_and_frees_the_folder(tmp_path):
    """``table1 --jobs 2`` killed by SIGKILL once its process pool runs: its workers end within seconds
    (they would otherwise finish their row and wait for work forever, re-parented to init, holding the
    folder's lock), and the next command into the folder is not refused: it resumes and completes.  The
    command runs as a user runs it, in its own Python process (the pool's workers are then its children)."""
    import subprocess
    import sys

    folder = tmp_path / "out"
    argv = ["table1", "--quick", "--tasks", "occurrence,OR", "--jobs", "2", "--quiet", "--out", str(folder)]
    root = Path(__file__).resolve().parents[2]
    with open(tmp_path / "log", "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "app", *argv], cwd=root, stdout=subprocess.DEVNULL,
                                stderr=log, env={**os.environ, "PYTHONPATH": str(root)})
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 120
        while len(workers) < 2 and proc.poll() is None and time.monotonic() < deadline:
            workers = _children(proc.pid)
            time.sleep(0.01)
        assert len(workers) >= 2, f"the pool did not start: {(tmp_path / 'log').read_text()}"
        time.sleep(1.0)  # the workers have taken their rows
        assert proc.poll() is None, "the run ended before it was killed"
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 10
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(w) for w in workers), "the pool workers outlived their killed parent"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for w in workers:
            if _alive(w):
                os.kill(w, signal.SIGKILL)
    assert _silent(main, argv) in (0, 3)  # 3: a verdict undecided at the quick size
    assert complete_result(folder, "table1") is not None
    assert hidden_leftovers(folder) == []
