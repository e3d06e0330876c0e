"""Symbolic layer: the setting, its validation, and SymPy derivations of population quantities.

Importing this package pins SymPy's ground types to ``PINNED_GROUND_TYPES`` (unless the user chose
them with ``SYMPY_GROUND_TYPES``): SymPy 1.13+ switches to python-flint when it is installed, which
silently changes its arithmetic back end.  The pin only works if SymPy is not imported yet, so every
package of the suite imports ``theory`` (or sets the same default) before SymPy; a late import warns.
"""
import os
import sys
import warnings

from theory.validation import (  # imports no SymPy: the pin below still applies
    LENGTH_VARIANTS,
    LOSSES,
    SettingError,
)

PINNED_GROUND_TYPES = "python"
"""SymPy ground types the suite runs (and caches its derivations) with."""

os.environ.setdefault("SYMPY_GROUND_TYPES", PINNED_GROUND_TYPES)
if "sympy" in sys.modules:  # pragma: no cover - depends on what the caller imported first
    from sympy.external.gmpy import GROUND_TYPES as _in_use

    if _in_use != os.environ["SYMPY_GROUND_TYPES"]:
        warnings.warn(f"SymPy was imported before theory with ground types {_in_use!r}, not "
                      f"{os.environ['SYMPY_GROUND_TYPES']!r}; import theory first (or set SYMPY_GROUND_TYPES)",
                      RuntimeWarning, stacklevel=2)

__all__ = ["LENGTH_VARIANTS", "LOSSES", "PINNED_GROUND_TYPES", "SettingError"]
