"""The data files specplan reads at run time, which the wheel must carry (issue 38 item 7).

The default suite checks pyproject's package-data patterns against the list; `.ci/run` builds the
wheel, installs it into a fresh venv and reruns this file with SPECPLAN_WHEEL=<the wheel>, which
also checks the list against the wheel's own file names.
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
import tomllib
import zipfile

import pytest

from specplan.engines.releases import RELEASES, newest
from tests.helpers import ROOT


def required() -> list[str]:
    """Every data file specplan opens, by its path in the wheel."""
    flags = [f"specplan/engines/{engine}/flags/{engine}.json" for engine in RELEASES]
    flags += [f"specplan/engines/{engine}/flags/{engine}-{version}.json"
              for engine, versions in RELEASES.items() for version in versions
              if version != newest(engine)]  # flag_table.py: the newest's table, the others' differences
    return ["specplan/py.typed",  # PEP 561: the package's annotations are for type checkers
            "specplan/lower/templates/runtime_module.py.j2",  # lower/fx_module.py
            *flags]


def test_every_required_file_is_in_the_source_tree():
    missing = [p for p in required() if not (ROOT / p).is_file()]
    assert not missing, missing


def _patterned(path: str) -> bool:
    """Whether pyproject's package-data globs (matched from the package folder, `**` across
    folders, as setuptools does) carry `path`."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = config["package-data"]["specplan"]
    return any(fnmatch.fnmatch(path.removeprefix("specplan/"), pat.replace("**/", "*"))
               for pat in patterns)


def test_package_data_patterns_carry_every_required_file():
    uncovered = [p for p in required() if not _patterned(p)]
    assert not uncovered, f"pyproject.toml package-data misses {uncovered}"


def test_every_data_file_in_the_package_ships():
    """A data file added beside the code (a new flag table) that no pattern carries works from
    the checkout and is missing from every install."""
    tracked = subprocess.run(["git", "ls-files", "specplan"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    left_out = [p for p in tracked if not p.endswith(".py") and not _patterned(p)]
    assert not left_out, f"pyproject.toml package-data misses {left_out}"


@pytest.mark.skipif(not os.environ.get("SPECPLAN_WHEEL"), reason="set by .ci/run after it builds the wheel")
def test_the_built_wheel_carries_every_required_file():
    names = set(zipfile.ZipFile(os.environ["SPECPLAN_WHEEL"]).namelist())
    assert not [p for p in required() if p not in names]
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(os.environ["SPECPLAN_WHEEL"]).read(entry_points).decode()
    assert "[sglang.srt.plugins]" in text and "[vllm.general_plugins]" in text
