"""occ-companion: proof companion for the occurrence language with geometric lengths.

run: the main job (three-phase plan in its step-size regime vs the impossibility plans and joint GD);
finite: the finite-sample plan; values / evaluate: closed forms and exact series at a point;
docs / latex: regenerate docs/derivations.md and README's claims, export LaTeX."""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Sequence

from theory.validation import SettingError

from . import __version__
from .checkout import NotInCheckout
from .io import OutputError
from .options import UsageError

COMMAND_MODULES: tuple[str, ...] = (
    "app.mainjob",   # run
    "app.commands",  # finite, values, evaluate, latex, docs
    "app.prove",     # prove
    "app.table1",    # table1
)
"""Modules that register subcommands: each has ``add_parser(subparsers)``, which adds its parsers
and sets ``func`` (parsed options -> exit status).  A new command is one more line here."""

PROG = "occ-companion"
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand (options shown with their defaults in --help)."""
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).add_parser(sub)
    return parser


def advice(exc: SettingError, args: argparse.Namespace) -> str:
    """A SettingError from the library, restated in terms of the flags the user can type."""
    text = str(exc)
    if "max_terms" in text and hasattr(args, "max_terms"):
        p = f"--p {args.p:g} makes strings long and " if getattr(args, "p", None) is not None else ""
        return (f"the exact series at this setting needs more than --max-terms {args.max_terms} terms ({p}the "
                f"enumeration grows with the length): raise --max-terms, loosen --tol (now {args.tol:g}), or use a "
                f"larger --p; e.g. `{PROG} {args.cmd} --d {args.d}` uses the balancing p")
    if "closed forms are stated for p < 1" in text:
        return (f"at --d {args.d} the balancing p is 1 (every string has length 1), where the closed forms are not "
                f"defined: give --p below 1 (e.g. `{PROG} {args.cmd} --d {args.d} --p 0.5`) or use --d 3")
    return text


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 success, 1 a target missed or docs stale,
    2 bad usage, 130 interrupted).

    >>> main(["--version"])  # doctest: +ELLIPSIS
    occ-companion ...
    0
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help, --version, or a flag argparse refused (exit 2)
        return int(stop.code or 0)
    try:
        return args.func(args)
    except (UsageError, OutputError, NotInCheckout) as exc:
        print(f"{PROG} {args.cmd}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SettingError as exc:
        print(f"{PROG} {args.cmd}: error: {advice(exc, args)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"{PROG} {args.cmd}: interrupted; no results were written", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # output piped into e.g. `head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
