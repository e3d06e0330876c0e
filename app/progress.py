"""Progress bars (tqdm) on stderr for long work; silent when stderr is not a terminal or on --quiet.

``progress_factory(quiet)`` returns ``make(desc, total)``; the bar it returns has ``update(n)`` and
``close()``.  numerics' Trainer and the finite-sample plan accept such a ``make`` as ``progress=``.

>>> make = progress_factory(quiet=True)
>>> bar = make("phase 3", 10)
>>> bar.update(10); bar.close()
"""
from __future__ import annotations

import sys
from typing import Callable, Protocol, TextIO


class _Silent:
    """The bar of a disabled factory: tqdm is not imported when no bar is shown (its import is a visible
    part of a short job's start-up)."""

    def update(self, n: int = 1) -> None:
        return None

    def close(self) -> None:
        return None


class ProgressBar(Protocol):
    """What numerics needs from a progress bar."""

    def update(self, n: int = 1) -> object:
        """Advance the bar by ``n`` units."""

    def close(self) -> None:
        """Finish the bar."""


ProgressFactory = Callable[[str, int], ProgressBar]


def progress_factory(quiet: bool, stream: TextIO | None = None) -> ProgressFactory:
    """A factory of tqdm bars writing to ``stream`` (default stderr).

    The bars are disabled when ``quiet`` is true or the stream is not a terminal, so logs and pipes
    stay clean; finished bars are removed from the terminal (``leave=False``).
    """
    out = sys.stderr if stream is None else stream
    disabled = quiet or not (hasattr(out, "isatty") and out.isatty())

    def make(desc: str, total: int) -> ProgressBar:
        """One bar for ``total`` units of work labelled ``desc`` ("joint: joint" is shown as "joint")."""
        if disabled:
            return _Silent()
        from tqdm import tqdm

        plan, sep, phase = desc.partition(": ")
        if sep and plan == phase:
            desc = plan
        return tqdm(total=total, desc=desc, file=out, disable=disabled, leave=False, unit="step",
                    dynamic_ncols=True)

    return make
