"""Fixtures for every test directory; plain helpers are in tests/helpers.py."""

from __future__ import annotations

import functools

import pytest

from tests import helpers


@pytest.fixture
def cli(monkeypatch):
    """`tests.helpers.cli` in the repository root (goldens name specs by their path from it),
    an exception let through as the test's failure."""
    monkeypatch.chdir(helpers.ROOT)
    return functools.partial(helpers.cli, catch=False)
