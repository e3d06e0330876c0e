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
    entries (docs/derivations.md) the statement uses; ``decided_by`` the pytest node ids that decide it
    and ``doc`` the section that explains it (docs/claims.md shows both).
    """

    key: str
    name: str
    hypotheses: str
    statement: str
    regime: str
    check: str
    doc_keys: tuple[str, ...]
    decided_by: tuple[str, ...] = ()
    doc: str = ""


def _load() -> tuple[Claim, ...]:
    with (Path(__file__).with_name("claims.toml")).open("rb") as fh:
        rows = tomllib.load(fh)["claim"]
    return tuple(Claim(**{**row, "doc_keys": tuple(row["doc_keys"]), "decided_by": tuple(row.get("decided_by", ()))})
                 for row in rows)


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


@dataclass(frozen=True)
class Lemma:
    """A lemma a theorem of the paper rests on.  ``proof`` names its all-d proof in ``theory.proofs`` (the
    first column of docs/proofs.md's table "Proved for all d"); a lemma without one is argued by hand, and
    ``by_hand`` says where.  ``decided_by`` are pytest node ids, ``doc`` the section that explains it."""

    key: str
    name: str
    statement: str
    proof: str
    by_hand: str
    decided_by: tuple[str, ...]
    doc: str


@dataclass(frozen=True)
class Table1Claim:
    """One kind of claim of the paper's Table 1: the cells whose claim text (``verdicts.assess``) starts with
    ``claim_prefix``, decided by the criterion the ``decided_by`` tests check."""

    key: str
    claim_prefix: str
    name: str
    decided_by: tuple[str, ...]


@dataclass(frozen=True)
class OpenQuestion:
    """A question a referee raises that the paper does not claim; the scope study ``study`` examines it and
    the ``decided_by`` tests check that study's computation."""

    key: str
    name: str
    question: str
    study: str
    decided_by: tuple[str, ...]


def _table() -> dict:
    with (Path(__file__).with_name("claims.toml")).open("rb") as fh:
        return tomllib.load(fh)


def _rows(cls, name: str) -> tuple:
    return tuple(cls(**{**row, "decided_by": tuple(row["decided_by"])}) for row in _table()[name])


LEMMAS: tuple[Lemma, ...] = _rows(Lemma, "lemma")
"""The lemmas, in the order the argument uses them."""
TABLE1_CLAIMS: tuple[Table1Claim, ...] = _rows(Table1Claim, "table1_claim")
"""The kinds of Table 1 claim, in the order of theory/claims.toml."""
TABLE1: dict = _table()["table1"]
"""Where the Table 1 verdicts come from: ``run`` (the example run's results), ``doc`` (the section that explains
them) and ``refused_check`` (the test of the refusals)."""
OPEN_QUESTIONS: tuple[OpenQuestion, ...] = _rows(OpenQuestion, "open_question")
"""The open questions, in the order of theory/claims.toml."""


def table1_claim(text: str) -> Table1Claim:
    """The kind of a Table 1 cell from its claim text; a SettingError when no kind's prefix matches."""
    for kind in TABLE1_CLAIMS:
        if text.startswith(kind.claim_prefix):
            return kind
    raise SettingError(f"no kind of Table 1 claim in theory/claims.toml matches {text!r}")
