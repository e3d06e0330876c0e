"""``python -m app``: the occ-companion command line."""
from __future__ import annotations

import sys

from .cli import entry

sys.exit(entry())
