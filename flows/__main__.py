"""`python -m flows` is the same program as `flows`."""

from ._cli import entry

entry()
