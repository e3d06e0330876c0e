"""The usage examples in the docstrings of the main entry points run as doctests."""
import doctest
import importlib

import pytest

MODULES = ["theory.arb_forms", "theory.files", "theory.setting", "theory.claims", "numerics.contexts", "numerics.model", "numerics.theorem.regime",
           "numerics.theorem.training", "numerics.theorem.montecarlo", "numerics.theorem.integral", "numerics.theorem.evaluators",
           "numerics.theorem.job"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no usage example"
    assert result.failed == 0
