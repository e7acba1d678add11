"""`specplan explain --picture`: writes the file and prints its path; bad options exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.helpers import cli


ROOT = Path(__file__).resolve().parents[2]
SPEC = str(ROOT / "specs" / "deepseek-v4-dspark-tp16-dp8.yaml")


def test_picture_writes_file_and_prints_path(tmp_path):
    out = tmp_path / "sub" / "ranks.svg"
    res = cli("explain", SPEC, "--picture", "ranks", "-o", str(out))
    assert res.exit_code == 0, res.output
    assert res.output.strip() == str(out)
    ET.parse(out)
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".picture-")]


def test_picture_formats(tmp_path):
    for fmt, head in (("mermaid", "flowchart"), ("dot", "digraph")):
        out = tmp_path / f"round.{fmt}"
        res = cli("explain", SPEC, "--picture", "round", "--format", fmt,
                  "-o", str(out))
        assert res.exit_code == 0, res.output
        assert out.read_text().startswith(head)


def test_unknown_family_exits_2_with_the_choices(tmp_path):
    res = cli("explain", SPEC, "--picture", "ranks", "--family", "dp",
              "-o", str(tmp_path / "x.svg"))
    assert res.exit_code == 2
    assert f"{SPEC}: --family 'dp' is not a group family of this mesh: expected one of " \
           "tp, attn_cp, attn_tp, moe_dp, moe_ep, moe_tp, pp, dcp, replica" in res.output
    assert not (tmp_path / "x.svg").exists()


def test_picture_without_out_goes_to_stdout():
    for fmt, head in (("svg", "<?xml"), ("mermaid", "flowchart"), ("dot", "digraph")):
        res = cli("explain", SPEC, "--picture", "round", "--format", fmt)
        assert res.exit_code == 0, res.output
        assert res.output.startswith(head)
        if fmt == "svg":
            ET.fromstring(res.output)  # the whole document, nothing printed after it


def test_deployment_kv_picture_without_out_goes_to_stdout():
    dep = str(ROOT / "specs" / "disagg" / "kimi-k3-dspark-pd.yaml")
    res = cli("explain", dep, "--picture", "kv")
    assert res.exit_code == 0, res.output
    assert ET.fromstring(res.output).tag.endswith("svg")


def _has_renderer() -> bool:
    try:
        from specplan.pictures import to_png

        to_png("<svg xmlns='http://www.w3.org/2000/svg' width='2' height='2'/>")
        return True
    except Exception:
        return False


@pytest.mark.skipif(not _has_renderer(), reason="no SVG renderer installed (pip install cairosvg)")
def test_png_through_an_installed_renderer(tmp_path):
    out = tmp_path / "round.png"
    res = cli("explain", SPEC, "--picture", "round", "--format", "png", "-o", str(out))
    assert res.exit_code == 0, res.output
    assert out.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    piped = subprocess.run([sys.executable, "-m", "specplan.cli", "explain", SPEC, "--picture", "ranks",
                            "--format", "png"], capture_output=True, timeout=120, cwd=ROOT)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.startswith(b"\x89PNG\r\n\x1a\n")


def test_png_without_a_renderer_exits_2_naming_the_package(tmp_path):
    """A real interpreter where neither renderer imports (modules of those names that raise
    ImportError come first on its path): exit 2, the package to install named, no file."""
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    for name in ("cairosvg", "vl_convert"):
        (blocked / f"{name}.py").write_text("raise ImportError('not installed')\n")
    out = tmp_path / "round.png"
    env = {"PYTHONPATH": os.pathsep.join([str(blocked), str(ROOT)])}
    done = cli("explain", SPEC, "--picture", "round", "--format", "png", "-o", out, process=True, env=env)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (f"{SPEC}: --format png needs an SVG renderer, and none is installed: "
                           "pip install cairosvg (or vl-convert-python); or write --format svg\n")
    assert not out.exists() and "Traceback" not in done.stderr
