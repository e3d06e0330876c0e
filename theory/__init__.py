"""Symbolic layer: the setting, its validation, and SymPy derivations of population quantities."""
from .validation import LENGTH_VARIANTS, LOSSES, SettingError

__all__ = ["LENGTH_VARIANTS", "LOSSES", "SettingError"]
