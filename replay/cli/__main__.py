"""``python -m replay.cli``: the same as the ``specreplay`` command."""

import sys

from . import main

sys.exit(main())
