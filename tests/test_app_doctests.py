"""The usage examples in the docstrings of the application package run as doctests."""
import doctest
import importlib

import pytest

MODULES = ["app", "app.cli", "app.formatting", "app.io", "app.latex", "app.mainjob", "app.options", "app.plotting",
           "app.progress"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
