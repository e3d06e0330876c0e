"""occ-companion lag: the lag map of every Table 1 row and the page docs/lag.md.

Joint GD over a log grid of rho = eta_att / eta_out (rho = 1, one shared rate, included; the common scale chosen
per rho by the reading's extending grid) and over the readout's starting scale, with every lag measure of the
row and the attribution (numerics.experiments.lag_map).  Each cell (row, rho, start) is one unit of the sweep's
results store (--store, shared with the sweep and scope, keyed by the cell's arguments, the package version and
a digest of the code it imports), run on the same dask loop (a LocalCluster, or the running scheduler at
--scheduler): a killed run resumes where it stopped, and a finished one re-renders without training.

Writes into the checkout at --root: docs/lag_map/lag_map.json (the map and its configuration),
docs/lag_map/lag_ROW.png (one figure per row: the lag ratio and the final risk against rho and against the
readout's start) and docs/lag.md (the page, which occ-companion docs then renders the same from the record).
--quick is the small map CI runs (d = 8, two seeds, four rho, two starts, short budgets).  Exit status: 0 every
cell finished, 3 some cell failed (the map leaves it out and says so), 2 bad usage, 130 interrupted (finished
cells are in the store).
"""
from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
import time
from pathlib import Path

from app import exitcodes
from app.io import OutputFolder
from app.options import add_cluster_options, int_at_least

OWNS = ("docs/lag_map/lag_map.json", "docs/lag_map/lag_*.png")


def _tasks(text: str) -> tuple[str, ...]:
    from numerics.experiments.tasks import TASKS

    names = tuple(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
    bad = [n for n in names if n not in TASKS]
    if not names or bad:
        raise argparse.ArgumentTypeError(f"give a comma-separated list of tasks among {','.join(TASKS)}")
    return names


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("lag", help="the lag map of every Table 1 row and docs/lag.md, on the sweep runner",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="the small map for CI (d = 8, about a minute of CPU)")
    p.add_argument("--d", type=int_at_least(3), default=None, help="alphabet size (default 50; quick: 8)")
    p.add_argument("--seeds", type=int_at_least(1), default=None, help="reported seeds per cell (default 3; quick: 2)")
    p.add_argument("--tasks", type=_tasks, default=None, metavar="LIST", help="comma-separated tasks (default: all)")
    p.add_argument("--root", type=Path, default=None,
                   help="the checkout to write docs/lag.md and docs/lag_map/ into (default: this checkout)")
    add_cluster_options(p, shared="with the sweep")
    p.add_argument("--quiet", action="store_true", help="no progress")
    p.set_defaults(func=main_args)
    return p


def map_config(args: argparse.Namespace):
    """The map's configuration from the flags (``lag_map.MapConfig``, validated)."""
    from numerics.experiments import lag_map

    values = {k: v for k, v in (("d", args.d), ("seeds", args.seeds), ("tasks", args.tasks)) if v is not None}
    return (lag_map.MapConfig.quick(**values) if args.quick else lag_map.MapConfig(**values)).validate()


def main_args(args: argparse.Namespace) -> int:
    from numerics import units
    from numerics.experiments import lag_map
    from theory.validation import SettingError

    from app.checkout import checkout_root, git_commit
    from app.commands.sweep import Progress, check_cluster_options, check_store, interrupted
    from app.options import UsageError
    from app.render import lag as lag_render

    check_cluster_options(args)
    root = args.root.resolve() if args.root is not None else checkout_root()
    if not (root / "docs").is_dir():
        raise UsageError(f"--root {root}: not a checkout of the repository (no docs/ there)")
    cfg = map_config(args)
    check_store(args.store)
    store = units.Store(args.store)
    rest = sys.argv[sys.argv.index("lag") + 1:] if "lag" in sys.argv else []
    commit, dirty = git_commit()
    with OutputFolder(root, result="lag", flag="--root", owns=OWNS) as out:
        cluster = units.Cluster(args.scheduler, args.workers)
        progress = Progress(args.quiet, "lag")
        started = time.time()
        try:
            record, outcome = lag_map.run_map(cfg, store, cluster, progress)
        except KeyboardInterrupt:
            return interrupted("lag", args.store, root / lag_render.MAP_DIR, "cell")
        except units.SchedulerUnreachable as exc:
            raise SettingError(f"--scheduler {exc}") from None
        finally:
            progress.close()
        record.update({"suite": "occurrence-companion", "version": units.package_version(), "quick": args.quick,
                       "command": ["occ-companion", "lag", *[a for a in rest if a not in ("--quiet",)]],
                       "commit": commit, "dirty": dirty, "trained": len(outcome.trained),
                       "reused": len(outcome.reused), "wall_s": time.time() - started,
                       "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")})
        text = json.dumps(record, indent=1) + "\n"
        with out.transaction(marker=False) as tx:
            paths = [tx.write_text(str(lag_render.MAP_RECORD), text)]
            with tempfile.TemporaryDirectory() as tmp:  # the figure writes a path: staged from there
                for name in record["rows"]:
                    png = Path(tmp) / lag_render.figure_name(name)
                    lag_render.figure(record, name, png)
                    paths.append(tx.write(str(lag_render.MAP_DIR / png.name),
                                          lambda fh, data=png.read_bytes(): fh.write(data)))
            paths.append(tx.write_text(str(lag_render.PAGE), lag_render.page_with_record(text)))
    for line in lag_render.summary_lines(record):
        print(line)
    print("wrote " + ", ".join(str(x) for x in paths), file=sys.stderr)
    return exitcodes.UNDECIDED if record["failed"] else exitcodes.DONE
