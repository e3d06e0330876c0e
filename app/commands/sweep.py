"""occ-companion sweep: Table 1 under every reading of a readings file, on a dask.distributed cluster.

The readings file (TOML; the default ships with the package, numerics/experiments/readings.toml) names the
axes of the protocol whose product is swept, the tasks, the reported seeds and the alphabet sizes d;
--quick runs the small file shipped beside it (readings_quick.toml, about a minute of CPU).  Every
(reading, row, plan) step-size search, every reported seed and every capacity ceiling is one task on the
cluster: a LocalCluster sized to this machine's cores by default, or the running scheduler at --scheduler.
Finished tasks are kept in the results store (--store, shared between sweeps, keyed by each task's full
configuration, the package version and a digest of the code the tasks import: docstrings, comments and the
verdict rules are not in it), so a killed sweep resumes where it stopped and a finished one re-renders without
training; a corrupt store entry is moved to corrupt/ and trained again (by a run that trains).

Writes into --out: sweep.json (the readings file used, the configuration, the command, with --store, --out
and --readings inside the repository relative to its root, the counts, every verdict per reading and d, the
failures with their errors), tidy.csv and tidy.parquet (one row per reading, row, plan, seed
and d), verdicts.csv, sweep.md (the robustness table), one heat map per d and one page per reading.
--no-train renders what the store holds without starting a cluster (cells with units missing are listed as
incomplete); --from-tables DIR renders the pages again from the tables a sweep wrote into DIR (sweep.json and
tidy.parquet, or tidy.csv) without the store, so the committed docs/sweep/ re-renders from its own tables
(occ-companion sweep --from-tables docs/sweep --out docs/sweep).  Exit status: 0 every task finished, 3 some
task failed (its verdicts are refused) or some cell is incomplete, 2 bad usage, 130 interrupted (finished
tasks are in the store).
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
from pathlib import Path

from theory.validation import SettingError

from app import exitcodes
from app.io import OutputFolder
from app.commands.table1 import MAX_SEED_ID
from app.options import add_cluster_options, int_at_least

OWNS = ("sweep.json", "sweep.md", "tidy.csv", "tidy.parquet", "verdicts.csv", "sweep_*.png", "reading_*.md")
LOG_EVERY_S = 60.0
"""Progress lines when stderr is not a terminal: one every LOG_EVERY_S seconds as tasks finish."""
HEARTBEAT_S = 30.0
"""Without a terminal, a line at least every HEARTBEAT_S seconds while tasks run, whether or not one finishes,
so that a log shows the run is alive."""


def _int_list(text: str) -> tuple[int, ...]:
    try:
        out = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated integers, got {text!r}") from None
    if not out:
        raise argparse.ArgumentTypeError("needs at least one value")
    return out


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("sweep", help="Table 1 under every reading of a readings file, on a dask cluster",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--readings", type=Path, default=None, metavar="FILE",
                   help="readings file (TOML; default: the shipped numerics/experiments/readings.toml)")
    p.add_argument("--quick", action="store_true",
                   help="a try of the sweep in about a minute of CPU: the small readings file shipped beside the "
                        "default (numerics/experiments/readings_quick.toml: four readings at d = 8), with the "
                        "same --store and --out defaults")
    p.add_argument("--d", type=_int_list, default=None, metavar="LIST",
                   help="run only these of the file's alphabet sizes (comma-separated; default: all)")
    p.add_argument("--out", type=Path, default=Path("sweep"), help="output folder (default sweep/)")
    add_cluster_options(p, shared="between sweeps")
    p.add_argument("--seed-base", type=int_at_least(0, MAX_SEED_ID), default=None,
                   help="first reported seed id of every cell (default: the readings file's [config], else 0)")
    p.add_argument("--tuning-seed-base", type=int_at_least(0, MAX_SEED_ID), default=None,
                   help="first tuning seed id of every cell (default: the readings file's [config], else 1000); "
                        "must not overlap the reported ids")
    p.add_argument("--dry-run", action="store_true", help="print the plan (cells, tasks, stored) and what is left to train, with its CPU "
                   "estimated from the stored units of the same kind, task, heads, plan and d (extrapolated from two smaller "
                   "d where none is stored at its own), and stop")
    p.add_argument("--no-train", action="store_true",
                   help="render from the store only (no cluster); cells with units missing are reported as "
                        "incomplete and left out of the tables")
    p.add_argument("--from-tables", type=Path, default=None, metavar="DIR",
                   help="render the pages again from the tables a sweep wrote into DIR (sweep.json and tidy.parquet "
                        "or tidy.csv), without the store or a cluster; the readings and the store are not read")
    p.add_argument("--quiet", action="store_true", help="no progress")
    p.set_defaults(func=main_args)
    return p


def _grid(args):
    """The readings file's grid, after the checks of the flags against it and each other."""
    from numerics.experiments import readings
    from numerics.experiments import sweep

    if args.quick and args.readings is not None:
        raise SettingError("--quick runs the shipped small readings file; drop --readings (or --quick)")
    grid = readings.load(sweep.QUICK_FILE if args.quick else args.readings)
    if args.d is not None:
        bad = [d for d in args.d if d not in grid.d]
        if bad:
            raise SettingError(f"--d {','.join(map(str, bad))} is not among the readings file's d = "
                               f"{','.join(map(str, grid.d))}")
    seeds = {k: getattr(args, k) for k in ("seed_base", "tuning_seed_base") if getattr(args, k) is not None}
    if seeds:
        grid = readings.with_config(grid, seeds)
    if args.no_train and (args.scheduler is not None or args.workers is not None):
        raise SettingError("--no-train starts no cluster; drop --scheduler and --workers")
    check_cluster_options(args)
    return grid


