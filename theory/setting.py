"""The setting as a value object: alphabet size, length law, loss, geometric parameter."""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache

from .validation import check_d, check_loss, check_p, check_variant


@lru_cache(maxsize=None)
def balanced_p_exact(d: int, lengths: str = "positive") -> Fraction:
    """The balancing p for alphabet size d, from the SymPy derivation (1/(d-1), or 1/(d+1) for the variant)."""
    import sympy as sp

    from . import symbolic

    d = check_d(d)
    check_variant(lengths)
    val = sp.nsimplify(symbolic.balanced_p(lengths).subs(symbolic.d, d))
    return Fraction(int(val.p), int(val.q))


@dataclass(frozen=True)
class Setting:
    """One instance of the setting.  ``p=None`` means the balancing value (P(y=+1) = 1/2)."""

    d: int
    p: float | Fraction | None = None
    lengths: str = "positive"
    loss: str = "squared"
    p_value: Fraction | float = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "d", check_d(self.d))
        check_variant(self.lengths)
        check_loss(self.loss)
        if self.p is None:
            pv = balanced_p_exact(self.d, self.lengths)
        else:
            pv = check_p(self.p)
        object.__setattr__(self, "p_value", pv)

    @property
    def balanced(self) -> bool:
        return self.p is None or Fraction(self.p_value) == balanced_p_exact(self.d, self.lengths)

    def describe(self) -> str:
        law = "{1,2,...}" if self.lengths == "positive" else "{0,1,...}"
        return (f"d={self.d}, n ~ Geometric(p={float(self.p_value):.6g}) on {law}, "
                f"{self.loss} loss{' (balanced classes)' if self.balanced else ''}")
