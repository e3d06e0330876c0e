"""The studies of ``occ-companion scope``: how far the theorem reaches once its simplifications are relaxed.

Each study NAME of ``STUDIES`` is two modules: ``numerics.scope.NAME`` (computation only) with ``TITLE``,
``config(quick) -> dict`` (every parameter, JSON-ready), ``units(cfg) -> {unit name: args}`` (independent
units of seconds to minutes each), ``unit(args) -> dict`` (deterministic given its args, seeds included) and
``summarise(cfg, results) -> dict`` (the study's numbers and a ``verdict`` dict); and ``app.render.scope_studies.NAME``
(presentation only) with ``markdown(summary) -> str`` and ``figure(summary, path)``.  ``app.commands.scope`` runs every
unit as a generic unit of the sweep runner (``numerics.experiments.sweep.call_spec``).
"""
from __future__ import annotations

import importlib

STUDIES = ("regime", "kqv", "sgd", "laws", "samples")
"""The five studies, in the issue's order: 1 the step-size regime, 2 key-query-value, 3 stochastic gradients,
4 length laws and losses, 5 the sample-complexity constant."""


def computation(name: str):
    """The computation module of a study."""
    return importlib.import_module(f"numerics.scope.{name}")


def unit_function(name: str) -> str:
    """The "module:name" reference of a study's unit function (the key of its units in the store)."""
    return f"numerics.scope.{name}:unit"
