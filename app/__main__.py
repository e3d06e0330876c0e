"""``python -m app``: the occ-companion command line (a Ctrl-C while it starts up exits 130 quietly)."""
from __future__ import annotations

import sys

try:
    from .cli import entry
except KeyboardInterrupt:  # pragma: no cover - interrupted during the imports
    print("occ-companion: interrupted", file=sys.stderr)
    sys.exit(130)

sys.exit(entry())
