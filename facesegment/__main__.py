"""``python -m facesegment``: the same command line as ``facesegment``."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
