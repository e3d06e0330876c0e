"""Atomic file writes, the one implementation every layer uses (results, docs, figures, the SymPy cache).

A file is written to a temporary sibling and renamed over the target (``os.replace``), so a reader,
a crash or Ctrl-C never sees half a file.

>>> import tempfile, pathlib
>>> target = pathlib.Path(tempfile.mkdtemp()) / "sub" / "x.txt"
>>> atomic_write(target, lambda f: f.write(b"hello"))
>>> target.read_bytes()
b'hello'
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable


def _file_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Write ``path`` through ``write(binary_file)`` into a temporary sibling, then rename it over ``path``
    (the folder is created if missing; the file gets the usual mode, 0666 minus the umask)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _file_mode())  # mkstemp makes 0600
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    atomic_write(path, lambda fh: fh.write(text.encode("utf-8")))