class Progress:
    """done / running / failed counts and time left: a tqdm bar on a terminal; otherwise a line a minute as
    tasks finish, and a heartbeat line when neither a line was printed nor a task finished for ``heartbeat_s``
    seconds while tasks run."""

    def __init__(self, quiet: bool, name: str = "sweep", heartbeat_s: float = HEARTBEAT_S):
        import threading

        from tqdm import tqdm

        self.tty = sys.stderr.isatty() and not quiet
        self.quiet = quiet
        self.name = name
        self.bar = tqdm(total=0, desc=f"{name} tasks", unit="task", disable=not self.tty, dynamic_ncols=True)
        self.last_log = 0.0
        self.counts: dict | None = None
        self.counted_at = 0.0
        self.heartbeat_s = heartbeat_s
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.heart = None
        if not self.tty and not quiet:
            self.heart = threading.Thread(target=self._beat, name=f"{name}-heartbeat", daemon=True)
            self.heart.start()

    @staticmethod
    def _finished(c: dict) -> int:
        return c["done"] + c["reused"] + c["failed"] + c["skipped"]

    def __call__(self, c: dict) -> None:
        finished = self._finished(c)
        text = self._text(c)
        with self.lock:
            self.counts, self.counted_at = dict(c), time.time()
        if self.tty:
            self.bar.total = c["total"]
            self.bar.n = finished
            self.bar.set_postfix_str(text, refresh=True)
        elif not self.quiet and (time.time() - self.last_log >= LOG_EVERY_S or finished == c["total"]):
            self._log(c)

    @staticmethod
    def _text(c: dict) -> str:
        return (f"done {c['done']} (stored before {c['reused']}), running {c['running']}, failed {c['failed']}"
                + (f", skipped {c['skipped']}" if c["skipped"] else ""))

    def _log(self, c: dict, note: str = "") -> None:
        if c["done"]:
            # the total moves as the run learns its rows (up for a bimodal row's further seeds, down where
            # draws share seed units), so the tasks left are an estimate; the tasks of a larger d come later
            # and take longer, so the time left is said to be at this run's rate so far
            left = max(c["total"] - self._finished(c), 0)
            left_s = c["elapsed"] / c["done"] * left
            eta = f", about {left_s / 60:.0f} min left at this run's rate so far" if left else ", none left"
        else:
            eta = ""
        with self.lock:
            self.last_log = time.time()
            print(f"{self.name}: {self._finished(c)}/{c['total']} tasks; {self._text(c)}; {c['elapsed'] / 60:.1f} "
                  f"min{eta}{note}", file=sys.stderr, flush=True)

    def _beat(self) -> None:
        """The heartbeat thread: while tasks are left, a line when neither a line was printed nor a task
        finished for ``heartbeat_s``."""
        while not self.stopped.wait(self.heartbeat_s / 4):
            with self.lock:
                c, at, quiet_for = self.counts, self.counted_at, time.time() - self.last_log
            if (c is None or self._finished(c) >= c["total"] or quiet_for < self.heartbeat_s
                    or time.time() - at < self.heartbeat_s):
                continue
            self._log(c | {"elapsed": c["elapsed"] + time.time() - at},
                      f"; alive, no task finished in the last {(time.time() - at) / 60:.1f} min")

    def close(self):
        self.stopped.set()
        if self.heart is not None:
            self.heart.join()
        self.bar.close()


def check_store(store: Path) -> None:
    """The results store must be a writable folder before any work (a SettingError, exit 2, otherwise)."""
    from numerics import units

    try:
        units.Store(store).ensure_writable()
    except OSError as exc:
        raise SettingError(f"--store {store} is not a writable folder ({exc.strerror or exc}); "
                           "choose another --store") from None


