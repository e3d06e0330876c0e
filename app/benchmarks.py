"""The benchmarks' command lines: ``occ-companion benchmark`` (exact population evaluation,
``numerics.benchmark``) and ``occ-companion benchmark-engine`` (the Table 1 training engine,
``numerics.bench_engine``); ``python3 -m numerics.benchmark`` and ``python3 -m numerics.bench_engine`` run
the same commands.

Each writes one Markdown page under the output discipline of every command (``app.io.output_file``): the
page's folder is checked and locked before any measurement, the page is staged and committed by one atomic
rename at the end (Ctrl-C or a kill before that leaves the previous page as it was), and the temporary files
of killed runs are removed on the next run into the folder.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .io import output_file
from .options import HelpFormatter


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register benchmark and benchmark-engine on the subcommand parser ``sub``."""
    bm = sub.add_parser("benchmark", help="benchmark of exact population evaluation (writes docs/benchmarks.md)",
                        description=cmd_benchmark.__doc__, formatter_class=HelpFormatter)
    size = bm.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true",
                      help="d = 50 only, no mp timing, fewer repeats (about a minute)")
    size.add_argument("--tiny", action="store_true",
                      help="d = 5, the first table only, a small Monte Carlo pilot: a smoke size for tests "
                           "(seconds; its times mean nothing)")
    bm.add_argument("--out", default=None,
                    help="the Markdown page to write (default: docs/benchmarks.md of the checkout; with --quick "
                         "results/benchmarks_quick.md; with --tiny none, the page is only printed)")
    bm.set_defaults(func=cmd_benchmark)

    be = sub.add_parser("benchmark-engine", help="benchmark of the Table 1 engine (writes docs/benchmarks_engine.md)",
                        description=cmd_benchmark_engine.__doc__, formatter_class=HelpFormatter)
    size = be.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="d = 5 and 8, 3 repeats")
    size.add_argument("--tiny", action="store_true",
                      help="the occurrence row at d = 5, one repeat, no memory column: a smoke size for tests "
                           "(seconds; its times mean nothing)")
    be.add_argument("--out", default=None,
                    help="the Markdown page to write (default: docs/benchmarks_engine.md of the checkout; with "
                         "--quick or --tiny none, the page is only printed)")
    be.add_argument("--no-torch", action="store_true", help="skip the PyTorch column")
    be.set_defaults(func=cmd_benchmark_engine)


def _write(out: str | None, measure) -> int:
    """Check and lock ``out`` (a file; None: print only), run ``measure()`` for the page's text, print it and
    commit it to ``out``."""
    if out is None:
        print(measure())
        return 0
    folder, name = output_file(out, result=f"page-{Path(out).stem}")
    with folder as target:  # checked and locked before any measurement
        text = measure()
        print(text)
        path = target.write_text(name, text)
    print(f"wrote {path}", file=sys.stderr)
    return 0


def cmd_benchmark(args: argparse.Namespace) -> int:
    """Benchmark of exact population evaluation: the float series, the arb series, the integral, a numpy double
    sum and numpy Monte Carlo at d = 50, 500 and 10^4, single evaluations at d = 50, the main job as a user
    runs it (CPU seconds, wall seconds, peak memory) and README's test command.  Prints the page and writes it
    to --out (docs/benchmarks.md by default).  Timings on a shared machine: read CPU seconds, as orders of
    magnitude and ratios."""
    from numerics import benchmark as B

    out = args.out if args.out is not None else (None if args.tiny else str(B.QUICK_OUT if args.quick else B.DOC))
    dims = (5,) if args.tiny else (50,) if args.quick else (50, 500, 10_000)
    return _write(out, lambda: "\n".join(B.run(dims=dims, quick=args.quick or args.tiny,
                                                              tiny=args.tiny)))


def cmd_benchmark_engine(args: argparse.Namespace) -> int:
    """Benchmark of the Table 1 training engine: per task row and d, one training step of the engine (1 and 8
    runs at once) beside a PyTorch implementation (optional: pip install -e ".[bench]"), the operation-count
    bound at the measured dgemm rate, the sampler's cost and the peak memory.  Prints the page and writes it to
    --out (docs/benchmarks_engine.md by default)."""
    from numerics import bench_engine as BE

    size = "tiny" if args.tiny else "quick" if args.quick else "full"
    out = args.out if args.out is not None else (None if size != "full" else str(BE.DOC))
    use_torch = not args.no_torch and BE.torch_available()
    if not args.no_torch and not use_torch:
        print("PyTorch is not installed: the PyTorch column is skipped (pip install -e \".[bench]\")", file=sys.stderr)
    return _write(out, lambda: BE.report(
        size, use_torch=use_torch, progress=lambda s: print(s, file=sys.stderr, flush=True)))
