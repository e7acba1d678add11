"""The launch-flag spellings retired before the oldest supported release, per engine.

<engine>/flags/retired.json is generated from the older releases' own argparse parsers by
tools/retired_flags.py (their wheels downloaded with `pip download --no-deps` into a cache
outside the repository, read as tools/engine_flags.py reads the supported ones); see that
tool for the fields. specplan/ecosystem/retired.py reads a line with it.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

_DIR = Path(__file__).resolve().parent


@cache
def retired_data(engine: str) -> dict[str, Any] | None:
    """The engine's retired.json as data (as json.load returns it); None when it has none."""
    path = _DIR / engine / "flags" / "retired.json"
    return json.loads(path.read_text()) if path.is_file() else None
