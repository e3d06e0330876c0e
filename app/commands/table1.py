"""occ-companion table1: rebuild the paper's Table 1 under a stated reading of its protocol.

Trains three-phase, joint GD, output-only and attention-only on occurrence, OR, AND (two heads and one), ICL
bigram, single-location regression and even pairs (numerics.experiments): step sizes are chosen on tuning
seeds by extending grids, every plan runs to the same stopping rule and cap, and the reported seeds are
measured (held-out risk, convergence, three attention-lag measures).  Each of the paper's claims gets a
verdict: holds, does not hold, undecided, refused with the artefact it would rest on, not testable in the
row's model class, or depends on tuning (repeated tuning draws that disagree).

Writes into --out: table1.json (every option, the reading, the package version, the git commit, the
command line and every number), table1.md and one figure per row.  Finished rows are saved as they finish
(.occ-table1.partial.json, hidden): a killed run started again with the same options trains only the missing rows.
--seed-base and --tuning-seed-base set the first reported and tuning seed ids (disjoint ranges, checked before
any work); the step sizes are chosen again on --tuning-draws disjoint draws of tuning seeds (table1.json keeps
draw 0's rows as its rows, the others under "tuning_draws").
--from-json FILE re-renders a results file; --rerun FILE trains its recorded configuration again.
While it trains, a line per finished row goes to stderr when stderr is not a terminal (a log, CI; a
terminal shows a progress bar instead; --quiet neither).
Exit status: 0 every verdict decided, 3 some verdict not decided, 2 bad usage, 130 interrupted.
3 is the normal status of --quick: at its small size some rows do not converge within the budget or
cannot represent their task, and their verdicts are refused rather than guessed.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from theory.files import atomic_write_text
from theory.validation import SettingError

from numerics.experiments import protocol, tasks

from app import exitcodes
from app.io import OutputFolder
from app.options import int_at_least, workers_option

OWNS = ("table1.json", "table1.md", "table1_*.png")
"""The artifacts of a table1 result (stale ones of an earlier run are removed when a new result commits)."""
PARTIAL = ".occ-table1.partial.json"
"""Finished rows of a run in progress (not part of the result: written beside it, removed at the commit)."""


def _task_list(text: str) -> tuple[str, ...]:
    lower = {t.lower(): t for t in tasks.TASKS}
    out = []
    for n in (t.strip() for t in text.split(",")):
        if not n:
            continue
        if n.lower() not in lower:
            raise argparse.ArgumentTypeError(f"unknown task {n!r}; choose from {','.join(tasks.TASKS)}")
        if lower[n.lower()] in out:
            raise argparse.ArgumentTypeError(f"task {lower[n.lower()]} is listed twice")
        out.append(lower[n.lower()])
    if not out:
        raise argparse.ArgumentTypeError("needs at least one task")
    return tuple(out)


MAX_D = 400
"""Largest alphabet size table1 accepts: the engine is benchmarked to d = 200 (docs/benchmarks_engine.md); the
exact populations grow linearly in d and take minutes to build beyond a few hundred."""
MAX_STEPS = 10**6
"""Largest --max-steps: 200 times the default cap; every plan of every seed keeps a snapshot per evaluation
(``bank.snapshot_steps``: a set of max-steps / eval_every steps), and even at the engine's fastest step
(docs/benchmarks_engine.md) one plan of one seed at this cap takes minutes."""
MAX_SEEDS = 1000
"""Largest --seeds and --tuning-seeds: each seed trains every plan of every row again."""


class EngineKernels(Sequence):
    """``--kernel``'s choices, ``numerics.experiments.engine.KERNELS``, read from the engine when the choices are
    first used (to check a value or write the help): building the parser, which every command does, does not
    import the engine."""

    def _names(self) -> tuple[str, ...]:
        from numerics.experiments.engine import KERNELS
        return KERNELS

    def __getitem__(self, i):
        return self._names()[i]

    def __len__(self) -> int:
        return len(self._names())


KERNEL_CHOICES = EngineKernels()
TRAINING_FLAGS = ("quick", "tasks", "seeds", "d", "reading", "max_steps", "budget", "k1", "k2", "joint_steps",
                  "optimizer", "tuning_seeds", "icl_loss", "even_pairs_embedding", "kernel", "and_heads_data",
                  "attention_only_readout", "attention_only_readout_scale", "seed_base", "tuning_seed_base",
                  "tuning_draws")
MAX_SEED_ID = 10**9
"""Largest --seed-base and --tuning-seed-base: any id numpy's seeding takes; the bound keeps the ids of a
run (base plus a thousand seeds or draws) far inside it."""
MAX_DRAWS = 100
"""Largest --tuning-draws: each draw runs every row's step-size search again."""


