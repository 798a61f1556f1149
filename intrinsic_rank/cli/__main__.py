"""``python -m intrinsic_rank.cli``: the ``intrinsic-rank`` command."""

import sys

from . import main

sys.exit(main())
