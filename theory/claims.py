"""The claims table: every theorem the suite checks, stated once.

README.md, docs/derivations.md, the check modules (their docstrings) and ``occ-companion prove`` read
this table; no theorem statement is written anywhere else by hand.  Statements are plain text (they
render in Markdown, LaTeX text mode and a terminal alike); formulas they mention are catalogue keys
(``doc_keys``), which docs/derivations.md displays.

>>> [c.key for c in CLAIMS][:3]
['three_phase', 'output_only', 'attention_then_output']
>>> claim("output_only").check
'checks/test_output_only.py'
"""
from __future__ import annotations

from dataclasses import dataclass

from .validation import SettingError


@dataclass(frozen=True)
class Claim:
    """One theorem of the paper as this suite states and checks it.

    ``hypotheses`` and ``statement`` are plain text; ``regime`` says which parameters the claim is
    quantified over; ``check`` is the module that confirms it; ``doc_keys`` name the catalogue
    entries (docs/derivations.md) the statement uses.
    """

    key: str
    name: str
    hypotheses: str
    statement: str
    regime: str
    check: str
    doc_keys: tuple[str, ...]


CLAIMS: tuple[Claim, ...] = (
    Claim(
        key="three_phase",
        name="Three-phase plan reaches any target risk",
        hypotheses="squared loss, d >= 3, epsilon > 0, balancing or any p in (0, 1)",
        statement=("one output step eta_1, one attention step eta_2, then T output steps eta_3 give "
                   "risk at most floor + epsilon, where floor = 0 under the default length law and "
                   "P(n = 0)/2 under the nonnegative-length variant (the empty string has f = 0)"),
        regime=("0 < eta_1 < eta1_max (= d at the balancing p; d + 1 under the variant), "
                "eta_2 >= eta2_min(epsilon, eta_1) = max(log u_min, 0) / kappa(eta_1), "
                "0 < eta_3 <= 1, T >= T_min"),
        check="checks/test_three_phase.py",
        doc_keys=("eta1_max", "beta1_a", "beta1_b", "alpha2_a", "alpha2_b", "kappa", "u_min", "eta2_min", "floor"),
    ),
    Claim(
        key="output_only",
        name="Output layer alone stays above a floor",
        hypotheses="squared loss, d >= 3, attention fixed at its zero initialisation",
        statement=("the infimum over all output weights beta in R^d of R(0, beta) equals c(d, p) > 0, "
                   "so every output-only trajectory, whatever its step sizes, keeps risk at least c(d, p); "
                   "at the balancing p, c(d) = (1 - (d-2)/((d-1) ln(d-1)))/2"),
        regime="any output step sizes, any number of steps",
        check="checks/test_output_only.py",
        doc_keys=("c_general", "c_balanced"),
    ),
    Claim(
        key="attention_then_output",
        name="Attention first, then output, stays above the same floor",
        hypotheses="squared loss, d >= 3, zero initialisation",
        statement=("the attention gradient at beta = 0 is exactly 0, so one attention step leaves "
                   "alpha = 0 and output fine-tuning afterwards keeps risk at least c(d, p)"),
        regime="any attention step size, any output step sizes and number of steps",
        check="checks/test_attention_then_output.py",
        doc_keys=("grad_alpha_0", "c_general"),
    ),
    Claim(
        key="attention_only",
        name="Attention alone does not move the risk",
        hypotheses="squared or logistic loss, any d >= 2, zero initialisation",
        statement="beta stays 0, so f = 0 on every string and the risk stays at its initial value R(0, 0)",
        regime="any attention step sizes, any number of steps",
        check="checks/test_attention_only.py",
        doc_keys=("grad_alpha_0", "risk_zero"),
    ),
    Claim(
        key="finite_sample",
        name="Three-phase plan with finitely many samples",
        hypotheses="squared loss, d >= 3, the population step-size regime",
        statement=("phases 1-2 on N_1 strings and phase 3 on N_3 fresh strings reach held-out risk at "
                   "most epsilon with N_1 = N_3 = ceil(C d ln d); this suite estimates it with C = 30 "
                   "(the d ln d scale is checked, not the paper's constant)"),
        regime="N_1 = N_3 = ceil(30 d ln d), d in 5, 10, 20, 50, several seeds",
        check="checks/test_finite_sample.py",
        doc_keys=(),
    ),
)


def claim(key: str) -> Claim:
    """The claim with this key; a SettingError names the known keys otherwise."""
    for c in CLAIMS:
        if c.key == key:
            return c
    raise SettingError(f"unknown claim {key!r}; known: {', '.join(c.key for c in CLAIMS)}")


def claims_markdown() -> list[str]:
    """The claims as Markdown bullet points (README and docs/derivations.md render this)."""
    out = []
    for c in CLAIMS:
        out.append(f"* **{c.name}** (`{c.check}`): {c.hypotheses}; {c.regime}: {c.statement}.")
    return out
