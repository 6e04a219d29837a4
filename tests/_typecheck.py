"""The runtime type checker of the tests (see `conftest.py`): beartype with PEP 484's
numeric tower, so an `int` passes where a `float` is annotated (as the typing rules say)."""

from beartype import BeartypeConf, beartype

typechecker = beartype(conf=BeartypeConf(is_pep484_tower=True))
