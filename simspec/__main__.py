"""``python -m simspec`` is the ``simspec`` command."""

import sys

from simspec.cli import main

sys.exit(main())
