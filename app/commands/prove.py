"""``occ-companion prove``: certificates in ball arithmetic for every claim of the claims table.

For each d and each claim, one line per certified item: claim, d, item, the arb ball, the test, and
PASS (the ball is on the right side: certified), FAIL (it is on the wrong side: certified false),
UNDECIDED (the ball straddles the threshold even after retrying at doubled precision up to
--max-prec-bits) or SKIP (a statistical claim, or the lag crossover without --lag-crossover).  Writes certificate.json into the --out folder (checked,
locked and written atomically through ``app.io.OutputFolder`` before any work).  Exit status
(app/exitcodes.py): 0 every item PASS or SKIP, 1 an item FAILs, 3 nothing FAILs but an item is UNDECIDED,
2 bad flags or an unusable --out / --proofs-doc (checked before any work).  --epsilon is taken exactly as
the decimal written (1e-3 = 1/1000).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import sys
import time
from datetime import datetime, timezone
from fractions import Fraction

from theory.validation import SettingError

from app import exitcodes
from app.io import OutputFolder, output_file
from app.options import check_memory

DEFAULT_DS = "3,5,10,50"
HELP = """Certify every claim of the claims table in ball arithmetic (python-flint arb) at each --d: one line per
certified item with its ball, the test and PASS (certified), FAIL (certified false), UNDECIDED (the ball
straddles the threshold even at --max-prec-bits: the item is retried at doubled precision up to it) or SKIP
(a statistical claim, or the lag crossover without --lag-crossover).  --epsilon is taken exactly as the decimal
written (1e-3 = 1/1000).  Writes certificate.json into --out.  --all-d adds the proofs for every d >= 3 and their
mutation controls; --lag-crossover certifies the crossover rho* of the lag ratio at each d.

The end point of the three-phase plan is certified by the arb series below d = 1000 and by the integral
representation from d = 1000 on, so d just below 1000 is the slowest (d = 999 takes about ten times as long
as d = 1000).

