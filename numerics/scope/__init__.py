"""The studies of ``occ-companion scope``: how far the theorem reaches once its simplifications are relaxed.

Each study NAME of ``STUDIES`` is two modules: ``numerics.scope.NAME`` (computation only) with ``TITLE``,
``config(quick) -> dict`` (every parameter, JSON-ready), ``units(cfg) -> {unit name: args}`` (independent
units of seconds to minutes each), ``unit(args) -> dict`` (deterministic given its args, seeds included) and
``summarise(cfg, results) -> dict`` (the study's numbers and a ``verdict`` dict); and ``app.render.scope_studies.NAME``
(presentation only) with ``markdown(summary) -> str`` and ``figure(summary, path)``.  ``numerics.scope.studies``
runs every unit as a generic unit of ``numerics.units``.  This package module imports nothing of the suite: it
is imported with every study module, so it is part of the code every study's store key covers.
"""
from __future__ import annotations

import importlib

STUDIES = ("regime", "kqv", "sgd", "laws", "samples")
"""The five studies, in their order on the page: 1 the step-size regime, 2 key-query-value, 3 stochastic gradients,
4 length laws and losses, 5 the sample-complexity constant."""


def computation(name: str):
    """The computation module of a study."""
    return importlib.import_module(f"numerics.scope.{name}")


def unit_function(name: str) -> str:
    """The "module:name" reference of a study's unit function (the key of its units in the store)."""
    return f"numerics.scope.{name}:unit"
