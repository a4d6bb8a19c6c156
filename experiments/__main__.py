"""``python -m experiments``, from the repository root."""

import sys

from experiments.commands import main

if __name__ == "__main__":
    sys.exit(main())
