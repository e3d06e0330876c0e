"""The benchmarks' command lines: ``occ-companion benchmark`` (exact population evaluation,
``numerics.bench.theorem``, its page ``app.render.bench_theorem``) and ``occ-companion benchmark-engine`` (the
Table 1 training engine, ``numerics.bench.engine``, its page ``app.render.bench_engine``).  Each measures (a
record), then renders the page from the record.

Each writes one Markdown page under the output discipline of every command (``app.io.output_file``): the
page's folder is checked and locked before any measurement, the page is staged and committed by one atomic
rename at the end (Ctrl-C or a kill before that leaves the previous page as it was), and the temporary files
of killed runs are removed on the next run into the folder.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.io import output_file
from app.options import HelpFormatter


def _parser(sub, name: str, page: str, func, quick: str, tiny: str, out: str) -> argparse.ArgumentParser:
    """A benchmark's parser: --quick and --tiny (exclusive sizes), --out (the page)."""
    what = func.__doc__.split(":", 1)[0]
    p = sub.add_parser(name, help=f"{what[:1].lower()}{what[1:]} (writes {page})",
                       description=func.__doc__, formatter_class=HelpFormatter)
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help=quick)
    size.add_argument("--tiny", action="store_true", help=f"{tiny}: a smoke size for tests (seconds; its times mean "
                                                          "nothing)")
    p.add_argument("--out", default=None, help=f"the Markdown page to write (default: {page} of the checkout; {out})")
    p.set_defaults(func=func)
    return p


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register benchmark and benchmark-engine on the subcommand parser ``sub``."""
    bm = _parser(sub, "benchmark", "docs/benchmarks.md", cmd_benchmark,
                 "d = 50 only, no mp timing, fewer repeats (about a minute)",
                 "d = 5, the first table only, a small Monte Carlo pilot",
                 "with --quick results/benchmarks_quick.md; with --tiny none, the page is only printed")
    bm.add_argument("--keep-suite", action="store_true",
                    help="do not run the test suite; carry its figures over from the page being replaced, marked")
    be = _parser(sub, "benchmark-engine", "docs/benchmarks_engine.md", cmd_benchmark_engine, "d = 5 and 8, 3 repeats",
                 "the occurrence row at d = 5, one repeat, no memory column",
                 "with --quick or --tiny none, the page is only printed")
    be.add_argument("--no-torch", action="store_true", help="skip the PyTorch column")


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
    from app.render import bench_theorem
    from numerics.bench import theorem as theorem_bench
    out = args.out if args.out is not None else (None if args.tiny else str(theorem_bench.QUICK_OUT if args.quick else theorem_bench.DOC))
    dims = (5,) if args.tiny else (50,) if args.quick else (50, 500, 10_000)
    return _write(out, lambda: bench_theorem.render(theorem_bench.measure(dims=dims, quick=args.quick or args.tiny,
                                                             tiny=args.tiny, keep_suite=args.keep_suite)))


def cmd_benchmark_engine(args: argparse.Namespace) -> int:
    """Benchmark of the Table 1 training engine: per task row and d, one training step of the engine (1 and 8
    runs at once) beside a PyTorch implementation (optional: pip install -e ".[bench]"), the operation-count
    bound at the measured dgemm rate, the sampler's cost and the peak memory.  Prints the page and writes it to
    --out (docs/benchmarks_engine.md by default)."""
    from app.render import bench_engine
    from numerics.bench import engine as engine_bench
    size = "tiny" if args.tiny else "quick" if args.quick else "full"
    out = args.out if args.out is not None else (None if size != "full" else str(engine_bench.DOC))
    use_torch = not args.no_torch and engine_bench.torch_available()
    if not args.no_torch and not use_torch:
        print("PyTorch is not installed: the PyTorch column is skipped (pip install -e \".[bench]\")", file=sys.stderr)
    return _write(out, lambda: bench_engine.render(engine_bench.measure(
        size, use_torch=use_torch, progress=lambda s: print(s, file=sys.stderr, flush=True))))
