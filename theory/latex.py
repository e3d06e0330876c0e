"""LaTeX export of the derived expressions (standalone document, or single equations)."""
from __future__ import annotations

import sympy as sp

from . import symbolic as S
from .validation import SettingError, check_variant

_LAW = {"positive": r"n\sim\mathrm{Geom}(p)\text{ on }\{1,2,\dots\}",
        "nonnegative": r"n\sim\mathrm{Geom}(p)\text{ on }\{0,1,\dots\}"}


def expr_latex(expr) -> str:
    return sp.latex(expr, ln_notation=True)


def equations(lengths: str = "positive", keys=None):
    """[(Derivation, latex_of_rhs)] for all derivations, or for the given keys (unknown key: error)."""
    check_variant(lengths)
    ders = S.all_derivations(lengths)
    if keys:
        known = {d.key for d in ders}
        unknown = [k for k in keys if k not in known]
        if unknown:
            raise SettingError(f"unknown derivation key(s) {unknown}; known: {sorted(known)}")
        ders = [d for d in ders if d.key in keys]
    return [(der, expr_latex(der.expr)) for der in ders]


def latex_document(lengths: str = "positive", keys=None) -> str:
    """A standalone LaTeX document with every derived formula (compiles with amsmath/amssymb)."""
    lines = [
        r"\documentclass{article}",
        r"\usepackage{amsmath,amssymb}",
        r"\DeclareMathOperator{\Li}{Li}",
        r"\begin{document}",
        r"\section*{Occurrence language: population gradient formulas}",
        rf"Setting: alphabet size $d$, marked symbol $a$, tokens i.i.d.\ uniform, ${_LAW[lengths]}$, "
        r"$y=+1$ iff $a$ occurs, squared loss $R=\mathbb{E}[(f-y)^2]/2$ unless marked logistic. "
        r"Parameters symmetric in the unmarked symbols: $(\alpha_a,\alpha_b,\beta_a,\beta_b)$; "
        r"gradients are per coordinate. $\operatorname{Li}_s$ is the polylogarithm.",
    ]
    for der, tex in equations(lengths, keys):
        tex = tex.replace(r"\operatorname{Li}", r"\Li")
        lines.append(rf"\paragraph{{{_escape(der.title)}}}")
        if der.note:
            lines.append(_escape(der.note))
        lines.append(r"\begin{equation*}")
        lines.append(rf"{der.lhs} = {tex}")
        lines.append(r"\end{equation*}")
    lines.append(r"\end{document}")
    return "\n".join(lines) + "\n"


def _escape(text: str) -> str:
    for a, b in (("_", r"\_"), ("^", r"\^{}"), ("&", r"\&"), ("%", r"\%"), ("#", r"\#")):
        text = text.replace(a, b)
    return text
