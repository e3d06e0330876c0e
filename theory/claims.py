"""The claims table: every theorem the suite checks, stated once (the data is theory/claims.toml).

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

import tomllib
from dataclasses import dataclass
from pathlib import Path

from theory.validation import SettingError


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


def _load() -> tuple[Claim, ...]:
    with (Path(__file__).with_name("claims.toml")).open("rb") as fh:
        rows = tomllib.load(fh)["claim"]
    return tuple(Claim(**{**row, "doc_keys": tuple(row["doc_keys"])}) for row in rows)


CLAIMS: tuple[Claim, ...] = _load()
"""Every claim, in the order of theory/claims.toml."""


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
