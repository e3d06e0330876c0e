"""LaTeX of the derived expressions: single displays, the standalone document, and plain-text
titles turned into text with inline math (for LaTeX text mode and for Markdown).

Titles and notes in the catalogue (``theory.catalogue``) and the claims table are plain text such as
``"inf_beta R <= floor + epsilon/2"``; ``text_with_math`` turns every formula-like token into
inline math, so LaTeX shows $\\inf_{\\beta}$ R $\\le$ floor + $\\epsilon$/2 instead of "R ¡= floor".

>>> text_with_math("Attention gradient at (0, beta^(1)), L_1 <= 1")
'Attention gradient at (0, $\\\\beta^{(1)}$), $L_{1}$ $\\\\le$ 1'
"""
from __future__ import annotations

import re
from typing import Iterable, Sequence

import sympy as sp

from theory import catalogue
from theory.validation import SettingError, check_variant

_LAW = {"positive": r"n\sim\mathrm{Geom}(p)\text{ on }\{1,2,\dots\}",
        "nonnegative": r"n\sim\mathrm{Geom}(p)\text{ on }\{0,1,\dots\}"}

LINE_BUDGET = 66
"""Estimated printed width (in characters of math) of one display line in the exported document
(A4, 2 cm margins, 10 pt); a longer sum is broken at its top-level + and - signs."""

_GREEK = ("alpha", "beta", "gamma", "delta", "epsilon", "eta", "kappa", "lambda", "mu", "pi", "phi", "rho",
          "sigma", "tau", "theta")
_OPERATORS = {"inf": r"\inf", "sup": r"\sup", "min": r"\min", "max": r"\max", "ln": r"\ln", "log": r"\log",
              "exp": r"\exp"}
_SCRIPTED = r"[A-Za-z0-9]+(?:[_^](?:\([^()\s]*\)|[A-Za-z0-9]+))+"
_TOKEN = re.compile(rf"(?P<scripted>(?<![\w\\]){_SCRIPTED})|(?P<greek>\b(?:{'|'.join(_GREEK)})\b)"
                    r"|(?P<op><=|>=|!=|(?<=\s)[<>](?=\s))")
_REL = {"<=": r"\le", ">=": r"\ge", "!=": r"\ne", "<": "<", ">": ">"}
_TEXT_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                 "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\^{}"}


def _word(name: str) -> str:
    """LaTeX of one identifier: Greek letters and operators by name, longer words upright."""
    if name in _GREEK:
        return "\\" + name
    if name in _OPERATORS:
        return _OPERATORS[name]
    if name[:1] == "d" and name[1:] in _GREEK:  # a differential such as dalpha
        return r"\mathrm{d}\," + "\\" + name[1:]
    if len(name) == 1 or name.isdigit():
        return name
    return rf"\mathrm{{{name}}}"


def _scripted(token: str) -> str:
    parts = re.split(r"([_^])", token)
    out = _word(parts[0])
    for mark, script in zip(parts[1::2], parts[2::2]):
        if script.startswith("("):
            inner = "(" + "".join(_word(w) if w.isalpha() else w for w in re.split(r"(\W)", script[1:-1]) if w) + ")"
        else:
            inner = _word(script)
        out += f"{mark}{{{inner}}}"
    return out


_FORMULA = re.compile(r"`([^`]+)`")
_MATH_WORD = re.compile(rf"{_SCRIPTED}|[A-Za-z]+|<=|>=|!=|[%&#]")


def formula_math(formula: str) -> str:
    """LaTeX math of a plain-text formula as the catalogue writes one between backticks
    (``R(0, beta) = beta^T A beta/2``): scripted names, Greek letters, operators and relations as in
    ``text_with_math``, longer words upright, the rest (digits, ``+ - / ( ) =``) as it is.

    >>> formula_math("inf_beta R <= R_floor + epsilon/2")
    '\\\\inf_{\\\\beta} R \\\\le R_{\\\\mathrm{floor}} + \\\\epsilon/2'
    """
    def one(m: re.Match) -> str:
        tok = m.group(0)
        if tok in _REL:
            return _REL[tok]
        if tok in "%&#":
            return "\\" + tok
        return _scripted(tok) if re.search(r"[_^]", tok) else _word(tok)
    return _MATH_WORD.sub(one, formula)


