"""The closed forms of ``theory.symbolic`` as Python source, so that evaluating them needs no SymPy.

SymPy derives (``theory.symbolic``) and ``sympy.lambdify`` prints each form as the source of a Python
function of (d, p, eta_1, eta_2, eta_3, epsilon, u, beta_a, beta_b) over mpmath; ``source`` keeps that
text, the names of the mpmath functions it calls and the symbols it needs, as plain data in the disk
cache beside the derivations (``theory.cache.light_value``, same key: versions, ground types, the hash
of theory/symbolic.py).  A command whose forms are cached then imports neither SymPy nor the
derivations, and ``function`` rebuilds the very function lambdify made (same code, same mpmath
functions, so the same values to the last bit; tests/theory/test_cache.py checks it).

``rational`` evaluates a form that is a rational function of d exactly, as a Fraction (the balancing p).

>>> from fractions import Fraction
>>> rational("balanced_p", ("positive",), 5)
Fraction(1, 4)
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from theory.cache import light_value, register_memo

ARGS = ("d", "p", "eta_1", "eta_2", "eta_3", "epsilon", "u", "beta_a", "beta_b")
"""The arguments of every compiled form, in order (the symbols of ``theory.symbolic``)."""
MODULE = "theory.symbolic"


@dataclass(frozen=True)
class Source:
    """A closed form as Python source: ``text`` defines ``_lambdifygenerated(*ARGS)``; ``names`` maps
    each global it reads to the mpmath attribute lambdify bound it to (the others are Python builtins,
    as in lambdify's namespace); ``free`` lists the symbols other
    than d and p the form depends on."""

    text: str
    names: tuple[tuple[str, str], ...]
    free: tuple[str, ...]


def derived(name: str, args: tuple = (), index=None):
    """The SymPy expression ``theory.symbolic.<name>(*args)`` (item ``index`` of a tuple or dict)."""
    from theory import symbolic

    value = getattr(symbolic, name)(*args)
    return value if index is None else value[index]


def _build(name: str, args: tuple, index) -> tuple | None:
    """(text, names, free) of the lambdified form, or None when a global is not an mpmath attribute."""
    import builtins
    import inspect

    import mpmath
    import sympy as sp

    from theory import symbolic

    expr = sp.sympify(derived(name, args, index))
    fn = sp.lambdify([getattr(symbolic, a) for a in _SYMBOL_ATTRS], expr, modules="mpmath")
    names = []
    for glob in fn.__code__.co_names:
        if glob not in fn.__globals__:
            if not hasattr(builtins, glob):  # pragma: no cover - lambdify binds every name it prints
                return None
            continue  # a Python builtin (max, min, abs): the rebuilt function sees the same one
        obj = fn.__globals__[glob]
        attr = next((a for a in [glob, *dir(mpmath)] if hasattr(mpmath, a) and getattr(mpmath, a) is obj), None)
        if attr is None:
            return None
        names.append((glob, attr))
    free = tuple(sorted({str(s) for s in expr.free_symbols} - {"d", "p"}))
    return inspect.getsource(fn), tuple(names), free


_SYMBOL_ATTRS = ("d", "p", "eta1", "eta2", "eta3", "eps", "u", "beta_a", "beta_b")
"""The names in ``theory.symbolic`` of the symbols ARGS (same order)."""


SOURCE_FORMAT = 1
"""Version of what ``_build`` stores; part of each entry's key (bump it when ``_build`` changes)."""


@lru_cache(maxsize=None)
def source(name: str, args: tuple = (), index=None) -> Source | None:
    """The form ``theory.symbolic.<name>(*args)[index]`` as source, from the disk cache (SymPy only on
    a miss; memoised in memory); None when it cannot be compiled (then evaluate the SymPy expression)."""
    got = light_value(MODULE, ("mpmath-source", SOURCE_FORMAT, name, tuple(args), index),
                      lambda: _build(name, tuple(args), index))
    return None if got is None else Source(*got)


register_memo(source)


@lru_cache(maxsize=512)
def function(src: Source):
    """The Python function that ``src`` defines, with its globals bound to the mpmath functions."""
    import mpmath

    namespace = {glob: getattr(mpmath, attr) for glob, attr in src.names}
    exec(compile(src.text, f"<closed form {hash(src.text) & 0xffff:04x}>", "exec"), namespace)  # noqa: S102
    return namespace["_lambdifygenerated"]


def rational(name: str, args: tuple, d: int) -> Fraction:
    """A closed form that is a rational function of d alone, evaluated exactly at the integer ``d``
    (its source run on Fractions); a form that is not one raises ValueError."""
    src = source(name, args)
    if src is None or src.free or src.names:
        raise ValueError(f"{name}{args} is not a rational function of d")
    try:
        value = function(src)(Fraction(d), *([None] * (len(ARGS) - 1)))
    except TypeError:  # it reads p or another symbol
        value = None
    if not isinstance(value, Fraction):
        raise ValueError(f"{name}{args} is not a rational function of d (got {value!r})")
    return value
