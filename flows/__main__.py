"""`python -m flows` is the same program as `flows`."""

from ._cli.app import entry

entry()