def text_with_math(text: str, *, markdown: bool = False) -> str:
    """Plain text with its formula-like tokens (``beta^(1)``, ``L_1``, ``eta_2``, Greek names,
    ``<=``) and its formulas between backticks (```r = c/n```, see ``formula_math``) as inline math
    ``$...$``; the rest escaped for LaTeX text mode (or, with ``markdown``, left as Markdown text with
    ``*`` and ``_`` escaped)."""
    parts = _FORMULA.split(text)
    if len(parts) > 1:  # odd parts are formulas
        return "".join(f"${formula_math(part)}$" if i % 2 else text_with_math(part, markdown=markdown)
                       for i, part in enumerate(parts))
    out, pos = [], 0
    for m in _TOKEN.finditer(text):
        out.append(_escape_text(text[pos:m.start()], markdown))
        tok = m.group(0)
        if m.group("scripted"):
            math = _scripted(tok)
        elif m.group("greek"):
            math = "\\" + tok
        else:
            math = _REL[tok]
        out.append(f"${math}$")
        pos = m.end()
    out.append(_escape_text(text[pos:], markdown))
    return "".join(out)


def _escape_text(text: str, markdown: bool) -> str:
    if markdown:
        return re.sub(r"([*_`])", r"\\\1", text)
    return "".join(_TEXT_ESCAPES.get(ch, ch) for ch in text)


def expr_latex(expr: sp.Basic) -> str:
    """SymPy's LaTeX of ``expr`` with ln for the natural logarithm."""
    return sp.latex(expr, ln_notation=True)


def visual_width(tex: str) -> float:
    """A rough printed width of a LaTeX math string, in characters: fractions count their wider
    part, scripts count 0.7, commands such as ``\\alpha`` one character, ``\\left``/braces nothing.

    >>> visual_width(r"\\frac{a + b}{c}") < visual_width("a + b + c")
    True
    """
    width, i = 0.0, 0
    while i < len(tex):
        ch = tex[i]
        if ch == "\\":
            m = re.match(r"\\([A-Za-z]+|.)", tex[i:])
            name = m.group(1)
            i += m.end()
            if name == "frac":
                num, i = _group(tex, i)
                den, i = _group(tex, i)
                width += max(visual_width(num), visual_width(den))
            elif name in ("left", "right", "Bigg", "bigg", "Big", "big", "displaystyle", "limits"):
                continue
            elif name in ("mathrm", "operatorname", "mathbf", "mathbb", "text", "mathcal"):
                body, i = _group(tex, i)
                width += 0.9 * len(re.sub(r"[\\{} ]", "", body))
            elif name in (",", ";", ":", "!", " "):
                width += 0.3
            else:
                width += 1.0
        elif ch in "^_":
            body, i = _group(tex, i + 1)
            width += 0.7 * visual_width(body)
        elif ch in "{}":
            i += 1
        elif ch in "+-=<>":
            width += 1.6  # binary operators and relations carry space on both sides
            i += 1
        elif ch == " ":
            i += 1
        else:
            width += 1.0
            i += 1
    return width


def _group(tex: str, i: int) -> tuple[str, int]:
    """The brace group (or single character / command) starting at ``tex[i]``, and the index after it."""
    if i >= len(tex):
        return "", i
    if tex[i] != "{":
        m = re.match(r"\\[A-Za-z]+|.", tex[i:])
        return m.group(0), i + m.end()
    depth = 0
    for j in range(i, len(tex)):
        depth += {"{": 1, "}": -1}.get(tex[j], 0)
        if depth == 0:
            return tex[i + 1:j], j + 1
    return tex[i + 1:], len(tex)


