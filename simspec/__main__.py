"""``python -m simspec`` is the ``simspec`` command."""

import sys

from simspec.cli import run_command

sys.exit(run_command())
