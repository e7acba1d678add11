"""`specplan import` reads vLLM EAGLE3's taps from the draft's config.json (issue 22): with
`--draft-config FILE`, beside a local draft path, or in the Hugging Face cache layout
(HF_HOME/hub/models--ORG--NAME/snapshots/*/config.json), so the imported plan's aux_layers are
what vLLM's start-up check reads (`eagle_aux_hidden_state_layer_ids`, as tap ids as they are).
"""

from __future__ import annotations

import json

import pytest

from specplan.plugins import compare
from specplan.schema import load_spec

TARGET = {"num_hidden_layers": 4, "hidden_size": 256, "vocab_size": 1024}
DRAFT = {"num_hidden_layers": 1, "hidden_size": 256, "vocab_size": 1024,
         "eagle_aux_hidden_state_layer_ids": [3, 1, 2]}


def _folder(path, config):
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(config))
    return path


def _line(target, draft) -> list[str]:
    config = json.dumps({"method": "eagle3", "model": str(draft), "num_speculative_tokens": 2})
    return ["vllm", "serve", str(target), "-tp", "2", "--speculative-config", config]


def _imported(cli, tmp_path, *args, env=None):
    out = tmp_path / "imported.yaml"
    result = cli("import", "--engine", "vllm", "-o", str(out), *args, env=env)
    assert result.exit_code == 0, result.stderr
    return load_spec(out), result.stderr


def test_local_draft_folder_gives_the_taps(cli, tmp_path):
    target = _folder(tmp_path / "target", TARGET)
    draft = _folder(tmp_path / "draft", DRAFT)
    spec, notes = _imported(cli, tmp_path, "--", *_line(target, draft))
    assert spec.speculative.aux_layers == [1, 2, 3]
    assert "speculative.aux_layers [1, 2, 3] from the draft's eagle_aux_hidden_state_layer_ids" in notes


def test_draft_config_flag(cli, tmp_path):
    target = _folder(tmp_path / "target", TARGET)
    given = tmp_path / "given.json"
    given.write_text(json.dumps({**DRAFT, "eagle_aux_hidden_state_layer_ids": [0, 2]}))
    spec, _ = _imported(cli, tmp_path, "--draft-config", str(given), "--",
                        *_line(target, "org/eagle3-draft"))
    assert spec.speculative.aux_layers == [0, 2]


def test_hf_cache_layout_and_nested_eagle_config(cli, tmp_path):
    target = _folder(tmp_path / "target", TARGET)
    home = tmp_path / "hf"
    nested = {k: v for k, v in DRAFT.items() if k != "eagle_aux_hidden_state_layer_ids"}
    _folder(home / "hub" / "models--org--eagle3-draft" / "snapshots" / "abc123",
            {**nested, "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3]}})
    spec, _ = _imported(cli, tmp_path, "--", *_line(target, "org/eagle3-draft"),
                        env={"HF_HOME": str(home), "HF_HUB_CACHE": None})
    assert spec.speculative.aux_layers == [1, 3]


def test_imported_plan_passes_the_engine_check_on_those_taps(cli, tmp_path):
    """The plugin's start-up check compares the draft's ids with the plan's taps: equal now."""
    target = _folder(tmp_path / "target", TARGET)
    draft = _folder(tmp_path / "draft", DRAFT)
    spec_path = tmp_path / "imported.yaml"
    assert cli("import", "--engine", "vllm", "-o", str(spec_path), "--",
               *_line(target, draft)).exit_code == 0
    result = cli("compile", str(spec_path), "-o", str(tmp_path / "build"))
    assert result.exit_code == 0, result.stderr + result.stdout
    plan = tmp_path / "build" / "plan.json"
    assert compare(plan, {}, {"aux_layers": [1, 2, 3]}) == []
    assert compare(plan, {}, {"aux_layers": [1, 2]})[0].message == "aux_layers: engine [1,2], plan [1..3]"


@pytest.mark.parametrize("ids", ['"1,2"', "[1, true]"])
def test_malformed_ids_exit_2(cli, tmp_path, ids):
    target = _folder(tmp_path / "target", TARGET)
    draft = tmp_path / "draft"
    draft.mkdir()
    (draft / "config.json").write_text('{"eagle_aux_hidden_state_layer_ids": %s}' % ids)
    result = cli("import", "--engine", "vllm", "--", *_line(target, draft))
    assert result.exit_code == 2
    assert "eagle_aux_hidden_state_layer_ids must be a list of layer ids" in result.stderr
