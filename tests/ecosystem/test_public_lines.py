"""Launch lines as users wrote them (tests/ecosystem/public/: each from a public issue, pull
request, recipe or README of the engines, its source in a comment, never rewritten): every one
imports and comes back token for token from `export`, or is refused with the reason written
in its `# expect:` comment. Model configs come from public/configs.json through a local
Hugging Face cache built here, never the network.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from pathlib import Path

import pytest

from specplan.ecosystem.launch_import import parse_script
from tests.helpers import corpus_hf_home

PUBLIC = Path(__file__).resolve().parent / "public"
CORPUS = sorted(PUBLIC.glob("*.sh"))
_EXPECT = re.compile(r"^# expect: (imported|refused): (.+)$", re.M)
hf_home = corpus_hf_home(PUBLIC)


def _expect(path: Path) -> tuple[str, str]:
    found = _EXPECT.search(path.read_text())
    assert found, f"{path.name} has no # expect: line"
    return found.group(1), found.group(2)


def test_the_corpus_is_real_and_wide():
    assert len(CORPUS) >= 30
    for path in CORPUS:
        assert re.search(r"^# source: https://github\.com/\S+", path.read_text(), re.M), path.name
    kinds = Counter((p.stem.rsplit(".", 1)[1], _expect(p)[0]) for p in CORPUS)
    # Both outcomes on both engines; the refused lines shrink as import learns what their
    # releases ran (each says why it is still refused: the test below).
    assert all(kinds[(e, "imported")] >= 4 and kinds[(e, "refused")] >= 2
               for e in ("sglang", "vllm")), kinds


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_line_imports_and_round_trips_or_is_refused_with_its_reason(cli, tmp_path, hf_home, path):
    check_line(cli, tmp_path, hf_home, path)


def engine_says(path: Path) -> str | None:
    """The `# engine:` line: whether the release the line was written for starts it, and the
    engine function that decides it (issue 38: import wherever that release would start it)."""
    found = re.search(r"^# engine: (.+)$", path.read_text(), re.M)
    return found.group(1) if found else None


@pytest.mark.parametrize("path", [p for p in CORPUS if _expect(p)[0] == "refused"], ids=lambda p: p.stem)
def test_a_refused_line_says_why_its_own_release_does_not_start_it_or_specplan_cannot(path):
    said = engine_says(path)
    assert said and re.search(r"(vLLM|SGLang) \d+\.\d", said), path.name
    assert re.search(r"refuses it|cannot plan it|no vLLM release starts it", said), said


def check_line(cli, tmp_path, hf_home: str, path: Path) -> str:
    """Import the corpus line `path` as its `# expect:` says; an imported one round-trips: its
    export is the line token for token, or the `# modern:` line where it was written for an
    older release (whose export re-imports with no retired spelling left). Returns stderr."""
    engine = path.stem.rsplit(".", 1)[1]
    kind, said = _expect(path)
    text = path.read_text()
    given = [w for m in re.findall(r"^# env: (.+)$", text, re.M) for w in ("--env", m)]
    spec = tmp_path / "spec.yaml"
    imported = cli("import", "--engine", engine, *given, "-f", str(path), "-o", str(spec),
                   env={"HF_HOME": hf_home})
    if kind == "refused":
        assert imported.exit_code == 2, imported.stderr
        assert said in imported.stderr and "Traceback" not in imported.stderr
        return imported.stderr
    assert imported.exit_code == 0, imported.stderr
    assert f"read as {said}, the newest supported release" in imported.stderr
    for note in re.findall(r"^# note: (.+)$", text, re.M):
        assert note in imported.stderr, imported.stderr
    exported = cli("export", str(spec))
    assert exported.exit_code == 0, exported.stderr
    commands = [s for s in exported.stdout.splitlines() if s and not s.startswith(("#", "export "))]
    modern = re.search(r"^# modern: (.+)$", text, re.M)
    if modern:
        assert "written for" in imported.stderr, imported.stderr
        assert shlex.split(commands[0]) == shlex.split(modern.group(1))
        again = tmp_path / "modern.sh"
        again.write_text(exported.stdout)
        second = cli("import", "--engine", engine, "-f", str(again), env={"HF_HOME": hf_home})
        assert second.exit_code == 0 and "written for" not in second.stderr, second.stderr
    else:
        _, words = parse_script(text, dict(a.split("=", 1) for a in given[1::2]))
        assert shlex.split(commands[0]) == words  # token for token, the launcher included
    return imported.stderr
