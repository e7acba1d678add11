"""`specplan import` passes exactly what the engine of the line's release would start (issue 37):
every JSON-valued flag against its release's config class, a line with no launch command, a KV
connector vLLM's factory does not register, and the method vLLM fills in when
--speculative-config names none. Each through the CLI."""

from __future__ import annotations

import json

import pytest

from specplan.schema import load_spec
from tests.helpers import model_config


LLAMA = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 32, "hidden_size": 4096,
         "vocab_size": 128256}


@pytest.fixture
def config(tmp_path):
    return str(model_config(tmp_path, LLAMA))


def _import(cli, config, *line, extra=()):
    return cli("import", "--engine", _engine(line), "--model-config", config, *extra, "--", *line)


def _engine(line) -> str:
    return "vllm" if line[:1] == ("vllm",) else "sglang"


def test_attention_config_key_no_release_has_is_refused(cli, config):
    result = _import(cli, config, "vllm", "serve", "m", "-pp", "3",
                     "--attention-config", '{"use_fp4_indexer_cache": true}')
    assert result.exit_code == 2, result.stdout
    assert result.stderr.startswith("specplan import: unknown --attention-config key "
                                    "'use_fp4_indexer_cache'")
    assert "vLLM 0.30.0 to vLLM 0.33.0" in result.stderr


def test_a_known_attention_config_key_and_its_dotted_form_pass(cli, config):
    for words in (["--attention-config", '{"backend": "FLASH_ATTN"}'],
                  ["--attention-config.backend", "FLASH_ATTN"]):
        result = _import(cli, config, "vllm", "serve", "m", *words)
        assert result.exit_code == 0, result.stderr


def test_compilation_config_unknown_key_is_refused_dotted_too(cli, config):
    result = _import(cli, config, "vllm", "serve", "m", "--compilation-config.cudagraf_mode", "FULL")
    assert result.exit_code == 2
    assert "unknown --compilation-config key 'cudagraf_mode'" in result.stderr


@pytest.mark.parametrize("line", [("SGLANG_X=1",), ("SGLANG_X=1", "SGLANG_Y=2")])
def test_a_line_of_only_environment_assignments_is_refused(cli, config, line):
    result = _import(cli, config, *line)
    assert result.exit_code == 2 and result.stdout == ""
    assert "only environment assignments" in result.stderr
    assert "no launch command" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("kv,said", [
    ({"kv_connector": "Carrier", "kv_role": "kv_both"}, "kv_connector 'Carrier' is not a connector"),
    ({"kv_connector": "NixlConnector", "kv_role": "kv_either"}, "kv_role 'kv_either'"),
    ({"kv_connector": "NixlConnector"}, "without kv_role"),
    ({"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config":
      {"connectors": [{"kv_connector": "NixlConnector", "kv_role": "kv_both"},
                      {"kv_connector": "Carrier", "kv_role": "kv_both"}]}},
     "kv_connector 'Carrier' is not a connector"),
])
def test_kv_transfer_config_vllm_refuses_is_refused(cli, config, kv, said):
    result = _import(cli, config, "vllm", "serve", "m", "--kv-transfer-config", json.dumps(kv))
    assert result.exit_code == 2 and said in result.stderr, result.stderr


@pytest.mark.parametrize("kv", [
    {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"},
    {"kv_connector": "Carrier", "kv_role": "kv_both", "kv_connector_module_path": "my.carrier"},
])
def test_kv_transfer_config_vllm_accepts_imports(cli, config, kv):
    result = _import(cli, config, "vllm", "serve", "m", "--kv-transfer-config", json.dumps(kv))
    assert result.exit_code == 0, result.stderr


@pytest.mark.parametrize("draft,draft_config,method", [
    ("yuhuili/EAGLE-LLaMA3-Instruct-8B", None, "eagle"),
    ("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", None, "eagle3"),
    ("z-lab/Qwen3-8B-DFlash-b16", None, "dflash"),
    ("org/small", {"model_type": "llama", "architectures": ["LlamaForCausalLM"]}, "standalone"),
    ("org/mtp", {"model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"]}, "mtp"),
    ("org/spark", {"model_type": "qwen3", "architectures": ["Qwen3DSparkModel"]}, "dspark"),
])
def test_speculative_config_without_method_gets_the_method_vllm_fills_in(cli, tmp_path, config, draft,
                                                                         draft_config, method):
    extra = ()
    if draft_config is not None:
        path = tmp_path / "draft.json"
        path.write_text(json.dumps(draft_config))
        extra = ("--draft-config", str(path))
    out = tmp_path / "s.yaml"
    sc = json.dumps({"model": draft, "num_speculative_tokens": 3})
    result = _import(cli, config, "vllm", "serve", "m", "--speculative-config", sc,
                     extra=(*extra, "-o", str(out)))
    assert result.exit_code == 0, result.stderr
    assert load_spec(out).speculative.method == method
    assert "the line names no method and vLLM fills it in" in result.stderr
    assert "SpeculativeConfig.__post_init__" in result.stderr


