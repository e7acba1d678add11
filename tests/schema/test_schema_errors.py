"""Bad specs: tests/specs_bad/NAME.yaml beside NAME.expected, the exact stderr of the CLI.

Each runs the real CLI from the repo root (in this process: the messages are the point; the
process boundary is shown by the YAML-tag case below and tests/cli) and must exit 2 with exactly
the expected lines and no traceback. NAME.expected without NAME.yaml is the missing-file case;
directory.yaml is a directory.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import cli

ROOT = Path(__file__).parents[2]
BAD = ROOT / "tests" / "specs_bad"
CASES = sorted(p.stem for p in BAD.glob("*.expected"))


def test_enough_bad_specs():
    assert len(CASES) >= 25
    assert not (BAD / "missing.yaml").exists()
    assert (BAD / "directory.yaml").is_dir()


@pytest.mark.parametrize("name", CASES)
def test_bad_spec_message(name: str):
    proc = cli("explain", f"tests/specs_bad/{name}.yaml", cwd=ROOT, code=2)
    expected = (BAD / f"{name}.expected").read_text()
    assert "Traceback" not in proc.stderr
    assert proc.stderr == expected
    assert proc.stdout == ""


def test_python_tag_is_never_executed():
    proc = cli("explain", "tests/specs_bad/python-object-tag.yaml", process=True)
    assert proc.returncode == 2
    assert "PWNED" not in proc.stdout + proc.stderr.replace('["echo PWNED"]', "")
    assert "YAML tag '!!python/object/apply:os.system' is not allowed" in proc.stderr
