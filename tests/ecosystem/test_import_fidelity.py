"""Import reads lines as users write them: the `python -m` launchers, vLLM's kv_both, MLA from
the config, and shell expansions refused rather than guessed."""

from __future__ import annotations

import json

import pytest

from specplan.schema.load import load_spec_text
from tests.helpers import model_config


DSV3 = {"num_hidden_layers": 61, "hidden_size": 7168, "vocab_size": 129280,
        "n_routed_experts": 256, "num_experts_per_tok": 8, "kv_lora_rank": 512,
        "architectures": ["DeepseekV3ForCausalLM"]}


@pytest.fixture
def config(tmp_path):
    return str(model_config(tmp_path, DSV3))


def _import(cli, engine, config, *line, script=None):
    args = ["import", "--engine", engine, "--model-config", config]
    result = cli(*args, *(["-f", script] if script else ["--", *line]))
    return result, (load_spec_text(result.stdout, "x") if result.exit_code == 0 else None)


def test_vllm_openai_api_server_is_a_launcher(cli, config):
    result, spec = _import(cli, "vllm", config, "python", "-m", "vllm.entrypoints.openai.api_server",
                           "--model", "deepseek-ai/DeepSeek-V3", "--tensor-parallel-size", "8")
    assert result.exit_code == 0, result.stderr
    assert (spec.model.path, spec.topology.tp) == ("deepseek-ai/DeepSeek-V3", 8)
    assert spec.engine_args[0] == "python -m vllm.entrypoints.openai.api_server"


def test_sglang_module_launcher_after_python3(cli, config):
    result, spec = _import(cli, "sglang", config, "python3", "-m", "sglang.launch_server",
                           "--model-path", "m", "--tp", "8")
    assert result.exit_code == 0, result.stderr
    assert spec.topology.tp == 8 and spec.engine_args[0] == "python3 -m sglang.launch_server"


def test_kv_both_is_one_instance_whose_role_the_deployment_gives(cli, config):
    result, spec = _import(cli, "vllm", config, "vllm", "serve", "m", "--kv-transfer-config",
                           '{"kv_connector":"NixlConnector","kv_role":"kv_both"}')
    assert result.exit_code == 0, result.stderr
    assert spec.disaggregation is None
    assert "kv_role kv_both serves either side" in result.stderr


def test_mla_comes_from_kv_lora_rank(cli, config):
    _, spec = _import(cli, "sglang", config, "python", "-m", "sglang.launch_server",
                      "--model-path", "m", "--tp", "8")
    assert spec.model.attention == "mla"


@pytest.mark.parametrize("word", ["$((4*2))", "$(nproc)", "'$(nproc)'"])
def test_a_command_or_arithmetic_of_the_shell_that_decides_the_plan_is_refused_not_run(
        cli, config, tmp_path, word):
    script = tmp_path / "run.sh"
    script.write_text(f"python -m sglang.launch_server --model-path m --host h --tp {word}\n")
    result, _ = _import(cli, "sglang", config, script=str(script))
    assert result.exit_code == 2
    assert "specplan runs no command or arithmetic of the shell" in result.stderr


def test_a_quoted_dollar_paren_is_a_literal_and_stays_one(cli, config, tmp_path):
    """Single quotes: the shell runs nothing, and neither does the exported line."""
    script = tmp_path / "run.sh"
    script.write_text("python -m sglang.launch_server --model-path m --host '$(hostname -i)' --tp 8\n")
    result, spec = _import(cli, "sglang", config, script=str(script))
    assert result.exit_code == 0, result.stderr
    assert "--host '$(hostname -i)'" in spec.engine_args


@pytest.mark.parametrize("word", ["${local_ip}", "$HOST"])
def test_a_variable_the_plan_does_not_read_is_kept_as_written(cli, config, tmp_path, word):
    script = tmp_path / "run.sh"
    script.write_text(f"python -m sglang.launch_server --model-path m --host {word} --tp 8\n")
    result, spec = _import(cli, "sglang", config, script=str(script))
    assert result.exit_code == 0, result.stderr
    assert f"kept {word} as written (--host)" in result.stderr
    assert f'--host "{word}"' in spec.engine_args


def _pd(role: str, tp: int, *extra: str) -> list[str]:
    return ["python", "-m", "sglang.launch_server", "--model-path", "m", "--tp", str(tp),
            "--disaggregation-mode", role, "--disaggregation-transfer-backend", "nixl", *extra]


def test_page_size_is_planned_and_a_mismatch_is_an_error_of_the_imported_pair(cli, config, tmp_path):
    prefill, decode = tmp_path / "p.yaml", tmp_path / "d.yaml"
    for out, line in ((prefill, _pd("prefill", 2, "--page-size", "64")), (decode, _pd("decode", 4))):
        result = cli("import", "--engine", "sglang", "--model-config", config, "-o", str(out), "--", *line)
        assert result.exit_code == 0, result.stderr
    assert load_spec_text(prefill.read_text(), "p").model.page_size == 64
    checked = cli("check", str(prefill), str(decode), "--format", "json")
    assert checked.exit_code == 3
    findings = json.loads(checked.stdout)["findings"]
    assert any("model.page_size differs: prefill 64, decode 1" in f["message"] for f in findings)
    # MLA read from the config: a tp 2 -> tp 4 handoff of one latent KV is no GQA head split
    assert "hetero-tp" not in checked.stdout
    gqa = tmp_path / "gqa.json"
    gqa.write_text(json.dumps({k: v for k, v in DSV3.items() if k != "kv_lora_rank"}))
    for out, line in ((prefill, _pd("prefill", 2)), (decode, _pd("decode", 4))):
        assert cli("import", "--engine", "sglang", "--model-config", str(gqa), "-o", str(out),
                   "--", *line).exit_code == 0
    assert "hetero-tp" in cli("check", str(prefill), str(decode), "--format", "json").stdout


def test_block_size_is_vllms_page_size_and_round_trips(cli, config, tmp_path):
    spec = tmp_path / "s.yaml"
    line = ["vllm", "serve", "m", "-tp", "2", "--block-size", "32"]
    assert cli("import", "--engine", "vllm", "--model-config", config, "-o", str(spec), "--", *line).exit_code == 0
    assert load_spec_text(spec.read_text(), "s").model.page_size == 32
    exported = cli("export", str(spec)).stdout
    assert " ".join(line) in exported
