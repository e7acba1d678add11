"""The type check (issue 36 item 5): mypy over specplan/ as pyproject.toml configures it, with
zero errors, and strict on the packages other code builds on. mypy is a dev dependency; one
run over the whole package takes seconds, so it stays in the default suite."""

from __future__ import annotations

import subprocess
import sys
import tomllib

from tests.helpers import ROOT

STRICT = {"specplan.engines.*", "specplan.passes.*", "specplan.plan.*", "specplan.commands.*",
          "specplan.api", "specplan.schema.*"}
# mypy's --strict, as per-module options (strict itself is global only).
STRICT_FLAGS = {"disallow_untyped_defs", "disallow_incomplete_defs", "disallow_untyped_calls",
                "disallow_untyped_decorators", "disallow_any_generics", "disallow_subclassing_any",
                "check_untyped_defs", "warn_return_any", "no_implicit_reexport", "strict_equality"}


def test_the_strict_packages_have_every_strict_flag():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["packages"] == ["specplan"]
    strict = [o for o in config["overrides"] if STRICT <= set(o["module"])]
    assert strict, "no [[tool.mypy.overrides]] names every strict package"
    assert all(strict[0].get(flag) is True for flag in STRICT_FLAGS), strict[0]


def test_mypy_finds_no_error_in_specplan():
    done = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(ROOT / ".mypy_cache")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert done.stdout.splitlines()[-1].startswith("Success: no issues found"), done.stdout