Exit status: 0 all PASS, 1 an item FAILs, 3 none FAILs but one is UNDECIDED, 2 bad flags or an unusable --out / --proofs-doc (checked before any
work), 4 internal error, 130 interrupted."""
CERTIFICATE = "certificate.json"


PROVE_BYTES = (100e6, 3500.0)
"""Peak memory of ``prove`` at one d: about 100 MB plus 3.5 kB per symbol (measured 0.42, 1.09 and 3.39 GB at
d = 1e5, 3e5, 1e6; about 16 CPU s at 1e6).  A d whose estimate exceeds the available memory is refused."""
STEP_BYTES = 1100.0
"""Memory of one --steps step: the recorded points of the three comparison plans and their risk balls (1.14 GB
at --steps 1000000 and d = 3, against 0.13 GB at 20000); added to the estimate of ``PROVE_BYTES``."""
MAX_STEPS = 1_000_000
"""Largest --steps, as ``occ-companion run``'s: every step is recorded and certified, so a million steps take
about a GB of memory and tens of CPU seconds per d."""


def parse_ds(text: str) -> list[int]:
    """--d: comma-separated integers >= 3."""
    out = []
    for part in text.split(","):
        part = part.strip()
        try:
            d = int(part)
        except ValueError:
            raise SettingError(f"--d must be comma-separated integers >= 3, got {part!r} in {text!r}") from None
        if d < 3:
            raise SettingError(f"--d: every alphabet size must be >= 3 (the claims need d >= 3), got {d}")
        if d not in out:  # --d 3,3,3 certifies d = 3 once
            out.append(d)
    if not out:
        raise SettingError("--d needs at least one alphabet size")
    return out


def parse_epsilon(text: str) -> Fraction:
    """--epsilon: a finite number > 0, kept as the exact decimal it was written as (1e-3 = 1/1000)."""
    try:
        eps = Fraction(text.strip())
    except (ValueError, ZeroDivisionError):
        raise SettingError(f"--epsilon must be a finite number > 0, got {text!r}") from None
    if eps <= 0:
        raise SettingError(f"--epsilon must be > 0, got {text!r}")
    return eps


def parse_int(text: str, flag: str, minimum: int, maximum: int | None = None) -> int:
    """An integer flag (--steps, --prec-bits) with a lower bound (and an upper one when ``maximum`` is given);
    the error names the flag."""
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < minimum or (maximum is not None and value > maximum):
        rng = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise SettingError(f"{flag} must be an integer {rng}, got {text!r}")
    return value


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("occurrence-companion")
    except PackageNotFoundError:
        return "unknown"


def run_all_d(doc: tuple[OutputFolder, str] | None) -> tuple[int, int]:
    """The all-d proofs and their mutation controls: one line each; optionally write docs/proofs.md as
    ``name`` into the (already checked and locked) folder ``doc``.  Returns (items, failures): the number
    of proofs and controls, and of failures among them (a proof that FAILs, or a control that does not)."""
    from theory.proofs import all_proofs, mutation_controls, proofs_markdown

    results, controls = all_proofs(), mutation_controls()
    for r in results:
        print(f"{'proof':<8} {r.claim:<24} {r.domain:<18} {r.method:<60} {r.status}", flush=True)
    for name, r in controls:
        print(f"{'control':<8} {name:<60} {'FAIL (as it must)' if r.status == 'FAIL' else 'PASSED: broken'}")
    if doc is not None:
        folder, name = doc
        print(f"wrote {folder.write_text(name, proofs_markdown(results, controls))}")
    return (len(results) + len(controls),
            sum(not r.passed for r in results) + sum(r.status != "FAIL" for _, r in controls))


def output_folders(stack: contextlib.ExitStack, out: str, proofs_doc: str | None) -> tuple[OutputFolder, tuple | None]:
    """Check and lock --out (and the folder of --proofs-doc) before any work; OutputError (exit 2) otherwise."""
    folder = stack.enter_context(OutputFolder(out, result="prove", owns=(CERTIFICATE,)))
    if proofs_doc is None:
        return folder, None
    parent, name = output_file(proofs_doc, result="proofs-doc", flag="--proofs-doc", example="proofs.md")
    if parent.path.resolve() == folder.path.resolve():
        return folder, (folder, name)
    return folder, (stack.enter_context(parent), name)


def cmd_prove(args) -> int:
    """Validate the flags, certify every claim at every d, print the lines, write certificate.json."""
    if args.proofs_doc is not None and not args.proofs_doc:
        raise SettingError("--proofs-doc needs a file path")
    ds = parse_ds(args.d)
    eps = parse_epsilon(args.epsilon)
    steps = parse_int(args.steps, "--steps", 0, MAX_STEPS)
    prec = parse_int(args.prec_bits, "--prec-bits", 53)
    max_prec = parse_int(args.max_prec_bits, "--max-prec-bits", prec)
    check_memory("--d or --steps", PROVE_BYTES[0] + PROVE_BYTES[1] * max(ds) + STEP_BYTES * steps,
                 f"certifying d = {max(ds)} with --steps {steps}")
    with contextlib.ExitStack() as stack:
        out, doc = output_folders(stack, args.out, args.proofs_doc if args.proofs_doc else None)
        return _certify_and_write(args, ds, eps, steps, (prec, max_prec), out, doc)


def _certify_and_write(args, ds, eps, steps, precs, out: OutputFolder, doc) -> int:
    prec, max_prec = precs
    from numerics.theorem.certify import certify_claims, claim_verdict
    from theory.claims import CLAIMS

    from app.checkout import git_commit

    t0 = time.time()
    certs, verdicts, timings = [], [], {}
    for d in ds:
        print(f"certifying d = {d} ...", file=sys.stderr, flush=True)
        t = time.time()
        at_d = certify_claims(d, eps, steps=steps, prec_bits=prec, max_prec_bits=max_prec,
                              lag_crossover=args.lag_crossover)
        for c in at_d:
            print(c.line(), flush=True)
        for cl in CLAIMS:
            v = claim_verdict([c for c in at_d if c.claim == cl.key])
            verdicts.append({"claim": cl.key, "d": d, "status": v})
            print(f"== {cl.key:<22} d={d:<4} {v}", flush=True)
        certs += at_d
        timings[str(d)] = round(time.time() - t, 3)
    counts = {s: sum(c.status == s for c in certs) for s in ("PASS", "FAIL", "UNDECIDED", "SKIP")}
    commit, dirty = git_commit()
    options = {k: v for k, v in vars(args).items() if k not in ("func", "cmd")}
    payload = {
        "version": _version(), "git_commit": commit, "git_dirty": dirty,
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": shlex.join(["occ-companion", "prove", *(part for key, value in options.items()
                                                           for part in _flag(key, value))]),
        "d": ds, "epsilon": float(eps), "epsilon_exact": str(eps),
        "exact_inputs": {"epsilon": "the decimal as written, as a rational (epsilon_exact)"},
        "prec_bits": prec, "max_prec_bits": max_prec, "steps": steps, "counts": counts,
        "all_pass": counts["FAIL"] == 0 and counts["UNDECIDED"] == 0,
        "seconds": {"total": None, "per_d": timings},
        "ball_format": "[mid, rad]: the exact value lies in [mid - rad, mid + rad]",
        "claims": verdicts,
        "certificates": [c.as_json() for c in certs],
    }
    all_d = ""
    if args.all_d or args.proofs_doc:
        t = time.time()
        items, failures = run_all_d(doc)
        timings["all_d"] = round(time.time() - t, 3)
        payload["all_d_items"] = items
        payload["all_d_failures"] = failures
        counts["FAIL"] += failures
        payload["all_pass"] = counts["FAIL"] == 0 and counts["UNDECIDED"] == 0
        all_d = f" (with {items} all-d proofs and controls, {failures} failing)"
    payload["seconds"]["total"] = round(time.time() - t0, 3)
    status = exit_status(counts)
    payload["exit_status"] = status
    path = out.write_text(CERTIFICATE, json.dumps(payload, indent=2, allow_nan=False) + "\n")
    print(f"{counts['PASS']} PASS, {counts['FAIL']} FAIL, {counts['UNDECIDED']} UNDECIDED, {counts['SKIP']} SKIP{all_d}; "
          f"wrote {path} in {payload['seconds']['total']:.1f} s")
    return status


def exit_status(counts: dict) -> int:
    """CLAIM_FAILED if anything FAILs, else UNDECIDED if anything is undecided, else DONE.

    >>> exit_status({"PASS": 3, "FAIL": 0, "UNDECIDED": 1, "SKIP": 1})
    3
    """
    if counts["FAIL"]:
        return exitcodes.CLAIM_FAILED
    return exitcodes.UNDECIDED if counts["UNDECIDED"] else exitcodes.DONE


def _flag(key: str, value) -> list[str]:
    flag = "--" + key.replace("_", "-")
    if value is True:
        return [flag]
    if value is None or value is False:
        return []
    return [flag, str(value)]


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``prove`` subcommand to an argparse subparsers object and set its func."""
    pr = subparsers.add_parser("prove", help="certify every claim in ball arithmetic (arb) at the given d",
                               description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    pr.add_argument("--d", default=DEFAULT_DS, help=f"comma-separated alphabet sizes >= 3 (default {DEFAULT_DS})")
    pr.add_argument("--epsilon", default="1e-3",
                    help="target risk above the floor, > 0 (default 1e-3; exact: the decimal as written, 1e-3 = 1/1000)")
    pr.add_argument("--steps", default="300",
                    help=f"steps of the output-only and attention-first plans, in [0, {MAX_STEPS}] (default 300)")
    pr.add_argument("--prec-bits", default="128", help="arb working precision in bits (default 128)")
    pr.add_argument("--max-prec-bits", default="1024",
                    help="an UNDECIDED item is retried at doubled precision up to this many bits (default 1024)")
    pr.add_argument("--out", default="results", help="output folder for certificate.json (default results/)")
    pr.add_argument("--lag-crossover", action="store_true",
                    help="also certify the crossover rho* of the lag ratio at each d (a few certified trajectories a d)")
    pr.add_argument("--all-d", action="store_true", help="also run the proofs for all d and their mutation controls")
    pr.add_argument("--proofs-doc", default=None, help="with the all-d proofs, write docs/proofs.md to this path")
    pr.set_defaults(func=cmd_prove)
    return pr


def main(argv=None) -> int:
    """``occ-companion prove ARGS`` called from Python (through the CLI's error handling)."""
    from app.cli import main as cli_main

    return cli_main(["prove", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":  # pragma: no cover - python3 -m app.commands.prove ARGS is occ-companion prove ARGS
    from app.cli import entry
    sys.exit(entry(["prove"]))
