"""`occ-companion sweep`: Table 1 under every reading of a readings file, on a dask.distributed cluster.

The readings file (TOML; the default ships with the package, numerics/experiments/readings.toml) names the
axes of the protocol whose product is swept, the tasks, the reported seeds and the alphabet sizes d.  Every
(reading, row, plan) step-size search, every reported seed and every capacity ceiling is one task on the
cluster: a LocalCluster sized to this machine's cores by default, or the running scheduler at --scheduler.
Finished tasks are kept in the results store (--store, shared between sweeps, keyed by each task's full
configuration, the package version and a digest of the computing code), so a killed sweep resumes where it
stopped and a finished one re-renders without training; a corrupt store entry is detected and trained again.

Writes into --out: sweep.json (the readings file used, the configuration, the counts, every verdict per
reading and d, the failures with their errors), tidy.csv and tidy.parquet (one row per reading, row, plan, seed
and d), verdicts.csv, sweep.md (the robustness table), one heat map per d and one page per reading.
``--no-train`` renders what the store holds without starting a cluster (cells with units missing are listed as
incomplete).  Exit status: 0 every task finished, 3 some task failed (its verdicts are refused) or some cell is
incomplete, 2 bad usage, 130 interrupted (finished tasks are in the store).
"""
from __future__ import annotations

import argparse
import datetime
import os
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path

from theory.validation import SettingError

from app import exitcodes
from app.io import OutputFolder
from app.options import workers_option

