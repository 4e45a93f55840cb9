"""``python -m hvdbench.launchers.cli``: the same as the ``hvdbench`` command."""

import sys

from . import main

sys.exit(main())
