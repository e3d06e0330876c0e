"""Option types and shared options of the command line.

Every flag is parsed by one of these argparse types, so a bad value stops the command before any
work or output, with exit status 2 and a message naming the flag (``argument --steps: must be an
integer >= 1, got '-1'``).  Subcommand modules (``app.commands.prove``, ``app.commands.table1``, ...) reuse
``add_setting_options`` and ``setting_from_args``.

>>> positive_int("3")
3
>>> fraction("0.5")
0.5
>>> exact_probability("0.1") == Fraction(1, 10), str(exact_probability("0.1"))
(True, '0.1')
"""
from __future__ import annotations

import argparse
import math
import os
from fractions import Fraction
from pathlib import Path
from typing import Callable

from theory.setting import Setting
from theory.validation import LENGTH_VARIANTS, LOSSES


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None


MAX_WORKERS = 4 * (os.cpu_count() or 1)
"""Most worker processes a command starts (table1 --jobs, sweep and scope --workers): four per core; more only
add memory (each holds its own data, hundreds of MB) and switching."""


def workers_option() -> Callable[[str], int]:
    """The argparse type of a worker-process count: an integer in [1, MAX_WORKERS]."""
    return int_at_least(1, MAX_WORKERS, why=f"at most 4 per core, {os.cpu_count() or 1} cores here")


def add_cluster_options(parser: argparse.ArgumentParser, *, shared: str) -> None:
    """--store, --scheduler and --workers: the results store (``shared``: what else uses it) and the dask
    cluster of the commands that run units (sweep, scope, lag)."""
    parser.add_argument("--store", type=Path, default=Path("sweep-store"), metavar="DIR",
                        help=f"results store, shared {shared} (default sweep-store/)")
    parser.add_argument("--scheduler", default=None, metavar="ADDRESS",
                        help="address of a running dask scheduler, tcp://host:port (e.g. tcp://host:8786; not its "
                             "dashboard's); default: a LocalCluster")
    parser.add_argument("--workers", type=workers_option(), default=None,
                        help=f"LocalCluster worker processes (default: the cores, {os.cpu_count()})")


def int_at_least(low: int, high: int | None = None, *, why: str = "") -> Callable[[str], int]:
    """An argparse type: an integer in [low, high] (no upper limit when ``high`` is None); ``why``
    is added to the message."""
    def parse(text: str) -> int:
        value = _integer(text)
        if value < low or (high is not None and value > high):
            rng = f">= {low}" if high is None else f"in [{low}, {high}]"
            raise argparse.ArgumentTypeError(f"must be an integer {rng}{' (' + why + ')' if why else ''}, "
                                             f"got {text!r}")
        return value

    parse.__name__ = "integer"
    parse.__doc__ = f"Parse an integer >= {low}" + (f" and <= {high}" if high is not None else "") + "."
    return parse


def float_in(low: float | None, high: float | None, *, low_open: bool = True,
             high_open: bool = True) -> Callable[[str], float]:
    """An argparse type: a finite number in the interval from ``low`` to ``high`` (None: unbounded)."""
    def parse(text: str) -> float:
        value = _number(text)
        if not (math.isfinite(value) and _in_range(value, low, high, low_open, high_open)):
            raise argparse.ArgumentTypeError(f"must be a finite number {_interval(low, high, low_open, high_open)}, "
                                             f"got {text!r}")
        return value

    parse.__name__ = "number"
    parse.__doc__ = f"Parse a finite number {_interval(low, high, low_open, high_open)}."
    return parse


def _in_range(value, low, high, low_open: bool, high_open: bool) -> bool:
    """value within the interval of ``_interval`` (either end may be None: unbounded)."""
    if low is not None and not (value > low if low_open else value >= low):
        return False
    return high is None or (value < high if high_open else value <= high)


