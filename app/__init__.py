"""occurrence-companion's application layer: the command line, the main job, docs, LaTeX and plots.

The mathematics lives in ``theory`` (SymPy derivations, the setting, the claims table) and
``numerics`` (evaluators, training plans); this package only presents it.

>>> isinstance(__version__, str) and __version__ != ""
True
"""
from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import theory  # noqa: F401  (first: pins SymPy's ground types before anything imports SymPy)

try:
    __version__: str = version("occurrence-companion")
except PackageNotFoundError:  # running from a checkout that was never installed
    __version__ = "0.0.0+unknown"
