"""Fixtures for every test directory; plain helpers are in tests/helpers.py."""

from __future__ import annotations

import functools
import os

import pytest

from tests import helpers

# Every command fits the width it is given (specplan/commands/fit.py; 100 columns piped). Tests read
# output at one known width, 200 columns, unless they set their own (tests/cli/test_width.py
# runs every command at 80 and 100 through a pseudo-terminal).
os.environ["COLUMNS"] = "200"


@pytest.fixture
def cli(monkeypatch):
    """`tests.helpers.cli` in the repository root (goldens name specs by their path from it),
    an exception let through as the test's failure."""
    monkeypatch.chdir(helpers.ROOT)
    return functools.partial(helpers.cli, catch=False)
