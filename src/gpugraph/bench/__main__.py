"""``python -m gpugraph.bench [options]``: the same as ``python -m gpugraph bench [options]``."""

import sys

from . import main

sys.exit(main())
