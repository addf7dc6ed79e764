"""`python -m rag.cli`: the `rag` command."""

import sys

from rag.cli import main

if __name__ == "__main__":
    sys.exit(main())
