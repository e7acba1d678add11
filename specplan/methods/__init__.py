"""The method catalog: every speculative method specplan plans, by name.

Each method is data (methods/<name>.py) in the vocabulary of base.py; `get_method` is the one
lookup the planner uses.
"""

from __future__ import annotations

from .base import Method
from .dflash import DFLASH
from .dspark import DSPARK
from .eagle import EAGLE
from .eagle3 import EAGLE3
from .mtp import MTP
from .ngram import NGRAM
from .none import NONE
from .standalone import STANDALONE

METHODS: dict[str, Method] = {
    m.name: m for m in (NONE, EAGLE, EAGLE3, MTP, STANDALONE, NGRAM, DFLASH, DSPARK)
}


def get_method(name: str, engine: str | None = None) -> Method:
    """The method called `name`, as `engine` runs it (its decisions can differ per engine:
    Method.engines); KeyError naming the valid methods otherwise."""
    try:
        return METHODS[name].for_engine(engine)
    except KeyError:
        valid = ", ".join(METHODS)
        raise KeyError(f"unknown speculative method {name!r}; expected one of: {valid}") from None


__all__ = ["METHODS", "Method", "get_method"]
