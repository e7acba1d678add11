"""Helpers for the ecosystem tests: run the CLI in-process, write small spec files."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from specplan.cli import main

REPO = Path(__file__).resolve().parents[2]
SPECS = sorted((REPO / "specs").glob("*.yaml"))


@pytest.fixture
def cli(monkeypatch):
    monkeypatch.chdir(REPO)  # goldens name specs by their path from the repository root

    def run(*args: str, env: dict | None = None):
        return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)
    return run


@pytest.fixture
def write_spec(tmp_path):
    def write(text: str, name: str = "spec.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path
    return write
