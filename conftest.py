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
