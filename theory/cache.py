"""Disk cache of the SymPy derivations, so that a start does not re-derive them.

A derivation function of ``theory.symbolic`` decorated with :func:`derivation` is memoised in memory
and on disk.  The disk file is named after a key made of

* the package version, the SymPy version and the SymPy ground types in use, and
* a SHA-256 of the source of the module that defines the derivations (``theory/symbolic.py``), so any
  edit of the derivation code selects a new file and the forms are derived afresh;

inside the file each entry is keyed by the function name and its arguments (length variant, loss,
order, ...), with defaults filled in, so ``f()`` and ``f("positive")`` share an entry.

Location: ``$OCC_CACHE_DIR`` if set, else the user cache directory (``$XDG_CACHE_HOME`` or
``~/.cache``) under ``occurrence-companion``.  ``OCC_NO_CACHE=1`` disables the disk layer (the
in-memory memo stays).  Writes are atomic (temporary file in the same directory, then rename), and
merge with entries another process wrote meanwhile.  A file that cannot be read or unpickled, or whose
recorded key differs from the expected one, is ignored and rewritten.  Each value is pickled on its
own and unpickled only when a derivation asks for it (a job needing a few forms does not pay for all);
a corrupt entry is derived again.  The values are pickles: the cache directory must be writable only
by its user, as for any pickle cache.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import inspect
import os
import pickle
import sys
from pathlib import Path
from typing import Any, Callable, TypeVar

from theory.files import atomic_write

F = TypeVar("F", bound=Callable[..., Any])

FORMAT = 2  # 2: each entry pickled on its own, unpickled only when asked for
"""Version of the on-disk layout; part of the key."""

APP_NAME = "occurrence-companion"

_MISSING = object()
_registry: list[Callable[..., Any]] = []
_files: dict[Path, tuple[tuple, dict]] = {}  # path -> (key, entries) loaded from or written to it in this process
_depth = 0  # nesting of derivation calls: the file is written when the outermost one returns
_dirty: set[Path] = set()
_warned = False  # the unwritable-cache note is printed once per process


def cache_dir() -> Path | None:
    """The cache directory, or None when ``OCC_NO_CACHE`` is set to a non-empty value other than 0."""
    if os.environ.get("OCC_NO_CACHE", "") not in ("", "0"):
        return None
    if os.environ.get("OCC_CACHE_DIR"):
        return Path(os.environ["OCC_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / APP_NAME


@functools.lru_cache(maxsize=None)
def package_version() -> str:
    """The installed version of occurrence-companion ("unknown" when it is run from an uninstalled checkout)."""
    try:
        return importlib.metadata.version(APP_NAME)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@functools.lru_cache(maxsize=None)
def source_hash(module_name: str) -> str:
    """SHA-256 of the source file of a module (the derivation code), as hex."""
    path = inspect.getsourcefile(sys.modules[module_name])
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def cache_key(module_name: str) -> tuple[tuple[str, str], ...]:
    """Everything the cached forms depend on besides the function arguments, as (name, value) pairs."""
    import sympy
    from sympy.external.gmpy import GROUND_TYPES

    return (("format", str(FORMAT)), ("package", package_version()), ("sympy", sympy.__version__),
            ("ground_types", GROUND_TYPES), ("module", module_name), ("source_sha256", source_hash(module_name)))


def ground_types_requested() -> str:
    """The SymPy ground types in use, or (SymPy not imported yet) the ones requested by
    ``SYMPY_GROUND_TYPES``, which ``theory`` pins; read without importing SymPy."""
    if "sympy" in sys.modules:
        from sympy.external.gmpy import GROUND_TYPES

        return GROUND_TYPES
    return os.environ.get("SYMPY_GROUND_TYPES", "auto")


@functools.lru_cache(maxsize=None)
def light_key(module_name: str) -> tuple[tuple[str, str], ...]:
    """The key of ``cache_key`` computed without importing SymPy or the derivation module (versions
    from the installed metadata, the source hashed from its file, the requested ground types);
    memoised until ``clear_memory``."""
    import importlib.util

    try:
        sympy_version = importlib.metadata.version("sympy")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - SymPy is a dependency
        sympy_version = "unknown"
    origin = importlib.util.find_spec(module_name).origin
    digest = hashlib.sha256(Path(origin).read_bytes()).hexdigest()
    return (("format", str(FORMAT)), ("package", package_version()), ("sympy", sympy_version),
            ("ground_types", ground_types_requested()), ("module", module_name), ("source_sha256", digest))


def register_memo(fn: Callable[..., Any]) -> None:
    """Have ``clear_memory`` also call ``fn.cache_clear()`` (an in-memory memo over the disk cache)."""
    _registry.append(fn)


register_memo(light_key)


def light_value(module_name: str, entry: tuple, build: Callable[[], Any]) -> Any:
    """A value made from ``module_name``'s derivations, of plain Python data only (str, int, tuple,
    None), cached on disk beside the derivations under ``light_key``, so that reading it back needs
    neither SymPy nor the derivation module; ``build()`` (which may import SymPy) makes it on a miss.
    Used by ``theory.compiled`` for the Python source of the closed forms."""
    base = cache_dir()
    key = light_key(module_name)
    path = None
    if base is not None:
        digest = hashlib.sha256(repr(key).encode()).hexdigest()[:24]
        path = base / f"compiled-{module_name.rsplit('.', 1)[-1]}-{digest}.pickle"
        raw = _entries(path, key).get(entry)
        if raw is not None:
            try:
                return pickle.loads(raw)
            except Exception:  # noqa: BLE001 - a corrupt entry is built again
                pass
    value = build()
    if path is not None:
        _entries(path, key)[entry] = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        _dirty.add(path)
        if _depth == 0:
            _flush()
    return value


def file_value(module_name: str, entry: tuple, build: Callable[[], Any], keep: Callable[[Any], bool],
               max_files: int = 32) -> Any:
    """A value computed by ``module_name`` (plain Python data: str, bytes, int, float, tuple, None), cached
    on disk in a file of its own under ``light_key`` and ``entry`` (an edit of the module's source selects
    a new file); ``build()`` makes it on a miss, and it is written only when ``keep(value)`` (large values
    are rebuilt rather than stored).  At most ``max_files`` such files of the module are kept: the least
    recently used go first.  Used by ``numerics.theorem.series`` for its float enumerations, whose weights need
    scipy.special, a third of the main job's start-up."""
    base = cache_dir()
    if base is None:
        return build()
    key = (light_key(module_name), entry)
    stem = f"value-{module_name.rsplit('.', 1)[-1]}"
    path = base / f"{stem}-{hashlib.sha256(repr(key).encode()).hexdigest()[:24]}.pickle"
    payload = _read(path, key)
    if "value" in payload:
        try:
            os.utime(path)  # recently used
        except OSError:
            pass
        return payload["value"]
    value = build()
    if keep(value):
        try:
            atomic_write(path, lambda fh: pickle.dump({"key": key, "entries": {"value": value}}, fh,
                                                      protocol=pickle.HIGHEST_PROTOCOL))
            for old in sorted(base.glob(f"{stem}-*.pickle"), key=lambda f: f.stat().st_mtime)[:-max_files]:
                old.unlink(missing_ok=True)
        except OSError:  # read-only or full disk, or a file another process removed: rebuilt next time
            pass
    return value


