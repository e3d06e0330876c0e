"""The usage examples in the docstrings of the application package run as doctests."""
import doctest
import importlib

import pytest

MODULES = ["app", "app.cli", "app.render.formatting", "app.io", "app.render.latex", "app.commands.run", "app.options", "app.render.plotting",
           "app.progress"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