def check_cluster_options(args) -> None:
    """--scheduler and --workers exclude each other (the LocalCluster's size against a running cluster), and
    --scheduler is an address of the form tcp://host:port (``units.scheduler_address``), before any work."""
    from numerics import units

    if args.scheduler is not None and args.workers is not None:
        raise SettingError("--workers sizes the LocalCluster; with --scheduler the cluster's own workers run")
    if args.scheduler is not None:
        try:
            units.scheduler_address(args.scheduler)
        except SettingError as exc:
            raise SettingError(f"--scheduler {exc}") from None


FROM_TABLES_EXCLUDES = (("readings", "--readings"), ("quick", "--quick"), ("d", "--d"), ("scheduler", "--scheduler"),
                       ("workers", "--workers"), ("dry_run", "--dry-run"), ("no_train", "--no-train"))
"""The flags --from-tables would ignore (it reads the readings, the cells and d from the tables)."""


def from_tables(args: argparse.Namespace) -> int:
    """--from-tables: the pages of the sweep whose tables are in ``args.from_tables``, written into --out."""
    from app.render import sweep as sweep_render

    given = [flag for name, flag in FROM_TABLES_EXCLUDES if getattr(args, name) not in (None, False)]
    if given:
        raise SettingError(f"--from-tables renders the recorded sweep; drop {', '.join(given)}")
    try:
        summary = sweep_render.from_tables(args.from_tables)
    except FileNotFoundError as exc:
        raise SettingError(f"--from-tables {args.from_tables} holds no sweep tables ({exc.filename} is missing)") \
            from None
    except (ValueError, KeyError, TypeError) as exc:
        raise SettingError(f"--from-tables {args.from_tables}: {exc}") from None
    if "beside" not in summary:  # a record from before the lag map was counted: the one beside --out
        summary["beside"] = lag_beside(args.out)
    with OutputFolder(args.out, result="sweep", owns=OWNS) as out:
        with out.transaction() as tx:
            paths = sweep_render.write(summary, tx)
    print(f"rendered from the tables in {args.from_tables}, as recorded: " + sweep_render.summary_text(summary))
    print("wrote " + ", ".join(str(x) for x in paths[:4]) + (f" and {len(paths) - 4} more" if len(paths) > 4 else ""),
          file=sys.stderr)
    return exitcodes.UNDECIDED if summary["failures"] or summary["incomplete_cells"] else exitcodes.DONE


def lag_beside(out: Path) -> list[dict]:
    """The lag map recorded beside --out (``app.render.sweep.lag_beside``), a record it cannot read refused as
    bad usage that names the file."""
    from app.render import sweep as sweep_render

    try:
        return sweep_render.lag_beside(out)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SettingError(f"--out {out}: the lag map beside it, {sweep_render.lag_beside_path(out)}, cannot be "
                           f"read as a lag map record ({type(exc).__name__}: {exc})") from None


def left_line(n: dict) -> str:
    """The dry run's line on what is left to train (``sweep.survey``) and its estimated CPU: measured means
    and the rougher extrapolation to a larger d said apart."""
    left = n["to_train"]
    head = (f"to train: {left['searches']} searches, {left['ceilings']} ceilings and about {left['seeds']} seed "
            "tasks")
    if not sum(left.values()):
        return head + "; nothing left"
    extrapolated = n.get("extrapolated", 0)
    measured = sum(left.values()) - n["unestimated"] - extrapolated
    if not measured and not extrapolated:
        return head + ("; no estimate of their CPU (no stored unit of their kind, task, heads, plan and d, nor of "
                       "their class at two smaller d)")
    parts = []
    if measured:
        parts.append(f"{n['estimate_cpu_s'] / 3600:.1f} h of CPU for {measured} of them, each the mean of the stored "
                     "units of its kind, task, heads, plan, d, optimizer and budget trained by this code and version"
                     + (f" ({n['coarse']} from those of the same d under another optimizer or budget)"
                        if n["coarse"] else ""))
    if extrapolated:
        h = n["extrapolated_cpu_s"] / 3600
        parts.append(f"roughly {float(f'{h:.2g}'):.0f} h" if h >= 10 else f"roughly {h:.2g} h")  # a rough figure
        parts[-1] += (f" for {extrapolated}{' more' if measured else ''}, extrapolated from their class at the two "
                      "largest smaller d stored (a power law in d, its exponent at least 0)")
    if n["unestimated"]:
        parts.append(f"{n['unestimated']} not estimated (no such unit stored yet)")
    return head + "; " + "; ".join(parts)


