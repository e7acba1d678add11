"""CLI conventions of issue 8: every command's --help shows an example, --version works,
output piped to a file or another program carries no colour codes."""

from __future__ import annotations

import re

import pytest

from specplan import __version__
from specplan.cli import main
from tests.helpers import cli

SPEC = "specs/deepseek-v4-dspark-tp8-dp8.yaml"
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@pytest.mark.parametrize("name", sorted(main.commands))
def test_every_command_help_has_an_example(name):
    res = cli(name, "--help")
    assert res.exit_code == 0, res.output
    assert "Example: specplan " + name in res.output


def test_top_level_help_has_an_example():
    res = cli("--help")
    assert res.exit_code == 0
    assert "Example: specplan " in res.output


def test_version():
    res = cli("--version")
    assert res.exit_code == 0
    assert res.output.strip() == f"specplan, version {__version__}"


@pytest.mark.parametrize("args", [["explain", SPEC], ["check", SPEC], ["explain", SPEC, "--rank", "3"]])
def test_piped_output_has_no_colour(args):
    """A real pipe (not a tty): rich must not emit escape codes, even when FORCE_COLOR-like
    terminals are absent; the tables still come out."""
    proc = cli(*args, process=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()
    assert not ANSI.search(proc.stdout + proc.stderr)


def test_bad_input_exits_2_with_a_location(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ntopology: {tp: 0}\nmodel: {num_layers: 4, hidden_size: 8, vocab_size: 8}\n")
    res = cli("explain", str(bad))
    assert res.exit_code == 2
    assert re.search(rf"{re.escape(str(bad))}:2:\d+: topology\.tp: ", res.output)
