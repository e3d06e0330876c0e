"""Exit statuses shared by every ``occ-companion`` command (documented in README.md).

One meaning per number, whatever the command:

* ``DONE`` (0): the command did its work, and every claim or target it checks passed;
* ``CLAIM_FAILED`` (1): a claim, target or freshness check was decided against (a definite FAIL);
* ``USAGE`` (2): bad usage: a flag, an input file or an output folder was refused before any work;
* ``UNDECIDED`` (3): nothing failed, but at least one verdict could not be decided at the precision used
  (a ball straddles its threshold) or was refused (an experiment verdict resting on an artefact);
* ``INTERNAL`` (4): an unexpected error inside the suite (a bug): one line on stderr, never a traceback;
* ``INTERRUPTED`` (130): Ctrl-C or SIGTERM; earlier complete results are kept.
"""
DONE = 0
CLAIM_FAILED = 1
USAGE = 2
UNDECIDED = 3
INTERNAL = 4
INTERRUPTED = 130
TRACEBACK_ENV = "OCC_TRACEBACK"
"""Set to 1 to see the Python traceback of an internal error (exit status 4) instead of its one line."""
