"""Write specplan/engines/<engine>/flags/ from the engines' real argparse parsers, one table per release.

Run after a release is added to specplan/engines/releases.py (the wheels are downloaded into
the engine cache by tests/engines/wheels.py):

    python tools/engine_flags.py                    # every supported release of both engines
    python tools/engine_flags.py vllm               # one engine's releases
    python tools/engine_flags.py sglang 0.5.22      # one release

The newest release's table is stored whole (flags/<engine>.json); an older release's as its
differences from it (flags/<engine>-<version>.json: the flags it lacks, and its own rows of the
flags that differ). The parsers are built from the unpacked wheels by
tests/engines/flag_tables.py, each release in its own process; nothing of the engines' code is
copied, only the names, arities and choices their parsers accept. tests/engines/
test_flag_tables.py fails when a stored table and its parser differ (marker `engines` for the
newest, `versions` for every release).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "engines"))

import flag_tables  # noqa: E402

from specplan.engines.flag_table import differences, stored_path  # noqa: E402
from specplan.engines.releases import RELEASES, newest  # noqa: E402


def write(engine: str, version: str) -> None:
    data = flag_tables.table_in_subprocess(engine, version)
    path = stored_path(engine, version)
    if version == newest(engine):
        path.write_text(flag_tables.dumps(data))
    else:
        base = json.loads(stored_path(engine, newest(engine)).read_text())
        path.write_text(flag_tables.dumps(differences(base, data)))
    print(f"wrote {path.relative_to(REPO)}: {len(data['flags'])} flags")


def main(args: list[str]) -> None:
    engines = args[:1] or list(RELEASES)
    for engine in engines:
        versions = args[1:] or RELEASES[engine]
        # the newest first: the older tables are stored as differences from it
        for version in sorted(versions, key=lambda v: v != newest(engine)):
            write(engine, version)


if __name__ == "__main__":
    main(sys.argv[1:])
