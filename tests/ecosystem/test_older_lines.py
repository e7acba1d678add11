"""Launch lines written for releases older than the supported ones (tests/ecosystem/older/: each
from a public issue, pull request, script or tutorial, its source in a comment, never rewritten;
`# env: NAME=VALUE` lines are what the test gives with `specplan import --env`). Every one
imports in the supported spelling, with one note per retired flag, and its export is the
`# modern:` line, which re-imports with no retired spelling left; or it is refused with the
reason its `# expect:` comment gives (issue 38: old recipes, shell variables)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from test_public_lines import _expect, check_line, engine_says
from tests.helpers import corpus_hf_home

OLDER = Path(__file__).resolve().parent / "older"
CORPUS = sorted(OLDER.glob("*.sh"))
hf_home = corpus_hf_home(OLDER)


def test_the_corpus_is_public_older_and_wide():
    assert len(CORPUS) >= 20
    for path in CORPUS:
        assert re.search(r"^# source: https://\S+", path.read_text(), re.M), path.name
    kinds = Counter((p.stem.rsplit(".", 1)[1], _expect(p)[0]) for p in CORPUS)
    assert all(kinds[(e, "imported")] >= 3 for e in ("sglang", "vllm")), kinds
    modern = [p for p in CORPUS if "# modern:" in p.read_text()]
    assert len(modern) >= 6, [p.name for p in modern]  # read through the retired table


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_older_line_imports_modernised_or_is_refused_with_its_reason(cli, tmp_path, hf_home, path):
    check_line(cli, tmp_path, hf_home, path)  # the `# note:` lines included


@pytest.mark.parametrize("path", [p for p in CORPUS if _expect(p)[0] == "refused"], ids=lambda p: p.stem)
def test_a_refused_older_line_says_why_its_own_release_does_not_start_it_or_specplan_cannot(path):
    said = engine_says(path)
    assert said and re.search(r"(vLLM|SGLang) \d+\.\d", said), path.name
    assert re.search(r"refuses it|cannot plan it|no vLLM release starts it", said), said
