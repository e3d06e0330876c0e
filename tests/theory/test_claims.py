"""The claims table (theory/claims.py) is the one statement of each theorem: every claim names an
existing check module that declares it, and every formula it cites is in the catalogue."""
import importlib
from pathlib import Path

import pytest

from theory.claims import CLAIMS, claim, claims_markdown
from theory.validation import SettingError

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("c", CLAIMS, ids=lambda c: c.key)
def test_each_claim_is_checked_by_its_module(c):
    path = ROOT / c.check
    assert path.exists(), c.check
    module = importlib.import_module(c.check[:-3].replace("/", "."))
    assert module.CLAIM is c
    assert f"``{c.key}``" in module.__doc__


@pytest.mark.parametrize("c", CLAIMS, ids=lambda c: c.key)
def test_cited_formulas_are_in_the_catalogue(c):
    from theory.catalogue import all_derivations

    keys = {der.key for lengths in ("positive", "nonnegative") for der in all_derivations(lengths)}
    assert set(c.doc_keys) <= keys


def test_keys_are_unique_and_lookup_refuses_unknown():
    assert len({c.key for c in CLAIMS}) == len(CLAIMS)
    with pytest.raises(SettingError, match="known: three_phase"):
        claim("nonsense")
    assert len(claims_markdown()) == len(CLAIMS)
