"""``python -m hpcrl.cli ...``: the ``hpcrl`` command, run by the interpreter at hand."""
import sys

from hpcrl.cli import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
