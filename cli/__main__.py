"""``python -m hvdbench.cli``: the same as the ``hvdbench`` command."""

import sys

from . import main

sys.exit(main())
