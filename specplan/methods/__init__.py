"""The method catalog: every speculative method specplan plans, by name.

Each method is data (methods/<name>.py) in the vocabulary of base.py; `get_method` is the one
lookup. What an engine calls a method and how it runs it is the engine's row
(engines/<engine>/methods.py), asked through its convention.
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


def get_method(name: str) -> Method:
    """The method called `name`, as specplan writes it (as an engine runs it:
    `convention(engine).method(name)`); KeyError naming the valid methods otherwise."""
    try:
        return METHODS[name]
    except KeyError:
        valid = ", ".join(METHODS)
        raise KeyError(f"unknown speculative method {name!r}; expected one of: {valid}") from None


__all__ = ["METHODS", "Method", "get_method"]
