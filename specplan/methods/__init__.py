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


def engine_names(engine: str) -> dict[str, str]:
    """speculative.method -> `engine`'s name for it, for every method the engine names
    (Method.engine_names), in the catalog's order."""
    return {name: m.engine_names[engine] for name, m in METHODS.items() if engine in m.engine_names}


__all__ = ["METHODS", "Method", "engine_names", "get_method"]
