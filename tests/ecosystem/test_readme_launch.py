"""The README's import/export example is what the commands print."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
DSV3 = {"num_hidden_layers": 61, "hidden_size": 7168, "vocab_size": 129280,
        "n_routed_experts": 256, "num_experts_per_tok": 8, "num_nextn_predict_layers": 1}


def _example() -> list[str]:
    text = README.read_text()
    start = text.index("$ specplan import --engine sglang -o dsv3.yaml")
    return text[start:text.index("```", start)].rstrip("\n").splitlines()


def test_readme_import_export_example(cli, tmp_path, monkeypatch):
    snap = tmp_path / "hub" / "models--deepseek-ai--DeepSeek-V3" / "snapshots" / "r"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(DSV3))
    lines = _example()
    export_at = lines.index("$ specplan export dsv3.yaml")
    words = shlex.split(lines[0][2:])[1:]
    out = tmp_path / "dsv3.yaml"
    words[words.index("dsv3.yaml")] = str(out)
    imported = cli(*words, env={"HF_HOME": str(tmp_path)})
    assert imported.exit_code == 0
    assert imported.stderr.replace(str(out), "dsv3.yaml").splitlines() == lines[1:export_at]
    assert cli("export", str(out)).stdout.splitlines() == lines[export_at + 1:]
