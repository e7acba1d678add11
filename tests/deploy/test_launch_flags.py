"""Disaggregation launch flags through export and import: SGLang --disaggregation-mode and
--disaggregation-transfer-backend, vLLM --kv-transfer-config (kv_connector, kv_role)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specplan.schema import load_spec
from tests.helpers import cli

ROOT = Path(__file__).resolve().parents[2]
PAIR = ["specs/disagg/llama-eagle-prefill-tp2-pp2.yaml", "specs/disagg/llama-eagle-decode-tp4-dpattn2.yaml"]


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def _scripts(text: str) -> list[str]:
    head, decode = text.split("# decode instance", 1)
    return [head, "# decode instance" + decode]


def test_export_of_a_deployment_then_import_gives_each_instance_back(tmp_path):
    out = cli("export", PAIR[0], catch=False)
    assert out.exit_code == 0, out.stderr
    for role, script, spec in zip(("prefill", "decode"), _scripts(out.stdout), PAIR):
        assert f"--disaggregation-mode {role}" in script
        assert "--disaggregation-transfer-backend mooncake" in script
        path = tmp_path / f"{role}.sh"
        path.write_text(script)
        back = cli("import", "--engine", "sglang", "-f", str(path), "--base", spec, catch=False)
        assert back.exit_code == 0, back.stderr
        got = tmp_path / f"{role}.yaml"
        got.write_text(back.stdout)
        assert load_spec(got).model_dump() == load_spec(spec).model_dump()


def test_vllm_kv_transfer_config_both_ways(tmp_path):
    out = cli("export", "specs/disagg/kimi-k3-dspark-pd.yaml", catch=False)
    assert out.exit_code == 0, out.stderr
    prefill, decode = _scripts(out.stdout)
    assert """--kv-transfer-config '{"kv_connector":"NixlPushConnector","kv_role":"kv_producer"}'""" in prefill
    assert """--kv-transfer-config '{"kv_connector":"NixlPushConnector","kv_role":"kv_consumer"}'""" in decode
    back = cli("import", "--engine", "vllm", "--model-config", str(_config(tmp_path)), "--",
               "vllm", "serve", "m", "-tp", "2", "--kv-transfer-config",
               json.dumps({"kv_connector": "MooncakeConnector", "kv_role": "kv_consumer"}), catch=False)
    assert back.exit_code == 0, back.stderr
    assert "disaggregation:\n  role: decode\n  connector: mooncake\n" in back.stdout


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"num_hidden_layers": 4, "hidden_size": 64, "vocab_size": 128}))
    return path


@pytest.mark.parametrize("argv,message", [
    # vLLM itself refuses this role (KVTransferConfig.__post_init__), and this connector
    # (0.33.0 registers no P2pNcclConnector: kv_connector/factory.py)
    (["--", "vllm", "serve", "m", "--kv-transfer-config", '{"kv_connector": "NixlConnector", "kv_role": "kv_sender"}'],
     "--kv-transfer-config kv_role 'kv_sender': vLLM accepts kv_producer | kv_consumer | kv_both"),
    (["--", "vllm", "serve", "m", "--kv-transfer-config", '{"kv_connector": "P2pNcclConnector", "kv_role": "kv_producer"}'],
     "--kv-transfer-config kv_connector 'P2pNcclConnector' is not a connector vLLM registers"),
    # registered, but no spec states it
    (["--", "vllm", "serve", "m", "--kv-transfer-config", '{"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_producer"}'],
     "--kv-transfer-config kv_connector 'LMCacheConnectorV1': specplan plans NixlConnector, "
     "NixlPullConnector, NixlPushConnector, MooncakeConnector"),
])
def test_import_refuses_what_no_spec_states(tmp_path, argv, message):
    back = cli("import", "--engine", "vllm", "--model-config", str(_config(tmp_path)), *argv, catch=False)
    assert back.exit_code == 2
    assert message in back.stderr
