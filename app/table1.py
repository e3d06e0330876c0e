"""`occ-companion table1`: rebuild the paper's Table 1 under the suite's reconstruction of its tasks.

Trains three-phase, joint GD, output-only and attention-only on occurrence, OR, AND (two heads and one),
ICL bigram, single-location regression and even pairs (``numerics.experiments``), prints the table and writes
table1.json (configuration, package version, command line and every number), table1.md and one figure per
task into --out.  ``--from-json FILE`` rebuilds table1.md and the figures from a results file without
training; ``--rerun FILE`` trains the configuration recorded in it again.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from theory.validation import SettingError

if TYPE_CHECKING:
    from numerics.experiments import table1 as T1

from numerics.experiments.tasks import MIN_D, TASKS

EXIT_USAGE = 2


def _int_at_least(low: int):
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {text!r}") from None
        if v < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {v}")
        return v
    return parse


def _task_list(text: str) -> tuple[str, ...]:
    names = tuple(t.strip() for t in text.split(",") if t.strip())
    lower = {t.lower(): t for t in TASKS}
    out = []
    for n in names:
        if n.lower() not in lower:
            raise argparse.ArgumentTypeError(f"unknown task {n!r}; choose from {','.join(TASKS)}")
        out.append(lower[n.lower()])
    if not out:
        raise argparse.ArgumentTypeError("needs at least one task")
    return tuple(out)


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``table1`` subcommand to an argparse subparsers object and set its ``func``."""
    p = subparsers.add_parser("table1", help="rebuild Table 1 (six tasks, four plans, gap metric)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small run (d = 8, 3 seeds, T = 20; under a minute)")
    p.add_argument("--tasks", type=_task_list, default=None,
                   help=f"comma-separated subset of {','.join(TASKS)} (default: all)")
    p.add_argument("--seeds", type=_int_at_least(1), default=None, help="number of seeds (default 5)")
    p.add_argument("--d", type=_int_at_least(1), default=None, help="alphabet size (default 50)")
    p.add_argument("--steps", type=str, default=None,
                   help="T, the number of phase-3 steps; every plan gets T + 2 steps (default 50)")
    p.add_argument("--icl-loss", choices=["squared", "cross-entropy"], default=None,
                   help="loss of the ICL bigram task: squared on the one-hot answer (default) or cross-entropy "
                        "(the variant); the ICL row then reports cross-entropy risk")
    p.add_argument("--joint-steps", choices=["separate", "shared"], default=None,
                   help="joint GD's step sizes: eta_B and eta_alpha on their own grids (default) or one shared "
                        "step for both layers, searched over both grids (the variant)")
    p.add_argument("--jobs", type=_int_at_least(1), default=2, help="worker processes (default 2)")
    p.add_argument("--out", type=Path, default=Path("results"), help="output folder (default results/)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--from-json", type=Path, default=None, metavar="FILE",
                   help="rebuild table1.md and the figures from a results file (no training)")
    p.add_argument("--rerun", type=Path, default=None, metavar="FILE",
                   help="train the configuration recorded in a results file again")
    p.set_defaults(func=main_args)
    return p


def _steps(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        v = float(text)
    except ValueError:
        raise SettingError(f"--steps must be a finite integer >= 1, got {text!r}") from None
    if not math.isfinite(v) or v < 1 or not v.is_integer():
        raise SettingError(f"--steps must be a finite integer >= 1, got {text!r}")
    return int(v)


def config_from_args(args: argparse.Namespace) -> "T1.Config":
    """The run configuration of the parsed flags; SettingError naming the flag on bad input."""
    from numerics.experiments import (
        table1 as T1,  # heavy (scipy): only when the command runs
    )

    if args.rerun is not None:
        cfg = T1.Config.from_dict(T1.load(args.rerun)["config"])
        cfg.jobs = args.jobs
        return cfg.validate()
    over = {}
    if args.tasks is not None:
        over["tasks"] = args.tasks
    if args.seeds is not None:
        over["seeds"] = args.seeds
    if args.d is not None:
        over["d"] = args.d
    steps = _steps(args.steps)
    if steps is not None:
        over["T"] = steps
    if args.icl_loss is not None:
        over["icl_loss"] = args.icl_loss.replace("-", "_")
    if args.joint_steps is not None:
        over["joint_steps"] = args.joint_steps
    over["jobs"] = args.jobs
    cfg = T1.Config.quick(**over) if args.quick else T1.Config(**over)
    for t in cfg.tasks:
        if cfg.d < MIN_D[t]:
            raise SettingError(f"--d {cfg.d} is too small for task {t} (needs --d >= {MIN_D[t]})")
    return cfg.validate()


def main_args(args: argparse.Namespace) -> int:
    """Run the subcommand; 0 on success, 2 on bad input (message on stderr, before any work)."""
    from numerics.experiments import (
        table1 as T1,  # heavy (scipy): only when the command runs
    )

    try:
        if args.from_json is not None:
            results = T1.load(args.from_json)
            paths = T1.write_rendered(results, args.out)
        else:
            cfg = config_from_args(args)
            rest = sys.argv[sys.argv.index("table1") + 1:] if "table1" in sys.argv else sys.argv[1:]
            command = ["occ-companion", "table1", *rest]
            results = T1.run(cfg, quiet=args.quiet, command=command)
            paths = T1.write(results, args.out)
    except SettingError as exc:
        print(f"occ-companion table1: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (OSError, ValueError, KeyError) as exc:
        if args.from_json is None and args.rerun is None:
            raise
        print(f"occ-companion table1: error: cannot read results file: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print("\n".join(T1.table_rows_markdown(results)))
    print("wrote " + ", ".join(str(p) for p in paths), file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point (``python3 -m app.table1 ...``) until the lead wires it into the CLI."""
    parser = argparse.ArgumentParser(prog="occ-companion")
    sub = parser.add_subparsers(dest="cmd", required=True)
    add_parser(sub)
    args = parser.parse_args(["table1", *(sys.argv[1:] if argv is None else argv)])
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