def cache_file(module_name: str) -> Path | None:
    """The file holding the cached derivations of ``module_name`` under the current key (None: no disk cache)."""
    base = cache_dir()
    if base is None:
        return None
    digest = hashlib.sha256(repr(cache_key(module_name)).encode()).hexdigest()[:24]
    return base / f"derivations-{module_name.rsplit('.', 1)[-1]}-{digest}.pickle"


def _read(path: Path, key) -> dict:
    """Entries stored in ``path`` under ``key``; {} when absent, unreadable, corrupt or of another key."""
    try:
        with open(path, "rb") as fh:
            payload = pickle.load(fh)
    except Exception:  # noqa: BLE001 - any unreadable or corrupt file is ignored and rebuilt
        return {}
    if not isinstance(payload, dict) or payload.get("key") != key or not isinstance(payload.get("entries"), dict):
        return {}
    return payload["entries"]


def _write(path: Path, key, entries: dict) -> None:
    """Merge ``entries`` with the file's current ones and replace it atomically; failures are ignored."""
    try:
        merged = {**_read(path, key), **entries}
        atomic_write(path, lambda fh: pickle.dump({"key": key, "entries": merged}, fh,
                                                  protocol=pickle.HIGHEST_PROTOCOL))
    except OSError as exc:  # read-only or full disk: the cache is an optimisation only, but say so once
        global _warned
        if not _warned:
            _warned = True
            print(f"note: the derivation cache {path.parent} is not writable ({exc.strerror or exc}); the SymPy "
                  "derivations are repeated on every start (set OCC_CACHE_DIR to a writable folder, or "
                  "OCC_NO_CACHE=1 to silence this)", file=sys.stderr)
        return


def _plausible(value: Any, annotation: Any) -> bool:
    """Whether a value read from the cache has the kind its derivation returns (its return annotation:
    a SymPy object, or a tuple / dict of them), so a wrong entry is derived again instead of failing later."""
    import sympy

    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    if text.startswith("tuple"):
        return isinstance(value, tuple) and all(isinstance(v, sympy.Basic) for v in value)
    if text.startswith("dict"):
        return isinstance(value, dict) and all(isinstance(v, sympy.Basic) for v in value.values())
    return isinstance(value, sympy.Basic)


def _entries(path: Path, key) -> dict:
    if path not in _files or _files[path][0] != key:
        _files[path] = (key, dict(_read(path, key)))
    return _files[path][1]


def derivation(fn: F) -> F:
    """Memoise a derivation in memory and in the disk cache (arguments must be hashable and picklable).

    The wrapped function gains ``cache_clear()``, which forgets the in-memory memo only.
    """
    sig = inspect.signature(fn)
    memo: dict = {}

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        global _depth
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        args_key = tuple(bound.arguments.items())
        if args_key in memo:
            return memo[args_key]
        path = cache_file(fn.__module__)
        entry = (fn.__qualname__, args_key)
        value = _MISSING
        if path is not None:
            key = cache_key(fn.__module__)
            raw = _entries(path, key).get(entry)
            if raw is not None:
                try:
                    value = pickle.loads(raw)
                except Exception:  # noqa: BLE001 - a corrupt entry is derived again
                    value = _MISSING
                if value is not _MISSING and not _plausible(value, sig.return_annotation):
                    value = _MISSING  # a wrong entry (e.g. an int in place of an expression): derived again
        if value is _MISSING:
            _depth += 1
            try:
                value = fn(*args, **kwargs)
            finally:
                _depth -= 1
            if path is not None:
                _entries(path, key)[entry] = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
                _dirty.add(path)
                if _depth == 0:
                    _flush()
        memo[args_key] = value
        return value

    wrapper.cache_clear = memo.clear  # type: ignore[attr-defined]
    _registry.append(wrapper)
    return wrapper  # type: ignore[return-value]


def _flush() -> None:
    for path in sorted(_dirty):
        _write(path, *_files[path])
    _dirty.clear()


def clear_memory() -> None:
    """Forget every in-memory memo and loaded file (the disk files stay): the next calls read the disk."""
    for fn in _registry:
        fn.cache_clear()
    _files.clear()
    _dirty.clear()
