"""Hypothesis profiles shared by checks/ and tests/.

``default`` derandomises (the same examples on every run, as CI needs); ``thorough`` draws fresh
random examples, eight times as many: ``HYPOTHESIS_PROFILE=thorough pytest checks/`` (the one knob
for example counts: ``checks.strategies.examples(n)`` scales with the profile's max_examples).
"""
import os

from hypothesis import HealthCheck, settings

import theory  # noqa: F401  (first: pins SymPy's ground types before any test module imports SymPy)

settings.register_profile("default", derandomize=True, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", derandomize=False, deadline=None, print_blob=True,
                          max_examples=800, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def pytest_collection_modifyitems(config, items):
    """Under mutmut (docs/mutation.md), run a mutant's tests cheapest first, and do not shrink failures.

    mutmut runs each mutant's tests with ``-x``, in no particular order, so a mutant that the first cheap test
    kills may still pay for a slow one first.  With mutmut's recorded durations (``mutmut-stats.json`` in the
    ``mutants/`` directory it runs from), the test files run in order of their total duration and the tests of
    a file in order of their own (a file stays contiguous, so its module fixtures are built once).  Only the
    order changes: the same tests run, and a surviving mutant still runs every one of them.
    """
    import json

    mutant = os.environ.get("MUTANT_UNDER_TEST", "")
    if "__mutmut_" not in mutant or not os.path.exists("mutmut-stats.json"):
        return
    with open("mutmut-stats.json") as f:
        durations = json.load(f)["duration_by_test"]
    per_file: dict[str, float] = {}
    for item in items:
        per_file[item.nodeid.split("::")[0]] = per_file.get(item.nodeid.split("::")[0], 0.0) + durations.get(item.nodeid, 0.0)
    items.sort(key=lambda item: (per_file[item.nodeid.split("::")[0]], durations.get(item.nodeid, 0.0)))
    # a failing Hypothesis test of a mutant needs no minimal example: shrinking it (and explaining it) can take
    # far longer than the test, and the test has failed either way, with the same examples drawn
    from hypothesis import Phase

    for item in items:
        test = getattr(item, "obj", None)
        old = getattr(test, "_hypothesis_internal_use_settings", None)
        if old is not None:
            test._hypothesis_internal_use_settings = settings(
                old, phases=[phase for phase in old.phases if phase not in (Phase.shrink, Phase.explain)])