def test_speculative_config_without_method_whose_draft_config_decides_asks_for_it(cli, config):
    sc = json.dumps({"model": "org/small", "num_speculative_tokens": 3})
    result = _import(cli, config, "vllm", "serve", "m", "--speculative-config", sc)
    assert result.exit_code == 2 and "pass --draft-config" in result.stderr


def test_speculative_config_with_neither_method_nor_model_is_refused(cli, config):
    result = _import(cli, config, "vllm", "serve", "m", "--speculative-config",
                     '{"num_speculative_tokens": 3}')
    assert result.exit_code == 2 and "neither method nor model" in result.stderr


def test_vllm_spec_flags_are_read_into_the_speculative_config(cli, config, tmp_path):
    out = tmp_path / "s.yaml"
    result = _import(cli, config, "vllm", "serve", "m", "--spec-method", "eagle3", "--spec-model",
                     "org/eagle3", "--spec-tokens", "3", extra=("-o", str(out)))
    assert result.exit_code == 0, result.stderr
    s = load_spec(out).speculative
    assert (s.method, s.num_steps, s.draft_path) == ("eagle3", 3, "org/eagle3")
    both = _import(cli, config, "vllm", "serve", "m", "--spec-tokens", "3", "--speculative-config",
                   '{"method": "ngram", "num_speculative_tokens": 4}')
    assert both.exit_code == 2 and "mutually exclusive" in both.stderr


def test_a_speculative_config_key_with_dashes_is_read_as_vllm_reads_it(cli, config, tmp_path):
    result = _import(cli, config, "vllm", "serve", "m", "--speculative-config",
                     '{"method": "ngram", "num-speculative-tokens": 4, "prompt-lookup-max": 3}')
    assert result.exit_code == 0, result.stderr


def test_a_quantization_vllm_does_not_know_is_refused(cli, config):
    result = _import(cli, config, "vllm", "serve", "m", "--quantization", "w8a8_int8")
    assert result.exit_code == 2
    assert "--quantization w8a8_int8: vLLM 0.33.0 refuses it at start-up" in result.stderr


@pytest.mark.parametrize("quant,carried", [("modelopt", True), ("w8a8_int8", False)])
def test_export_to_the_other_engine_says_what_it_cannot_carry(cli, config, tmp_path, quant, carried):
    out = tmp_path / "s.yaml"
    result = _import(cli, config, "python3", "-m", "sglang.launch_server", "--model-path", "m",
                     "--tp", "2", "--quantization", quant, extra=("-o", str(out)))
    assert result.exit_code == 0, result.stderr
    exported = cli("export", str(out), "--engine", "vllm")
    assert exported.exit_code == 0, exported.stderr
    line = f"--quantization {quant}"
    if carried:
        assert line in exported.stdout and "not carried over" not in exported.stdout
    else:
        assert f"not carried over: {line}" in exported.stdout


def test_the_ascend_transfer_backend_runs_on_npus(cli, config, tmp_path):
    line = ("python", "-m", "sglang.launch_server", "--model-path", "m", "--tp-size", "2",
            "--disaggregation-mode", "decode", "--disaggregation-transfer-backend", "ascend")
    out = tmp_path / "npu.yaml"
    result = _import(cli, config, *line, extra=("-o", str(out)))
    assert result.exit_code == 0, result.stderr
    assert "topology.device npu: the ascend transfer backend runs on Ascend NPUs only" in result.stderr
    spec = load_spec(str(out))
    assert (spec.topology.device, spec.disaggregation.connector) == ("npu", "ascend")
    cuda = _import(cli, config, *line, "--device", "cuda")
    assert cuda.exit_code == 2
    assert "--device cuda: the ascend transfer backend runs on Ascend NPUs only" in cuda.stderr


def test_a_vllm_ascend_additional_config_key_means_npus(cli, config, tmp_path):
    out = tmp_path / "npu.yaml"
    line = ("vllm", "serve", "m", "--tensor-parallel-size", "16", "--additional-config",
            '{"torchair_graph_config": {"enabled": true}}')
    result = _import(cli, config, *line, extra=("-o", str(out)))
    assert result.exit_code == 0, result.stderr
    assert "topology.device npu: --additional-config torchair_graph_config" in result.stderr
    assert load_spec(str(out)).topology.device == "npu"
    other = tmp_path / "cuda.yaml"
    plain = _import(cli, config, "vllm", "serve", "m", "--additional-config", '{"x": 1}',
                    extra=("-o", str(other)))
    assert plain.exit_code == 0 and load_spec(str(other)).topology.device == "cuda"


@pytest.mark.parametrize("role", ["kv_producer", "kv_consumer"])
def test_a_store_connector_instance_is_planned_alone(cli, config, tmp_path, role):
    out = tmp_path / "store.yaml"
    kv = json.dumps({"kv_connector": "MooncakeStoreConnector", "kv_role": role})
    result = _import(cli, config, "vllm", "serve", "m", "--kv-transfer-config", kv, extra=("-o", str(out)))
    assert result.exit_code == 0, result.stderr
    assert "kv_connector MooncakeStoreConnector moves the KV through a shared store" in result.stderr
    assert load_spec(str(out)).disaggregation is None
