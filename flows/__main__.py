"""`python -m flows` is the same program as `flows`."""

import sys

from ._cli import main

sys.exit(main())
