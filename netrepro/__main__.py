"""``python -m netrepro``: the command line (see netrepro/cli.py)."""
import sys

from netrepro.cli import main

sys.exit(main())