def _interval(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    if high is None:
        return f"{'>' if low_open else '>='} {low:g}" if low is not None else ""
    if low is None:
        return f"{'<' if high_open else '<='} {high:g}"
    return f"in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"


class ExactDecimal(Fraction):
    """A number typed on the command line, kept exactly: the rational value of its decimal text
    (``0.1`` is 1/10, not the double nearest it).  It prints as the text it was given, formats with a
    spec (``:g``) through float, and computes as a Fraction; its repr is that text too, so a message
    naming the value (``{x!r}``) shows it as typed.

    >>> x = ExactDecimal("1e-3")
    >>> x == Fraction(1, 1000), str(x), repr(x), f"{x:g}", x.exact
    (True, '1e-3', '1e-3', '0.001', '1/1000')
    """

    def __new__(cls, text, denominator=None):
        if denominator is not None or not isinstance(text, str):  # Fraction's own constructors: a plain Fraction
            return Fraction(text) if denominator is None else Fraction(text, denominator)
        self = super().__new__(cls, text.strip())
        self._text = text.strip()
        return self

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return self._text

    def __format__(self, spec: str) -> str:
        return format(float(self), spec) if spec else str(self)

    @property
    def exact(self) -> str:
        """The rational value, as numerator/denominator."""
        return str(Fraction(self))

    def __reduce__(self):  # pickles (multiprocessing) as the text it was parsed from
        return (ExactDecimal, (self._text,))


def exact_in(low: float | None, high: float | None, *, low_open: bool = True,
             high_open: bool = True) -> Callable[[str], ExactDecimal]:
    """An argparse type: a finite decimal (or a/b) in the interval from ``low`` to ``high``, parsed
    exactly as an ``ExactDecimal`` (a rational), for inputs that feed ball arithmetic or SymPy."""
    def parse(text: str) -> ExactDecimal:
        try:
            value = ExactDecimal(text)
        except (ValueError, ZeroDivisionError, TypeError):
            raise argparse.ArgumentTypeError(f"must be a finite number (a decimal such as 0.1 or 1e-3, taken "
                                             f"exactly), got {text!r}") from None
        if not _in_range(value, low, high, low_open, high_open):
            raise argparse.ArgumentTypeError(f"must be a finite number {_interval(low, high, low_open, high_open)}, "
                                             f"got {text!r}")
        return value

    parse.__name__ = "exact number"
    parse.__doc__ = f"Parse a decimal exactly, {_interval(low, high, low_open, high_open)}."
    return parse


def exact_inputs(args: argparse.Namespace) -> dict[str, str]:
    """The options parsed exactly (ExactDecimal), as {name: 'numerator/denominator'}, for the JSON records."""
    return {k: v.exact for k, v in vars(args).items() if isinstance(v, ExactDecimal)}


def json_option(value):
    """An option value as JSON takes it: an exact decimal as the text it was typed as."""
    return str(value) if isinstance(value, ExactDecimal) else value


EXACT_NOTE = "taken exactly: the decimal as written (0.1 = 1/10)"

positive_int = int_at_least(1)
nonnegative_int = int_at_least(0)
positive = float_in(0, None)
exact_positive = exact_in(0, None)
exact_nonnegative = exact_in(0, None, low_open=False)
exact_probability = exact_in(0, 1, high_open=False)
exact_fraction = exact_in(0, 1)
nonnegative = float_in(0, None, low_open=False)
fraction = float_in(0, 1)
probability = float_in(0, 1, high_open=False)


def number_list(text: str) -> list[float]:
    """An argparse type: comma-separated finite numbers (their count is checked against --d later)."""
    parts = [x.strip() for x in text.split(",")]
    try:
        values = [float(x) for x in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated numbers, got {text!r}") from None
    if not all(math.isfinite(v) for v in values):
        raise argparse.ArgumentTypeError(f"must be finite numbers, got {text!r}")
    return values


def add_setting_options(parser: argparse.ArgumentParser, d_default: int, *, d_min: int = 2,
                        loss: bool = True, p_one: bool = True) -> None:
    """--d, --p, --lengths (and --loss) for a subcommand.

    ``d_min`` is the smallest d it accepts (3 for the three-phase theorem); ``p_one`` whether p = 1
    (every string of length 1) is allowed -- the closed forms need p < 1.
    """
    why = "the three-phase theorem needs d >= 3; try --d 3" if d_min == 3 else ""
    parser.add_argument("--d", type=int_at_least(d_min, why=why), default=d_default,
                        help=f"alphabet size (an integer >= {d_min})")
    parser.add_argument("--p", type=exact_probability if p_one else exact_fraction, default=None,
                        help=f"parameter of the geometric length law, in (0, 1{']' if p_one else ')'}, {EXACT_NOTE}; "
                             "default: the balancing value (P(y = +1) = 1/2)")
    parser.add_argument("--lengths", choices=LENGTH_VARIANTS, default="positive",
                        help="length law: n on {1, 2, ...} (positive) or on {0, 1, ...} (nonnegative; the "
                             "empty string is labelled -1)")
    if loss:
        parser.add_argument("--loss", choices=LOSSES, default="squared", help="training loss")


def setting_from_args(args: argparse.Namespace) -> Setting:
    """The Setting the parsed options describe."""
    return Setting(args.d, p=args.p, lengths=args.lengths, loss=getattr(args, "loss", "squared"))


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's ArgumentDefaultsHelpFormatter, except where the help already explains the default
    (``default:`` in its text) or there is nothing to show (None, or an off switch)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default is None or action.default is False or "default" in text:
            return text
        return super()._get_help_string(action)


class UsageError(Exception):
    """A combination of flags the command cannot run; the message names the flags (exit status 2)."""


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation on this machine (MemAvailable of /proc/meminfo,
    else the physical memory), or None when unknown."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def check_memory(flags: str, nbytes: float, what: str) -> None:
    """Refuse (UsageError, before any work) a size whose memory estimate ``nbytes`` exceeds what the
    machine has available; ``flags`` names the options to lower, ``what`` the allocation."""
    free = available_memory()
    if free is not None and nbytes > free:
        raise UsageError(f"{flags}: {what} needs about {_bytes(nbytes)} of memory, but this machine has "
                         f"{_bytes(free)} available; lower {flags}")


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} PiB"  # pragma: no cover