def expr_latex_lines(expr: sp.Basic, budget: float = LINE_BUDGET) -> list[str]:
    """LaTeX of ``expr`` as display lines: one line when it fits ``budget``; otherwise its
    top-level sum (or the sum inside a scalar times a sum) is packed greedily into lines."""
    expr = sp.sympify(expr)
    whole = expr_latex(expr)
    if visual_width(whole) <= budget:
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
    pieces = []
    for i, term in enumerate(sp.Add.make_args(inner)):
        neg = term.could_extract_minus_sign()
        body = expr_latex(-term if neg else term)
        sign = ("-" if neg else "") if i == 0 else ("- " if neg else "+ ")
        pieces.append(sign + body)
    pieces[0] = prefix + pieces[0]
    pieces[-1] = pieces[-1] + suffix
    lines: list[str] = []
    for piece in pieces:
        if lines and visual_width(lines[-1] + " " + piece) <= budget:
            lines[-1] += " " + piece
        else:
            lines.append(piece)
    return lines


def aligned(lhs: str, expr: sp.Basic, display: str = "") -> str:
    """``lhs = rhs`` as one display, broken over lines inside an aligned block when long
    (``display``, when given, is shown as the right-hand side instead)."""
    lines = [display] if display else expr_latex_lines(expr, LINE_BUDGET - visual_width(lhs) - 2)
    if len(lines) == 1:
        return f"{lhs} = {lines[0]}"
    body = [rf"{lhs} = {{}} & {lines[0]}"] + [rf"& \quad {ln}" for ln in lines[1:]]
    return "\\begin{aligned}\n" + " \\\\\n".join(body) + "\n\\end{aligned}"


def equations(lengths: str = "positive", keys: Sequence[str] | None = None) -> list[catalogue.Derivation]:
    """The catalogue entries for this length law, all of them or those with the given keys
    (an unknown key raises a SettingError naming the known ones)."""
    check_variant(lengths)
    ders = catalogue.all_derivations(lengths)
    if keys:
        known = {d.key for d in ders}
        unknown = [k for k in keys if k not in known]
        if unknown:
            raise SettingError(f"unknown derivation key(s) {unknown}; known: {sorted(known)}")
        ders = [d for d in ders if d.key in keys]
    return ders


def _display(lines: Iterable[str]) -> list[str]:
    return [r"\begin{equation*}", *lines, r"\end{equation*}"]


def latex_document(lengths: str = "positive", keys: Sequence[str] | None = None) -> str:
    """A standalone LaTeX document with every derived formula, each under its own heading
    (compiles with pdflatex and the amsmath, amssymb and geometry packages)."""
    lines = [
        r"\documentclass{article}",
        r"\usepackage{amsmath,amssymb}",
        r"\usepackage[a4paper,margin=2cm]{geometry}",
        r"\DeclareMathOperator{\Li}{Li}",
        r"\begin{document}",
        r"\section*{Occurrence language: population gradient formulas}",
        rf"Setting: alphabet size $d$, marked symbol $a$, tokens i.i.d.\ uniform, ${_LAW[lengths]}$, "
        r"$y=+1$ iff $a$ occurs, squared loss $R=\mathbb{E}[(f-y)^2]/2$ unless marked logistic. "
        r"Parameters symmetric in the unmarked symbols: $(\alpha_a,\alpha_b,\beta_a,\beta_b)$; "
        r"gradients are per coordinate. $\operatorname{Li}_s$ is the polylogarithm.",
    ]
    for der in equations(lengths, keys):
        lines.append(rf"\paragraph{{{text_with_math(der.title)}}}")
        if der.note:
            lines.append(text_with_math(der.note))
        lines += _display([aligned(der.lhs, der.expr, der.display).replace(r"\operatorname{Li}", r"\Li")])
    if not keys:
        lines.append(r"\subsection*{Phase 3 (fixed attention)}")
        lines.append(r"With $u=e^{\alpha_a-\alpha_b}$, $g=cu/(cu+n-c)$, $\phi=(g,1-g)$, "
                     r"$M=\mathbb{E}[\phi\phi^\top]$, $m=\mathbb{E}[y\phi]$, $D=\mathrm{diag}(1,1/(d-1))$, "
                     r"$\beta_0=\beta^{(1)}$.")
        for disp in catalogue.phase3_series_display(lengths) + catalogue.phase3_display():
            lines.append(rf"\paragraph{{{text_with_math(disp.title)}}}")
            lines += _display([disp.equation])
    lines.append(r"\end{document}")
    return "\n".join(lines) + "\n"
