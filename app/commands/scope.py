"""occ-companion scope: how far the theorem reaches once its simplifications are relaxed.

Five studies (numerics.scope.STUDIES): regime (how conservative the step-size regime is), kqv (key, query
and value matrices), sgd (stochastic gradients), laws (other length laws and the logistic loss), samples (the
sample-complexity constant).  Each study's units run as generic units of numerics.units, as the sweep's
do: the same content-addressed results store (--store, shared with the sweep, keyed by each unit's function,
arguments, the package version and a digest of the code the study's module imports), the same dask execution
loop (a LocalCluster, or the running scheduler at --scheduler), so a killed run resumes where it stopped and a
finished one re-renders without computing.

Writes into --out: scope.json (per study its full configuration, summary, unit counts and failures; the
version, commit, command and timings), scope.md (one section per study: a table and a one-paragraph verdict)
and one figure per study (scope_NAME.png).  Exit status: 0 every unit finished, 3 some unit failed (its study's
summary leaves it out and says so), 2 bad usage, 130 interrupted (finished units are in the store).
"""
from __future__ import annotations

import argparse
import datetime
import sys
import tempfile
import time
from pathlib import Path

from theory.validation import SettingError

from app import exitcodes
from app.io import OutputFolder
from app.options import add_cluster_options

OWNS = ("scope.json", "scope.md", "scope_*.png")


def _study_list(text: str) -> tuple[str, ...]:
    from numerics.scope import STUDIES

    names = tuple(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
    if not names:
        raise argparse.ArgumentTypeError("needs at least one study name")
    bad = [n for n in names if n not in STUDIES]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown study {', '.join(map(repr, bad))}; the studies are "
                                         f"{', '.join(STUDIES)}")
    return names


def add_parser(subparsers) -> argparse.ArgumentParser:
    from numerics.scope import STUDIES

    p = subparsers.add_parser("scope", help="how far the theorem reaches: five studies on the sweep runner",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--studies", type=_study_list, default=None, metavar="LIST",
                   help=f"comma-separated studies among {','.join(STUDIES)} (default: all five)")
    p.add_argument("--quick", action="store_true", help="the small size each study defines for CI")
    p.add_argument("--out", type=Path, default=Path("scope"), help="output folder (default scope/)")
    add_cluster_options(p, shared="with the sweep")
    p.add_argument("--quiet", action="store_true", help="no progress")
    p.set_defaults(func=main_args)
    return p


def selected(requested: tuple[str, ...] | None) -> list[str]:
    """The studies to run: those requested (checked against ``STUDIES`` by the parser), or all five."""
    from numerics.scope import STUDIES

    return list(STUDIES) if requested is None else list(requested)


def main_args(args: argparse.Namespace) -> int:
    from numerics import units
    from numerics.scope.studies import run_studies

    from app.render import scope as scope_docs
    from app.checkout import git_commit
    from app.commands.sweep import Progress, check_cluster_options, check_store, interrupted

    check_cluster_options(args)
    names = selected(args.studies)
    if not names:
        raise SettingError("no study is on this checkout")
    version = units.package_version()
    check_store(args.store)
    store = units.Store(args.store)
    rest = sys.argv[sys.argv.index("scope") + 1:] if "scope" in sys.argv else []
    command = ["occ-companion", "scope", *rest]
    commit, dirty = git_commit()
    with OutputFolder(args.out, result="scope", owns=OWNS) as out:
        cluster = units.Cluster(args.scheduler, args.workers)
        progress = Progress(args.quiet, "scope")
        cpu0, started = time.process_time(), time.time()
        try:
            n_units, outcome, studies = run_studies(names, args.quick, store, cluster, progress, version)
        except KeyboardInterrupt:
            return interrupted("scope", args.store, args.out, "unit")
        except units.SchedulerUnreachable as exc:
            raise SettingError(f"--scheduler {exc}") from None
        finally:
            progress.close()
        record = {"suite": "occurrence-companion", "version": version, "code": units.code_digest(), "commit": commit,
                  "dirty": dirty, "command": command, "quick": args.quick, "store": str(args.store),
                  "scheduler": cluster.describe("unit"), "workers": cluster.workers, "units": n_units,
                  "trained": len(outcome.trained),
                  "reused": len(outcome.reused), "failed": len(outcome.failed), "wall_s": time.time() - started,
                  "units_cpu_s": sum(outcome.unit_cpu.values()),
                  "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  "studies": studies}
        record["driver_cpu_s"] = time.process_time() - cpu0
        with out.transaction() as tx:
            paths = [tx.write_text("scope.json", scope_docs.dumps(record))]
            with tempfile.TemporaryDirectory() as tmp:  # figure(summary, path) writes a path: staged from there
                for name, study in record["studies"].items():
                    png = Path(tmp) / f"scope_{name}.png"
                    scope_docs.renderer(name).figure(study["summary"], png)
                    paths.append(tx.write(png.name, lambda fh, data=png.read_bytes(): fh.write(data)))
            paths.append(tx.write_text("scope.md", scope_docs.page(record)))
    print(scope_docs.summary_text(record))
    print("wrote " + ", ".join(str(x) for x in paths), file=sys.stderr)
    return exitcodes.UNDECIDED if outcome.failed or any(s["failed"] for s in record["studies"].values()) \
        else exitcodes.DONE