def _k2(text: str):
    if text == "plateau":
        return text
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1 or 'plateau', got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1 or 'plateau', got {v}")
    return v


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``table1`` subcommand and set its ``func``."""
    p = subparsers.add_parser("table1", help="rebuild Table 1 (six tasks, four plans, attention-lag measures)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    size, budget = protocol.QUICK_SIZE, protocol.QUICK_BUDGET
    p.add_argument("--quick", action="store_true", help=f"small run (d = {size['d']}, {size['seeds']} seeds, cap "
                                                        f"{budget['max_steps']} steps; about a minute)")
    p.add_argument("--tasks", type=_task_list, default=None,
                   help=f"comma-separated subset of {','.join(tasks.TASKS)} (default: all)")
    p.add_argument("--seeds", type=int_at_least(1, MAX_SEEDS), default=None, help="reported seeds (default 5)")
    p.add_argument("--d", type=int_at_least(1), default=None, help="alphabet size (default 50)")
    p.add_argument("--reading", choices=tuple(protocol.READINGS), default=None,
                   help="named reading of the protocol (default: default; see docs/table1.md)")
    p.add_argument("--max-steps", type=int_at_least(2, MAX_STEPS), default=None, help="budget cap of every plan (default 5000)")
    p.add_argument("--budget", choices=["plateau", "fixed"], default=None,
                   help="stop at a validation plateau (default) or run exactly --max-steps")
    p.add_argument("--k1", type=int_at_least(1, MAX_STEPS), default=None, help="three-phase: output steps of phase 1 (default 1)")
    p.add_argument("--k2", type=_k2, default=None,
                   help="three-phase: attention steps of phase 2, or 'plateau' (default)")
    p.add_argument("--joint-steps", choices=["shared", "separate"], default=None,
                   help="joint GD: one learning rate for both layers (default) or one per layer")
    p.add_argument("--optimizer", choices=["gd", "momentum", "adam"], default=None,
                   help="optimizer of every plan and phase (default gd)")
    p.add_argument("--tuning-seeds", type=int_at_least(1, MAX_SEEDS), default=None,
                   help="seeds used only to choose step sizes (default 2)")
    p.add_argument("--seed-base", type=int_at_least(0, MAX_SEED_ID), default=None,
                   help="first reported seed id: the reported seeds are BASE, BASE+1, ... (default 0)")
    p.add_argument("--tuning-seed-base", type=int_at_least(0, MAX_SEED_ID), default=None,
                   help=f"first tuning seed id: draw j tunes on BASE + j * tuning-seeds + i (default "
                        f"{protocol.TUNING_SEED_BASE}); must not overlap the reported ids")
    p.add_argument("--tuning-draws", type=int_at_least(1, MAX_DRAWS), default=None,
                   help="disjoint draws of tuning seeds, each choosing the step sizes again (default 3)")
    p.add_argument("--icl-loss", choices=["squared", "cross-entropy"], default=None,
                   help="loss of the ICL bigram task (default squared)")
    p.add_argument("--even-pairs-embedding", choices=list(tasks.EVEN_PAIRS_EMBEDDINGS), default=None,
                   help="even-pairs tokens: 'ends' (default; no single token carries the label, two heads can "
                        "represent the task), 'query' (the first token carries the label; one head) or "
                        "'adjacent' (the first protocol's pair tokens, which one head cannot represent)")
    p.add_argument("--attention-only-readout", choices=["fixed", "small"], default=None,
                   help="the readout the attention-only plan keeps on AND: 'fixed' (default; +-scale, of order "
                        "one) or 'small' (the row's start: 0 for one head, the init scale for more)")
    p.add_argument("--attention-only-readout-scale", type=float, default=None, metavar="S",
                   help="scale of the fixed attention-only readout (default 1.0; > 0)")
    p.add_argument("--kernel", choices=KERNEL_CHOICES, default=None,
                   help="engine loops on one-hot token rows (ICL, two-head AND): 'numpy' (default; the rounding of "
                        "the committed results) or 'compiled' (numba; faster ICL and two-head AND steps, other "
                        "rounding; docs/benchmarks_engine.md)")
    p.add_argument("--and-heads-data", choices=["sampled", "integral"], default=None,
                   help="AND rows with more than one head: 'sampled' mini-batches (default; the committed results) "
                        "or 'integral', the exact population's risk and gradient by the integral representation "
                        "(accuracies on the sampled test set)")
    p.add_argument("--jobs", type=workers_option(), default=2, help="worker processes (default 2)")
    p.add_argument("--out", type=Path, default=Path("results"), help="output folder (default results/)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--from-json", type=Path, default=None, metavar="FILE",
                   help="re-render table1.md and the figures from a results file (no training)")
    p.add_argument("--rerun", type=Path, default=None, metavar="FILE",
                   help="train the configuration recorded in a results file again")
    p.set_defaults(func=main_args)
    return p


def _check_conflicts(args: argparse.Namespace) -> None:
    """--from-json and --rerun take their configuration from the file: refuse flags they would ignore."""
    given = [f for f in TRAINING_FLAGS if getattr(args, f) not in (None, False)]
    if args.from_json is not None and args.rerun is not None:
        raise SettingError("--from-json and --rerun exclude each other (one re-renders, the other trains again)")
    for flag, what in ((args.from_json, "--from-json"), (args.rerun, "--rerun")):
        if flag is not None and given:
            raise SettingError(f"{what} takes its configuration from the file; drop "
                               + ", ".join("--" + f.replace("_", "-") for f in given))
    if args.d is not None and args.d > MAX_D:
        raise SettingError(f"--d {args.d} is above the largest size table1 runs, --d {MAX_D} (the engine is "
                           f"benchmarked to d = 200; exact populations take minutes to build beyond {MAX_D})")


def config_from_args(args: argparse.Namespace):
    """The run configuration of the parsed flags (SettingError naming the flag on bad input)."""
    from numerics.experiments import runner

    if args.rerun is not None:
        return runner.Config.from_dict({**_load(args.rerun)["config"], "jobs": args.jobs}).validate()
    over = {"jobs": args.jobs}
    for name in ("tasks", "seeds", "d", "seed_base", "tuning_seed_base", "tuning_draws"):
        if getattr(args, name) is not None:
            over[name] = getattr(args, name)
    if args.icl_loss is not None:
        over["icl_loss"] = args.icl_loss.replace("-", "_")
    if args.even_pairs_embedding is not None:
        over["even_pairs_embedding"] = args.even_pairs_embedding
    if args.kernel is not None:
        over["kernel"] = args.kernel
    for name in ("attention_only_readout", "attention_only_readout_scale"):
        if getattr(args, name) is not None:
            over[name] = getattr(args, name)
    if args.and_heads_data is not None:
        over["and_heads_data"] = args.and_heads_data
    for t in args.tasks or tasks.TASKS:  # the defaults of d (quick or not) suit every task
        if args.d is not None and args.d < tasks.MIN_D[t]:
            raise SettingError(f"--d {args.d} is too small for task {t} (needs --d >= {tasks.MIN_D[t]})")
    changes = {k: v for k, v in (("max_steps", args.max_steps), ("budget", args.budget), ("k1", args.k1),
                                 ("k2", args.k2), ("joint_steps", args.joint_steps), ("optimizer", args.optimizer),
                                 ("tuning_seeds", args.tuning_seeds)) if v is not None}
    try:
        return runner.Config.build(quick=args.quick, reading=args.reading, reading_changes=changes, **over)
    except SettingError as exc:
        # the flags set nothing else a configuration can refuse but the seed ids: --d is checked above, the
        # rest by the parser
        if "overlap" in str(exc):
            raise SettingError(f"{exc} (flags --seeds, --seed-base, --tuning-seeds, --tuning-seed-base, "
                               "--tuning-draws)") from None
        if not changes:
            raise
        raise SettingError(f"{exc} (flags {', '.join('--' + k.replace('_', '-') for k in changes)})") from None


def _load(path: Path) -> dict:
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise SettingError(f"cannot read results file {path}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("rows"), dict) or not isinstance(data.get("config"), dict):
        raise SettingError(f"{path} is not a table1 results file (it needs a 'rows' and a 'config' object)")
    if "reading" not in data:
        raise SettingError(f"{path} is a results file of the first protocol (no reading): render it with the "
                           "version that wrote it")
    return data


def main_args(args: argparse.Namespace) -> int:
    """Run the subcommand (flags checked and --out locked before any work)."""
    from app.render import table1
    _check_conflicts(args)
    if args.from_json is not None:
        results = _load(args.from_json)
        try:
            table1.markdown(results)  # the whole file is read before anything is written
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise SettingError(f"{args.from_json} is a malformed table1 results file ({type(exc).__name__}: "
                               f"{exc})") from None
        with OutputFolder(args.out, result="table1", owns=OWNS) as out, out.transaction() as tx:
            paths = table1.write(results, tx)
        print(table1.summary_text(results))
        print("wrote " + ", ".join(str(p) for p in paths), file=sys.stderr)
        return _with_quick_note(results, status(results))
    cfg = config_from_args(args)
    from numerics.experiments import runner

    from app.checkout import git_commit
    rest = sys.argv[sys.argv.index("table1") + 1:] if "table1" in sys.argv else []
    command = ["occ-companion", "table1", *rest]
    commit, dirty = git_commit()  # the code that trains, read before the run
    with OutputFolder(args.out, result="table1", owns=OWNS) as out:
        partial = out.path / PARTIAL
        done = _resume(partial, cfg)
        if done:
            print(f"resuming: {len(done)} finished rows kept from {partial}", file=sys.stderr)

        def save(record):
            atomic_write_text(partial, json.dumps(record, allow_nan=False))

        log = None if args.quiet or sys.stderr.isatty() else row_line
        results = runner.run(cfg, quiet=args.quiet, command=command, on_row=save, done=done, progress=log)
        import datetime
        results["commit"], results["dirty"] = commit, dirty
        results["timestamp"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        from numerics.experiments import verdicts as verdicts_module
        results["decision_rules"] = verdicts_module.rules()  # the rules the verdicts below are judged by
        with out.transaction() as tx:
            paths = table1.write(results, tx)
        partial.unlink(missing_ok=True)
    print(table1.summary_text(results))
    print("wrote " + ", ".join(str(p) for p in paths), file=sys.stderr)
    return _with_quick_note(results, status(results))


def row_line(counts: dict) -> None:
    """The line of a finished row on stderr (``runner.run``'s progress callback), for logs where no bar shows."""
    s = counts["elapsed"]
    took = f"{s:.0f} s" if s < 90 else f"{s / 60:.1f} min"
    print(f"table1: {counts['row']} finished ({counts['finished']}/{counts['total']} rows, {took})",
          file=sys.stderr, flush=True)


def quick_note(results: dict) -> str:
    """Why a quick run ends with exit status 3 (undecided): its size, and how many verdicts were left undecided."""
    from numerics.experiments import verdicts

    assessed = verdicts.assess(results)
    open_ = sum(v["verdict"] not in ("holds", "does not hold") for v in assessed)
    seeds = results["config"]["seeds"]
    size = (f"d = {results['config']['d']}, {seeds} seed{'' if seeds == 1 else 's'}, "
            f"cap {results['reading']['max_steps']} steps")
    return (f"note: exit status 3 (undecided) is the normal status of a --quick run: at its small size ({size}) "
            f"some rows do not converge within the budget or cannot represent their task, so {open_} of "
            f"{len(assessed)} verdicts are refused or undecided rather than guessed (table1.md gives each reason); "
            "a run at the default size decides more of them (docs/table1.md)")


def _with_quick_note(results: dict, code: int) -> int:
    """``code``, after the note on a quick run's exit status 3 (``quick_note``) when a quick run ends with it."""
    if code == exitcodes.UNDECIDED and results.get("reading", {}).get("name") == "quick":
        print(quick_note(results), file=sys.stderr)
    return code


def _resume(partial: Path, cfg) -> dict:
    """Finished rows of an interrupted run with the same configuration (``runner.resumed_rows``), else nothing."""
    from numerics.experiments import runner

    try:
        data = json.loads(partial.read_text())
    except (OSError, ValueError):
        return {}
    return runner.resumed_rows(cfg, data)


def status(results: dict) -> int:
    from numerics.experiments import verdicts as verdicts_module
    return exitcodes.DONE if verdicts_module.exit_status(verdicts_module.assess(results)) == "done" else exitcodes.UNDECIDED


if __name__ == "__main__":  # python3 -m app.commands.table1 ARGS is occ-companion table1 ARGS
    from app.cli import entry
    sys.exit(entry(["table1"]))
