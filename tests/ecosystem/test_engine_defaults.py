"""Import applies the engines' own speculative defaults and says so (engines/<engine>/defaults.py,
checked against each SGLang wheel by tests/engines/test_spec_defaults.py)."""

from __future__ import annotations

import json

import pytest

from specplan.schema.load import load_spec_text

CONFIGS = {
    "dsv3": {"num_hidden_layers": 61, "hidden_size": 7168, "vocab_size": 129280,
             "n_routed_experts": 256, "num_experts_per_tok": 8, "num_nextn_predict_layers": 1,
             "architectures": ["DeepseekV3ForCausalLM"]},
    "llama": {"num_hidden_layers": 32, "hidden_size": 4096, "vocab_size": 128256,
              "architectures": ["LlamaForCausalLM"]},
    "qwen": {"num_hidden_layers": 64, "hidden_size": 5120, "vocab_size": 151936,
             "architectures": ["Qwen3ForCausalLM"]},
}
SG = ["python", "-m", "sglang.launch_server", "--model-path", "m", "--tp", "8"]


@pytest.fixture
def configs(tmp_path):
    out = {}
    for name, config in CONFIGS.items():
        out[name] = tmp_path / f"{name}.json"
        out[name].write_text(json.dumps(config))
    return out


def _import(cli, engine, config, *line):
    result = cli("import", "--engine", engine, "--model-config", str(config), "--", *line)
    return result, (load_spec_text(result.stdout, "imported") if result.exit_code == 0 else None)


@pytest.mark.parametrize("config,algorithm,widths,why", [
    ("dsv3", "EAGLE", (3, 1, 4), "SGLang's default for DeepseekV3ForCausalLM"),
    ("llama", "EAGLE3", (5, 4, 8), "SGLang's default for LlamaForCausalLM"),
    ("qwen", "EAGLE3", (3, 1, 4), "SGLang's default for Qwen3ForCausalLM (not in its table)"),
    ("llama", "STANDALONE", (3, 1, 4), "SGLang's default for STANDALONE"),
])
def test_sglang_picks_the_widths_by_architecture(cli, configs, config, algorithm, widths, why):
    result, spec = _import(cli, "sglang", configs[config], *SG, "--speculative-algorithm",
                           algorithm, "--speculative-draft-model-path", "d")
    assert result.exit_code == 0, result.stderr
    s = spec.speculative
    assert (s.num_steps, s.topk, s.verify_width) == widths
    steps, topk, width = widths
    assert f"num_steps {steps}, topk {topk}, num_draft_tokens {width}: {why}" in result.stderr


def test_sglang_refuses_half_the_widths_as_sglang_does(cli, configs):
    result, _ = _import(cli, "sglang", configs["llama"], *SG, "--speculative-algorithm", "EAGLE3",
                        "--speculative-eagle-topk", "4")
    assert result.exit_code == 2
    assert "--speculative-eagle-topk without --speculative-num-steps: SGLang chooses" in result.stderr


def test_without_the_model_config_the_default_is_unknown_and_said(cli):
    result = cli("import", "--engine", "sglang", "--", *SG, "--speculative-algorithm", "EAGLE3")
    assert result.exit_code == 2
    assert "picks it by the target's architecture" in result.stderr


def test_sglang_ngram_derives_the_steps(cli, configs):
    result, spec = _import(cli, "sglang", configs["llama"], *SG, "--speculative-algorithm", "NGRAM",
                           "--speculative-ngram-max-bfs-breadth", "4",
                           "--speculative-num-draft-tokens", "8")
    assert result.exit_code == 0, result.stderr
    assert (spec.speculative.num_steps, spec.speculative.topk) == (2, 4)
    assert "SGLang's NGRAM default: num_draft_tokens 8 // max_bfs_breadth 4" in result.stderr


def test_vllm_mtp_takes_the_checkpoints_mtp_layers(cli, configs):
    result, spec = _import(cli, "vllm", configs["dsv3"], "vllm", "serve", "m", "-tp", "8",
                           "--speculative-config", '{"method": "deepseek_mtp"}')
    assert result.exit_code == 0, result.stderr
    assert (spec.speculative.method, spec.speculative.num_steps) == ("mtp", 1)
    assert "num_steps 1: vLLM's default for MTP: the checkpoint's num_nextn_predict_layers" in result.stderr


def test_vllm_other_methods_need_the_token_count(cli, configs):
    result, _ = _import(cli, "vllm", configs["llama"], "vllm", "serve", "m",
                        "--speculative-config", '{"method": "eagle3", "model": "d"}')
    assert result.exit_code == 2
    assert "which vLLM requires for method 'eagle3'" in result.stderr


def test_a_defaulted_line_round_trips(cli, tmp_path, configs):
    line = [*SG, "--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "d"]
    spec = tmp_path / "s.yaml"
    imported = cli("import", "--engine", "sglang", "--model-config", str(configs["llama"]),
                   "-o", str(spec), "--", *line)
    assert imported.exit_code == 0, imported.stderr
    exported = cli("export", str(spec))
    assert exported.exit_code == 0, exported.stderr
    commands = [s for s in exported.stdout.splitlines() if s and not s.startswith(("#", "export "))]
    assert commands[0] == " ".join(line)
