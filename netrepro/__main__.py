"""``python -m netrepro``: the command line (see netrepro/cli/commands.py)."""
import sys

from netrepro.cli.commands import main

sys.exit(main())
