"""LaTeX export of the derived expressions (standalone document, or single equations)."""
from __future__ import annotations

import sympy as sp

from . import symbolic as S
from .validation import SettingError, check_variant

_LAW = {"positive": r"n\sim\mathrm{Geom}(p)\text{ on }\{1,2,\dots\}",
        "nonnegative": r"n\sim\mathrm{Geom}(p)\text{ on }\{0,1,\dots\}"}


LINE_BUDGET = 110  # characters of LaTeX source per displayed line before a sum is broken


def expr_latex(expr) -> str:
    return sp.latex(expr, ln_notation=True)


def expr_latex_lines(expr, budget: int = LINE_BUDGET) -> list[str]:
    """LaTeX of expr split into display lines at its top-level + and - signs (a long sum becomes one
    term per line; a scalar times a long sum has the sum broken inside its parentheses)."""
    expr = sp.sympify(expr)
    whole = expr_latex(expr)
    if len(whole) <= budget:
        return [whole]
    prefix, suffix, inner = "", "", expr
    if isinstance(expr, sp.Mul):
        adds = [a for a in expr.args if isinstance(a, sp.Add)]
        if len(adds) == 1:  # scalar * (long sum): break inside big fixed delimiters (\left( cannot span lines)
            rest = sp.Mul(*[a for a in expr.args if a is not adds[0]])
            prefix = ("-" if rest == -1 else "" if rest == 1 else expr_latex(rest)) + r"\Bigg("
            suffix, inner = r"\Bigg)", adds[0]
    if not isinstance(inner, sp.Add):
        return [whole]
    lines = []
    for i, term in enumerate(sp.Add.make_args(inner)):
        neg = term.could_extract_minus_sign()
        body = expr_latex(-term if neg else term)
        sign = ("-" if neg else "") if i == 0 else ("- " if neg else "+ ")
        lines.append(sign + body)
    lines[0] = prefix + lines[0]
    lines[-1] = lines[-1] + suffix
    return lines


def aligned(lhs: str, expr, display: str = "") -> str:
    """``lhs = rhs`` as one display, broken over lines inside an aligned block when long
    (``display``, when given, is shown as the right-hand side instead)."""
    lines = [display] if display else expr_latex_lines(expr)
    if len(lines) == 1:
        return f"{lhs} = {lines[0]}"
    body = [rf"{lhs} = {{}} & {lines[0]}"] + [rf"& \quad {ln}" for ln in lines[1:]]
    return "\\begin{aligned}\n" + " \\\\\n".join(body) + "\n\\end{aligned}"


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
        r"\usepackage[margin=2cm]{geometry}",
        r"\DeclareMathOperator{\Li}{Li}",
        r"\begin{document}",
        r"\section*{Occurrence language: population gradient formulas}",
        rf"Setting: alphabet size $d$, marked symbol $a$, tokens i.i.d.\ uniform, ${_LAW[lengths]}$, "
        r"$y=+1$ iff $a$ occurs, squared loss $R=\mathbb{E}[(f-y)^2]/2$ unless marked logistic. "
        r"Parameters symmetric in the unmarked symbols: $(\alpha_a,\alpha_b,\beta_a,\beta_b)$; "
        r"gradients are per coordinate. $\operatorname{Li}_s$ is the polylogarithm.",
    ]
    for der, _ in equations(lengths, keys):
        lines.append(rf"\paragraph{{{_escape(der.title)}}}")
        if der.note:
            lines.append(_escape(der.note))
        lines.append(r"\begin{equation*}")
        lines.append(aligned(der.lhs, der.expr, der.display).replace(r"\operatorname{Li}", r"\Li"))
        lines.append(r"\end{equation*}")
    if not keys:
        lines.append(r"\paragraph{Phase 3 (fixed attention)} With $u=e^{\alpha_a-\alpha_b}$, $g=cu/(cu+n-c)$, "
                     r"$\phi=(g,1-g)$, $M=\mathbb{E}[\phi\phi^\top]$, $m=\mathbb{E}[y\phi]$, "
                     r"$D=\mathrm{diag}(1,1/(d-1))$, $\beta_0=\beta^{(1)}$:")
        for lhs, tex in S.phase3_series_display(lengths):
            lines += [r"\begin{equation*}", f"{lhs} = {tex}", r"\end{equation*}"]
        for title, tex in S.phase3_display():
            lines += [r"\begin{equation*}", tex, r"\end{equation*}"]
    lines.append(r"\end{document}")
    return "\n".join(lines) + "\n"


def _escape(text: str) -> str:
    for a, b in (("_", r"\_"), ("^", r"\^{}"), ("&", r"\&"), ("%", r"\%"), ("#", r"\#")):
        text = text.replace(a, b)
    return text
