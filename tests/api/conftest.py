"""Shared by the API tests."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def at_root(monkeypatch):
    monkeypatch.chdir(ROOT)  # plan.json records the spec path as given
