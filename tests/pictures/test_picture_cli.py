"""`specplan explain --picture`: writes the file and prints its path; bad options exit 2."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from click.testing import CliRunner

from specplan.cli import main

SPEC = str(Path(__file__).resolve().parents[2] / "specs" / "deepseek-v4-dspark-tp16-dp8.yaml")


def test_picture_writes_file_and_prints_path(tmp_path):
    out = tmp_path / "sub" / "ranks.svg"
    res = CliRunner().invoke(main, ["explain", SPEC, "--picture", "ranks", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert res.output.strip() == str(out)
    ET.parse(out)
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".picture-")]


def test_picture_formats(tmp_path):
    for fmt, head in (("mermaid", "flowchart"), ("dot", "digraph")):
        out = tmp_path / f"round.{fmt}"
        res = CliRunner().invoke(main, ["explain", SPEC, "--picture", "round", "--format", fmt,
                                        "-o", str(out)])
        assert res.exit_code == 0, res.output
        assert out.read_text().startswith(head)


def test_unknown_family_exits_2_with_the_choices(tmp_path):
    res = CliRunner().invoke(main, ["explain", SPEC, "--picture", "ranks", "--family", "dp",
                                    "-o", str(tmp_path / "x.svg")])
    assert res.exit_code == 2
    assert f"{SPEC}: --family 'dp' is not a group family of this mesh: expected one of " \
           "tp, attn_cp, attn_tp, moe_dp, moe_ep, moe_tp, pp, dcp, replica" in res.output
    assert not (tmp_path / "x.svg").exists()


def test_picture_needs_out():
    res = CliRunner().invoke(main, ["explain", SPEC, "--picture", "ranks"])
    assert res.exit_code == 2
    assert "--picture needs -o/--out FILE" in res.output