OWNS = ("sweep.json", "sweep.md", "tidy.csv", "tidy.parquet", "verdicts.csv", "sweep_*.png", "reading_*.md")
LOG_EVERY_S = 60.0
"""Progress lines when stderr is not a terminal: one every LOG_EVERY_S seconds."""


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
    p.add_argument("--d", type=_int_list, default=None, metavar="LIST",
                   help="run only these of the file's alphabet sizes (comma-separated; default: all)")
    p.add_argument("--store", type=Path, default=Path("sweep-store"), metavar="DIR",
                   help="results store, shared between sweeps (default sweep-store/)")
    p.add_argument("--out", type=Path, default=Path("sweep"), help="output folder (default sweep/)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="address of a running dask scheduler (e.g. tcp://host:8786); default: a LocalCluster")
    p.add_argument("--workers", type=workers_option(), default=None,
                   help=f"LocalCluster worker processes (default: the cores, {os.cpu_count()})")
    p.add_argument("--dry-run", action="store_true", help="print the plan (cells, tasks, stored) and stop")
    p.add_argument("--no-train", action="store_true",
                   help="render from the store only (no cluster); cells with units missing are reported as "
                        "incomplete and left out of the tables")
    p.add_argument("--quiet", action="store_true", help="no progress")
    p.set_defaults(func=main_args)
    return p


def _grid(args):
    from numerics.experiments import readings as RD

    grid = RD.load(args.readings)
    if args.d is not None:
        bad = [d for d in args.d if d not in grid.d]
        if bad:
            raise SettingError(f"--d {','.join(map(str, bad))} is not among the readings file's d = "
                               f"{','.join(map(str, grid.d))}")
        grid.d = tuple(d for d in grid.d if d in args.d)
        grid.limits = tuple(lim for lim in grid.limits if set(lim.d) & set(grid.d))
    if args.no_train and (args.scheduler is not None or args.workers is not None):
        raise SettingError("--no-train starts no cluster; drop --scheduler and --workers")
    check_cluster_options(args)
    return grid


class Progress:
    """done / running / failed counts and time left: a tqdm bar on a terminal, a line a minute otherwise."""

    def __init__(self, quiet: bool, name: str = "sweep"):
        from tqdm import tqdm

        self.tty = sys.stderr.isatty() and not quiet
        self.quiet = quiet
        self.name = name
        self.bar = tqdm(total=0, desc=f"{name} tasks", unit="task", disable=not self.tty, dynamic_ncols=True)
        self.last_log = 0.0
        self.trained0 = None

    @staticmethod
    def running(client) -> int:
        if client is None:
            return 0
        try:
            return sum(len(v) for v in client.processing().values())
        except Exception:  # noqa: BLE001 - the count is cosmetic; a scheduler that does not answer shows 0
            return 0

    def __call__(self, c: dict, client) -> None:
        finished = c["done"] + c["reused"] + c["failed"] + c["skipped"]
        left_s = None
        if c["done"]:
            left = c["total"] - finished
            left_s = c["elapsed"] / c["done"] * left if left else 0.0
        text = (f"done {c['done']} (stored before {c['reused']}), running {self.running(client)}, failed {c['failed']}"
                + (f", skipped {c['skipped']}" if c["skipped"] else ""))
        if self.tty:
            self.bar.total = c["total"]
            self.bar.n = finished
            self.bar.set_postfix_str(text, refresh=True)
        elif not self.quiet and (time.time() - self.last_log >= LOG_EVERY_S or finished == c["total"]):
            self.last_log = time.time()
            eta = "" if left_s is None else f", about {left_s / 60:.0f} min left"
            print(f"{self.name}: {finished}/{c['total']} tasks; {text}; {c['elapsed'] / 60:.1f} min{eta}",
                  file=sys.stderr, flush=True)

    def close(self):
        self.bar.close()


def check_store(store: Path) -> None:
    """The results store must be a writable folder before any work (a SettingError, exit 2, otherwise)."""
    try:
        store.mkdir(parents=True, exist_ok=True)
        # an unnamed file (O_TMPFILE where the system has it): a kill here leaves nothing in the store
        with tempfile.TemporaryFile(dir=store):
            pass
    except OSError as exc:
        raise SettingError(f"--store {store} is not a writable folder ({exc.strerror or exc}); "
                           "choose another --store") from None


def check_cluster_options(args) -> None:
    """--scheduler and --workers exclude each other (the LocalCluster's size against a running cluster)."""
    if args.scheduler is not None and args.workers is not None:
        raise SettingError("--workers sizes the LocalCluster; with --scheduler the cluster's own workers run")


def client(args):
    import logging

    from distributed import Client, LocalCluster

    if args.scheduler is not None:
        try:
            return Client(args.scheduler, timeout="20s"), None
        except (OSError, TimeoutError) as exc:
            raise SettingError(f"--scheduler {args.scheduler}: cannot connect ({exc})") from None
    import dask

    n = args.workers or os.cpu_count() or 1
    dask.config.set({"distributed.scheduler.worker-saturation": 1.0})  # a worker holds only the task it runs
    # the worker processes ignore Ctrl-C (a terminal sends it to the whole process group): the driver alone
    # handles it, cancels the remaining tasks and closes the cluster (no worker tracebacks)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0",
                               silence_logs=logging.CRITICAL)  # unit errors come back through their futures
    finally:
        signal.signal(signal.SIGINT, previous)
    return Client(cluster), cluster


def main_args(args: argparse.Namespace) -> int:
    from numerics.experiments import sweep as SW

    from app.render import sweep as SR
    from app.checkout import git_commit

    grid = _grid(args)
    p = SW.plan(grid)
    store = SW.Store(args.store)
    if args.dry_run:
        stored = sum(store.get(k, s) is not None for k, s in {**p.ceilings, **p.searches}.items())
        print(f"{len(p.cells())} cells (reading x d), {len(p.rows)} rows, {len(p.searches)} step-size searches "
              f"({stored} of the searches and ceilings stored), {len(p.ceilings)} capacity ceilings")
        return exitcodes.DONE
    check_store(args.store)
    rest = sys.argv[sys.argv.index("sweep") + 1:] if "sweep" in sys.argv else []
    command = ["occ-companion", "sweep", *rest]
    commit, dirty = git_commit()
    with OutputFolder(args.out, result="sweep", owns=OWNS) as out:
        cluster = Cluster(args)
        progress = Progress(args.quiet)
        cpu0, started = time.process_time(), time.time()
        outcome = None
        run = {"started": datetime.datetime.fromtimestamp(started, datetime.timezone.utc).isoformat(timespec="seconds"),
               "run_id": uuid.uuid4().hex, "pid": os.getpid(), "command": command, "readings_sha256": grid.sha256,
               "version": p.version, "code": p.code, "d": list(grid.d), "scheduler": args.scheduler or "LocalCluster"}
        store.log_run(run | {"event": "start"})  # SIGKILL or a crash leaves this line alone (SR.invocations)
        try:
            outcome = SW.execute(p, store, None if args.no_train else cluster.connect, progress)
        except KeyboardInterrupt:
            return interrupted("sweep", args.store, args.out)
        finally:
            progress.close()
            cluster.close()
            store.log_run(run | {"event": "end", "wall_s": time.time() - started, "completed": outcome is not None,
                                 "trained": None if outcome is None else len(outcome.trained),
                                 "trained_cpu_s": None if outcome is None else outcome.cpu_s})
        summary = SR.summarise(p, outcome, store)
        summary.update({"command": command, "commit": commit, "dirty": dirty, "store": str(args.store),
                        "scheduler": cluster.describe(), "workers": cluster.workers,
                        "driver_cpu_s": time.process_time() - cpu0,
                        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")})
        with out.transaction() as tx:
            paths = SR.write(summary, tx)
    print(SR.summary_text(summary))
    print("wrote " + ", ".join(str(x) for x in paths[:4]) + (f" and {len(paths) - 4} more" if len(paths) > 4 else ""),
          file=sys.stderr)
    return exitcodes.UNDECIDED if outcome.failed or summary["incomplete_cells"] else exitcodes.DONE


class Cluster:
    """The dask client of a command: connected at the first unit to train (``connect``), closed by ``close``
    (which keeps the number of workers it had)."""

    def __init__(self, args):
        self.args = args
        self.opened: list = []
        self.workers = 0

    def connect(self):
        self.opened.extend(client(self.args))
        return self.opened[0]

    def close(self) -> None:
        if self.opened:
            try:
                self.workers = len(self.opened[0].scheduler_info().get("workers", {}))
            except Exception:  # noqa: BLE001 - a scheduler going away: the count is informative only
                pass
            close(*self.opened)

    def describe(self, unit: str = "task") -> str:
        return self.args.scheduler or (f"LocalCluster ({self.workers} workers)" if self.opened
                                       else f"none (every {unit} stored)")


def interrupted(command: str, store: Path, out: Path, unit: str = "task") -> int:
    """The message and exit status of a command interrupted while its units ran."""
    print(f"occ-companion {command}: interrupted; every finished {unit} is kept in {store} (run the same "
          f"command to resume); {out} is unchanged", file=sys.stderr)
    return exitcodes.INTERRUPTED


def close(client, cluster) -> None:
    try:
        client.close()
        if cluster is not None:
            cluster.close()
    except Exception:  # noqa: BLE001 - closing a cluster that is already going away
        pass
