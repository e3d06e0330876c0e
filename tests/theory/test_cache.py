"""The disk cache of the SymPy derivations (theory.cache) and the pinned SymPy ground types."""
from __future__ import annotations

import importlib
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import theory  # isort: skip  (first: pins SymPy's ground types)
import pytest
import sympy as sp

from theory import cache, catalogue
from theory import symbolic
ROOT = Path(__file__).resolve().parents[2]

# cheap derivations (about a second fresh) covering an expression, a polylog sum and a tuple of matrices
# of double sums; test_every_catalogue_form_survives_the_cache_round_trip covers every other form
CHEAP = [("inverse_length_moment", (1, "positive")), ("ratio_moment", (2, "nonnegative")),
         ("phase3_series", ("nonnegative",))]


def _srepr(value) -> str:
    if isinstance(value, dict):
        return repr({k: sp.srepr(v) for k, v in sorted(value.items())})
    if isinstance(value, tuple):
        return repr(tuple(sp.srepr(v) for v in value))
    return sp.srepr(value)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A fresh cache directory for this test; the in-memory memos are dropped before and after."""
    monkeypatch.setenv("OCC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("OCC_NO_CACHE", raising=False)
    cache.clear_memory()
    yield tmp_path
    cache.clear_memory()


def test_cached_forms_equal_fresh_derivations(cache_dir, monkeypatch):
    """Derive with the disk cache off, then through the cache (written, then read back): same forms."""
    monkeypatch.setenv("OCC_NO_CACHE", "1")
    fresh = {(name, args): _srepr(getattr(symbolic, name)(*args)) for name, args in CHEAP}
    assert not list(cache_dir.iterdir())  # nothing written with the cache off
    monkeypatch.delenv("OCC_NO_CACHE")
    cache.clear_memory()
    for name, args in CHEAP:
        getattr(symbolic, name)(*args)  # derived again and written
    cache.clear_memory()
    (path,) = cache_dir.glob("derivations-symbolic-*.pickle")
    stored = pickle.loads(path.read_bytes())
    assert stored["key"] == cache.cache_key("theory.symbolic")
    for name, args in CHEAP:
        value = getattr(symbolic, name)(*args)  # now read from the disk
        assert _srepr(value) == fresh[(name, args)], name
        assert any(entry[0] == name for entry in stored["entries"]), name


def test_every_catalogue_form_survives_the_cache_round_trip():
    """Each catalogue expression is reproduced exactly (srepr and ==) by the pickle the cache writes."""
    for lengths in ("positive", "nonnegative"):
        for der in catalogue.all_derivations(lengths):
            back = pickle.loads(pickle.dumps(der.expr, protocol=pickle.HIGHEST_PROTOCOL))
            assert sp.srepr(back) == sp.srepr(der.expr) and back == der.expr, der.key
        grads = symbolic.zero_init_gradients(lengths, "logistic")  # the one derivation returning a dict
        assert _srepr(pickle.loads(pickle.dumps(grads))) == _srepr(grads)


def _toy_module(tmp_path: Path, body: str, monkeypatch):
    """A module with one cached derivation that counts its calls, importable as ``toy_derivations``."""
    (tmp_path / "toy_derivations.py").write_text(textwrap.dedent(f'''
        import sympy as sp
        from theory.cache import derivation
        CALLS = []

        @derivation
        def form(k: int = 2):
            CALLS.append(k)
            return {body}
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("toy_derivations", None)
    return importlib.import_module("toy_derivations")


def test_an_edit_of_the_derivation_source_forces_a_rebuild(cache_dir, monkeypatch, tmp_path_factory):
    src = tmp_path_factory.mktemp("toy")
    toy = _toy_module(src, "sp.Symbol('x') ** k", monkeypatch)
    assert toy.form() == sp.Symbol("x") ** 2 and toy.CALLS == [2]
    assert toy.form(2) == sp.Symbol("x") ** 2 and toy.CALLS == [2]  # defaults filled in: same entry
    toy = _toy_module(src, "sp.Symbol('x') ** k", monkeypatch)  # same source, new process state
    assert toy.form() == sp.Symbol("x") ** 2 and toy.CALLS == []  # read from the disk
    cache.source_hash.cache_clear()
    toy = _toy_module(src, "sp.Symbol('x') ** (k + 1)", monkeypatch)  # the derivation code changed
    assert toy.form() == sp.Symbol("x") ** 3 and toy.CALLS == [2]
    assert len(list(cache_dir.glob("derivations-toy_derivations-*.pickle"))) == 2


def test_a_changed_key_forces_a_rebuild(cache_dir, monkeypatch):
    before = cache.cache_file("theory.symbolic")
    symbolic.inverse_length_moment(1)
    assert before.exists()
    monkeypatch.setattr(cache, "source_hash", lambda module_name: "0" * 64)
    cache.clear_memory()
    after = cache.cache_file("theory.symbolic")
    assert after != before and not after.exists()
    symbolic.inverse_length_moment(1)
    assert after.exists()


def test_a_corrupt_or_foreign_cache_file_is_ignored_and_rebuilt(cache_dir, monkeypatch):
    path = cache.cache_file("theory.symbolic")
    path.parent.mkdir(parents=True, exist_ok=True)
    for junk in (b"not a pickle", pickle.dumps({"key": "someone else's", "entries": {}}), b""):
        path.write_bytes(junk)
        cache.clear_memory()
        assert symbolic.inverse_length_moment(1, "nonnegative") == -symbolic.p * sp.log(symbolic.p)
        stored = pickle.loads(path.read_bytes())  # rewritten, valid, under the right key
        assert stored["key"] == cache.cache_key("theory.symbolic")
        assert any(name == "inverse_length_moment" for name, _ in stored["entries"])
    assert [p.name for p in cache_dir.iterdir()] == [path.name]  # no temporary file left behind


def test_no_cache_and_an_unwritable_directory_only_cost_time(tmp_path, monkeypatch):
    monkeypatch.setenv("OCC_NO_CACHE", "1")
    assert cache.cache_dir() is None
    monkeypatch.delenv("OCC_NO_CACHE")
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("OCC_CACHE_DIR", str(blocker / "sub"))  # cannot be created
    cache.clear_memory()
    try:
        assert symbolic.prob_empty("nonnegative") == symbolic.p
    finally:
        cache.clear_memory()


def test_default_location_is_the_user_cache_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("OCC_CACHE_DIR", raising=False)
    monkeypatch.delenv("OCC_NO_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.cache_dir() == tmp_path / "occurrence-companion"


def test_sympy_ground_types_are_pinned_in_this_process():
    from sympy.external.gmpy import GROUND_TYPES

    assert GROUND_TYPES == os.environ["SYMPY_GROUND_TYPES"] == theory.PINNED_GROUND_TYPES


@pytest.mark.parametrize("entry_point", ["app.cli", "theory.setting"])
def test_entry_points_pin_the_ground_types_before_sympy_loads(entry_point):
    """Without SYMPY_GROUND_TYPES in the environment, importing an entry point gives the pinned types
    even though python-flint is installed (SymPy would pick flint on its own)."""
    env = {k: v for k, v in os.environ.items() if k != "SYMPY_GROUND_TYPES"}
    code = f"import {entry_point}; from sympy.external.gmpy import GROUND_TYPES; print(GROUND_TYPES)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == theory.PINNED_GROUND_TYPES
