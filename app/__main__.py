"""``python3 -m app``: the occ-companion command line (what escapes before the CLI's handling, e.g. a Ctrl-C
while the modules load, is one line: ``app._uncaught_as_one_line``)."""
from __future__ import annotations

import sys

from app.cli import entry

sys.exit(entry())