def main_args(args: argparse.Namespace) -> int:
    from numerics import units
    from numerics.experiments import sweep as sweep_run
    from app.render import sweep as sweep_render
    from app.checkout import git_commit

    if args.from_tables is not None:
        return from_tables(args)
    grid = _grid(args)
    store = units.Store(args.store)
    if args.dry_run:
        n = sweep_run.survey(grid, store, args.d)
        print(f"{n['cells']} cells (reading x d), {n['rows']} rows, {n['searches']} step-size searches "
              f"({n['stored']} of the searches and ceilings stored), {n['ceilings']} capacity ceilings, "
              f"{n['seeds']} seed tasks (one per reported seed of each search): "
              f"{n['searches'] + n['ceilings'] + n['seeds']} tasks in all")
        print(left_line(n))
        return exitcodes.DONE
    beside = lag_beside(args.out)  # read before any work: a broken record is refused now, not after hours
    check_store(args.store)
    rest = sys.argv[sys.argv.index("sweep") + 1:] if "sweep" in sys.argv else []
    command = ["occ-companion", "sweep", *recorded_folders(rest)]
    commit, dirty = git_commit()
    with OutputFolder(args.out, result="sweep", owns=OWNS) as out:
        cluster = units.Cluster(args.scheduler, args.workers)
        progress = Progress(args.quiet)
        cpu0 = time.process_time()
        try:
            if not args.quiet and not args.no_train:  # what is left, by the stored units (the dry run's line)
                left = sweep_run.survey(grid, store, args.d)
                if sum(left["to_train"].values()):
                    print(f"sweep: {left_line(left)}", file=sys.stderr, flush=True)
            sweep = sweep_run.run_sweep(grid, store, cluster, progress, d=args.d, train=not args.no_train, command=command)
        except KeyboardInterrupt:
            return interrupted("sweep", args.store, args.out)
        except units.SchedulerUnreachable as exc:
            raise SettingError(f"--scheduler {exc}") from None
        finally:
            progress.close()
        summary = sweep_render.summarise(sweep)
        summary["readings_file"]["path"] = recorded_path(str(summary["readings_file"]["path"]))
        summary.update({"command": command, "commit": commit, "dirty": dirty, "beside": beside,
                        "store": recorded_folders(["--store", str(args.store)])[1],
                        "scheduler": cluster.describe(), "workers": cluster.workers,
                        "driver_cpu_s": time.process_time() - cpu0,
                        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")})
        with out.transaction() as tx:
            paths = sweep_render.write(summary, tx)
    print(sweep_render.summary_text(summary))
    print("wrote " + ", ".join(str(x) for x in paths[:4]) + (f" and {len(paths) - 4} more" if len(paths) > 4 else ""),
          file=sys.stderr)
    return exitcodes.UNDECIDED if sweep.outcome.failed or summary["incomplete_cells"] else exitcodes.DONE


FOLDER_FLAGS = ("--readings", "--store", "--out")
"""The flags whose paths a recorded command gives relative to the repository root (``recorded_folders``)."""


def recorded_path(value: str, root: Path | None = None) -> str:
    """A path as a result records it: relative to the repository ``root`` (default: the checkout this code
    runs from) when it lies inside it, so that a committed record names no folder of the machine it ran on;
    as typed otherwise (or outside a checkout)."""
    from app.checkout import NotInCheckout, checkout_root

    if root is None:
        try:
            root = checkout_root()
        except NotInCheckout:
            return value
    root = Path(root).resolve()
    where = Path(os.path.abspath(Path(value).expanduser())).resolve()
    return where.relative_to(root).as_posix() if where.is_relative_to(root) else value


def recorded_folders(argv: list[str], root: Path | None = None) -> list[str]:
    """The arguments as a result records them: the path of each of ``FOLDER_FLAGS`` ("--out X" or "--out=X")
    as ``recorded_path`` gives it; the recorded command reads as run from the root."""
    out, i = list(argv), 0
    while i < len(out):
        flag, eq, value = out[i].partition("=")
        if flag in FOLDER_FLAGS and eq:
            out[i] = f"{flag}={recorded_path(value, root)}"
        elif flag in FOLDER_FLAGS and i + 1 < len(out):
            out[i + 1] = recorded_path(out[i + 1], root)
            i += 1                                  # the value, not a flag
        i += 1
    return out


def interrupted(command: str, store: Path, out: Path, unit: str = "task") -> int:
    """The message and exit status of a command interrupted while its units ran."""
    print(f"occ-companion {command}: interrupted; every finished {unit} is kept in {store} (run the same "
          f"command to resume); {out} is unchanged", file=sys.stderr)
    return exitcodes.INTERRUPTED
