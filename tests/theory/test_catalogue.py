"""The presentation catalogue (theory.catalogue): plain-text titles, display forms equal to the derived
expressions, one key set for both length laws; the docstring examples of the symbolic modules."""
import theory  # isort: skip  (first: pins SymPy's ground types)
import doctest
import importlib

import pytest
import sympy as sp

from theory import catalogue

LENGTHS = ("positive", "nonnegative")


@pytest.mark.parametrize("lengths", LENGTHS)
def test_titles_and_notes_are_plain_text(lengths):
    texts = [t for der in catalogue.all_derivations(lengths) for t in (der.title, der.note)]
    texts += [disp.title for disp in catalogue.phase3_series_display(lengths) + catalogue.phase3_display()]
    for text in texts:
        parts = text.split("`")  # formulas between backticks (odd parts) become math in the LaTeX and Markdown
        assert len(parts) % 2 == 1, f"unpaired backtick: {text}"
        prose, formulas = parts[0::2], parts[1::2]
        for part in prose:
            assert not set(part) & catalogue.FORBIDDEN_IN_TEXT, text
            assert "<=" not in part and ">=" not in part
        for part in formulas:
            assert part.strip() and not set(part) & catalogue.FORBIDDEN_IN_FORMULA, text


@pytest.mark.parametrize("lengths", LENGTHS)
def test_display_forms_equal_the_derived_expressions(lengths):
    """A hand-grouped display (``form``) is the derived expression, exactly (symbolic difference 0)."""
    grouped = [der for der in catalogue.all_derivations(lengths) if der.form is not None]
    assert {der.key for der in grouped} >= {"c_general", "c_balanced"}
    for der in grouped:
        diff = sp.expand_log(sp.together(der.form - der.expr), force=True)
        assert sp.cancel(sp.together(diff)) == 0, der.key
        assert der.display, der.key


def test_both_length_laws_have_the_same_keys_and_eta1_max():
    keys = [[der.key for der in catalogue.all_derivations(lengths)] for lengths in LENGTHS]
    assert keys[0] == keys[1] and len(set(keys[0])) == len(keys[0])
    assert catalogue.entry("eta1_max_balanced").expr == theory.symbolic.d
    assert catalogue.entry("eta1_max_balanced", "nonnegative").expr == theory.symbolic.d + 1
    with pytest.raises(theory.SettingError, match="unknown closed form"):
        catalogue.entry("nonsense")


def test_every_phase3_display_has_a_heading():
    displays = catalogue.phase3_series_display() + catalogue.phase3_display()
    assert len(displays) == 7 and all(disp.title and disp.equation.startswith(disp.lhs) for disp in displays)


@pytest.mark.parametrize("name", ["theory.symbolic", "theory.catalogue", "numerics.theorem.closed_forms"])
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
