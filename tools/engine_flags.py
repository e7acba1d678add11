"""Write specplan/engines/flags/{sglang,vllm}.json from the engines' real argparse parsers.

Run once per engine release (after tests/engines/wheels.py has the wheels):

    python tools/engine_flags.py            # both engines
    python tools/engine_flags.py vllm       # one

The parsers are built from the unpacked wheels by tests/engines/flag_tables.py, each engine
in its own process; nothing of the engines' code is copied, only the names, arities and
choices their parsers accept. tests/engines/test_flag_tables.py (marked `engines`) fails when
a stored table and the parser differ.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "engines"))

import flag_tables  # noqa: E402


def main(engines: list[str]) -> None:
    for engine in engines or ["sglang", "vllm"]:
        data = flag_tables.table_in_subprocess(engine)
        path = REPO / "specplan" / "engines" / "flags" / f"{engine}.json"
        path.write_text(flag_tables.dumps(data))
        print(f"wrote {path.relative_to(REPO)}: {len(data['flags'])} flags")


if __name__ == "__main__":
    main(sys.argv[1:])
