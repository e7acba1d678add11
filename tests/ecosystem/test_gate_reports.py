"""Reports from the wild as tests (issue 34 item 6): launch lines from public hang reports in
the engines' trackers (tests/ecosystem/gates/: each with its source, the fix the report led to,
the gate it is about and the verdict the newest release's code earns), imported as an operator
would, with the model's config.json from gates/configs.json in a local Hugging Face cache.

`# expect: ERROR`: check reports the gate agreed over too narrow a group, and the configuration
the report's fix describes, the plan `specplan enforce` writes (the gate agreed over the union of
the groups it selects), checks clean. `# expect: clean`: the release already carries the fix;
the gate is in the plan, agreed over every group it selects, and check finds nothing.
The configs carry the fields import reads; only whether the model is a MoE changes a verdict.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tests.helpers import corpus_hf_home

GATES = Path(__file__).resolve().parent / "gates"
CORPUS = sorted(GATES.glob("*.sh"))
_HEAD = re.compile(r"^# (source|fix|gate|expect): (\S+)", re.M)
hf_home = corpus_hf_home(GATES)


def _head(path: Path) -> dict[str, str]:
    return dict(_HEAD.findall(path.read_text()))


def test_each_report_cites_its_source_fix_gate_and_verdict():
    assert CORPUS
    for path in CORPUS:
        head = _head(path)
        assert set(head) == {"source", "fix", "gate", "expect"}, path.name
        assert head["source"].startswith("https://github.com/"), path.name
        assert head["expect"] in ("ERROR", "clean"), path.name
    assert {_head(p)["expect"] for p in CORPUS} == {"ERROR", "clean"}


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_report_line_gets_the_verdict_of_its_gate(cli, tmp_path, hf_home, path):
    engine, head = path.stem.rsplit(".", 1)[1], _head(path)
    spec = tmp_path / "spec.yaml"
    imported = cli("import", "--engine", engine, "-f", str(path), "-o", str(spec),
                   env={"HF_HOME": hf_home})
    assert imported.exit_code == 0, imported.stderr
    checked = cli("check", str(spec), "--json", code=(0, 3))
    findings = json.loads(checked.stdout)["findings"]
    errors = [f for f in findings if f["severity"] == "ERROR"]
    gates = {g["gate"]: g for g in json.loads(cli("explain", str(spec), "--json").stdout)["round"]["gates"]}
    assert head["gate"] in gates, sorted(gates)
    if head["expect"] == "clean":
        assert checked.exit_code == 0 and errors == [], errors
        assert gates[head["gate"]]["family"] is not None
        return
    assert checked.exit_code == 3
    assert [f.get("gate") for f in errors] == [head["gate"]], errors
    fixed = tmp_path / "fixed"
    assert cli("enforce", str(spec), "-o", str(fixed)).exit_code == 0
    assert cli("check", str(fixed / "plan.json")).exit_code == 0
