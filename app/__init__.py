"""occurrence-companion's application layer: the command line, the main job, docs, LaTeX and plots.

The mathematics lives in ``theory`` (SymPy derivations, the setting, the claims table) and
``numerics`` (evaluators, training plans); this package only presents it.

>>> isinstance(__version__, str) and __version__ != ""
True
"""
from __future__ import annotations

import os
import shlex
import sys
from importlib.metadata import PackageNotFoundError, version

from app import exitcodes  # no imports of its own: loaded before anything that can fail


BLAS_THREADS_ENV = "OPENBLAS_NUM_THREADS"
BLAS_THREADS_VARIABLES = (BLAS_THREADS_ENV, "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
"""The variables OpenBLAS reads for its thread count when it loads (the first one set wins, in this order)."""
BLAS_THREADS_DEFAULTED = False
"""True when this program loaded numpy with ``OPENBLAS_NUM_THREADS=1`` (a command started by ``python3 -m
app...`` or ``occ-companion`` with none of ``BLAS_THREADS_VARIABLES`` set; see below): numpy's OpenBLAS then
runs on one thread in this process.  A count the user set in any of them is kept and used."""


def _uncaught_as_one_line(kind, value, tb) -> None:
    """``sys.excepthook`` of ``python3 -m app`` and ``python3 -m app.X``: what escapes before the CLI's own
    handling (``cli.main``) takes over, a Ctrl-C while the modules load or an error in a module's body, is
    one line on stderr with the CLI's exit status (130 interrupted, 4 internal error), never a traceback."""
    if issubclass(kind, KeyboardInterrupt):
        print("occ-companion: interrupted while starting; nothing was written", file=sys.stderr)
        status = exitcodes.INTERRUPTED
    elif os.environ.get(exitcodes.TRACEBACK_ENV, "") not in ("", "0"):
        sys.__excepthook__(kind, value, tb)
        status = exitcodes.INTERNAL
    else:
        what = f"{kind.__name__}: {value}".splitlines()[0] if str(value) else kind.__name__
        print(f"occ-companion: internal error ({what}) on input `{shlex.join([sys.executable, *sys.argv])}`; "
              f"please report it (set {exitcodes.TRACEBACK_ENV}=1 for the traceback)", file=sys.stderr)
        status = exitcodes.INTERNAL
    sys.stderr.flush()
    os._exit(status)  # the status itself (an uncaught Ctrl-C would end the process by SIGINT instead)


if sys.argv[:1] == ["-m"] or os.path.basename(sys.argv[0] if sys.argv else "") == "occ-companion":
    # a program is starting: `python3 -m app...` (runpy loads this package while argv[0] is "-m") or the
    # console script
    sys.excepthook = _uncaught_as_one_line
    if "numpy" not in sys.modules and not any(v in os.environ for v in BLAS_THREADS_VARIABLES):
        # numpy's OpenBLAS starts its thread pool when it loads, and the pool's threads spin for CPU time that
        # no command uses (the main job's products are 2 x 2 and a few d-vectors).  The variable is set only
        # while numpy loads: no process this program starts sees it (a worker forked from it, as table1's pool
        # on Linux, inherits the one-thread pool itself, and the experiments' workers run BLAS on one thread
        # anyway, by threadpoolctl), and scipy's own OpenBLAS, loaded later, is not affected.
        os.environ[BLAS_THREADS_ENV] = "1"
        try:
            __import__("numpy")
        finally:
            del os.environ[BLAS_THREADS_ENV]
        BLAS_THREADS_DEFAULTED = True

import theory  # noqa: E402,F401  (before anything imports SymPy: pins SymPy's ground types)

try:
    __version__: str = version("occurrence-companion")
except PackageNotFoundError:  # running from a checkout that was never installed
    __version__ = "0.0.0+unknown"
