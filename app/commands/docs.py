"""``occ-companion latex`` and ``occ-companion docs``: the derived formulas as a LaTeX document, and
docs/derivations.md with README's claims block regenerated (or checked) in the repository checkout.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.checkout import checkout_root
from app.io import OutputFolder, output_file
from app.options import HelpFormatter, UsageError


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register latex and docs on the subcommand parser ``sub``."""
    lx = sub.add_parser("latex", help="export the derived formulas as a standalone LaTeX document",
                        description=cmd_latex.__doc__, formatter_class=HelpFormatter)
    lx.add_argument("--lengths", choices=["positive", "nonnegative"], default="positive", help="length law")
    lx.add_argument("--only", default="", help="comma-separated derivation keys as in docs/derivations.md (default: all)")
    lx.add_argument("--out", default="-", help="file to write (- for stdout)")
    lx.set_defaults(func=cmd_latex)

    dc = sub.add_parser("docs", help="regenerate docs/derivations.md and README's claims block (or --check them)",
                        description=cmd_docs.__doc__, formatter_class=HelpFormatter)
    dc.add_argument("--check", action="store_true", help="only check that they are current (exit 1 when stale)")
    dc.add_argument("--root", type=Path, default=None,
                    help="repository checkout to work on (default: the checkout this package runs from)")
    dc.set_defaults(func=cmd_docs)


def cmd_latex(args: argparse.Namespace) -> int:
    """A standalone LaTeX document of the derived formulas (all, or the --only keys)."""
    from app.render.latex import latex_document

    keys = [k.strip() for k in args.only.split(",") if k.strip()] if args.only else None
    if args.only and not keys:
        raise UsageError(f"--only {args.only!r} names no key; give comma-separated keys as in docs/derivations.md "
                         "or leave --only out for all")
    if args.out == "-":
        sys.stdout.write(latex_document(args.lengths, keys))
        return 0
    folder, name = output_file(args.out, result="latex", example="grads.tex")
    with folder as out:  # checked and locked before rendering
        path = out.write_text(name, latex_document(args.lengths, keys))
    print(f"wrote {path}")
    return 0


def cmd_docs(args: argparse.Namespace) -> int:
    """Regenerate docs/derivations.md and the claims block of README.md in the repository checkout
    (never in the working directory), or with --check report which of them are stale."""
    from app.render.report import generated_docs, stale_docs

    root = args.root.resolve() if args.root is not None else checkout_root()
    if not root.is_dir():
        raise UsageError(f"--root {args.root}: no such folder (give a checkout of the repository)")
    if not (root / "README.md").is_file() or not (root / "docs").is_dir():
        raise UsageError(f"--root {args.root}: not a checkout of the repository (no README.md and docs/ there)")
    if args.check:
        stale = stale_docs(root)
        for path in stale:
            print(f"{path} is stale: run `occ-companion docs`", file=sys.stderr)
        if not stale:
            print(f"{root / 'docs/derivations.md'} and the claims block of {root / 'README.md'} are up to date")
        return 1 if stale else 0
    with OutputFolder(root, result="docs", flag="--root") as out:  # checked and locked before rendering
        docs = generated_docs(root)
        changed = {path: text for path, text in docs.items() if not path.exists() or path.read_text() != text}
        if changed:  # both files as one result: a kill leaves the old pair or the new pair
            with out.transaction(marker=False) as tx:
                for path, text in changed.items():
                    tx.write_text(str(path.relative_to(root)), text)
    for path in docs:
        print(f"wrote {path}" if path in changed else f"{path} is up to date")
    return 0
