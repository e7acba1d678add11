"""Import applies the engines' own speculative defaults and says so (engines/<engine>/defaults.py,
checked against each SGLang wheel by tests/engines/test_spec_defaults.py)."""

from __future__ import annotations

import json

import pytest

from specplan.engines.sglang import defaults as d
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
    ("dsv3", "EAGLE", (3, 1, 4), "SGLang 0.5.23's default for DeepseekV3ForCausalLM"),
    ("llama", "EAGLE3", (5, 4, 8), "SGLang 0.5.23's default for LlamaForCausalLM"),
    ("qwen", "EAGLE3", (3, 1, 4), "SGLang 0.5.23's default for Qwen3ForCausalLM (not in its table)"),
    ("llama", "STANDALONE", (3, 1, 4), "SGLang 0.5.23's default for STANDALONE"),
])
def test_sglang_picks_the_widths_by_architecture(cli, configs, config, algorithm, widths, why):
    result, spec = _import(cli, "sglang", configs[config], *SG, "--speculative-algorithm",
                           algorithm, "--speculative-draft-model-path", "d")
    assert result.exit_code == 0, result.stderr
    s = spec.speculative
    assert (s.num_steps, s.topk, s.verify_width) == widths
    steps, topk, width = widths
    assert f"num_steps {steps}, topk {topk}, num_draft_tokens {width}: {why}" in result.stderr


@pytest.mark.parametrize("version", ["0.5.20", "0.5.21", "0.5.22", "0.5.23"])
def test_import_applies_and_names_the_release_the_line_is_read_as(cli, configs, version):
    """engines/sglang/defaults.py BY_RELEASE: each release's own _auto_choose_speculative_params
    (tests/engines/test_spec_defaults.py runs each wheel's); the spec keeps the release."""
    result = cli("import", "--engine", "sglang", "--engine-version", version, "--model-config",
                 str(configs["llama"]), "--", *SG, "--speculative-algorithm", "EAGLE3",
                 "--speculative-draft-model-path", "d")
    assert result.exit_code == 0, result.stderr
    spec = load_spec_text(result.stdout, "imported")
    s = spec.speculative
    assert (s.num_steps, s.topk, s.verify_width) == d.BY_RELEASE[version].by_arch["LlamaForCausalLM"]
    assert (f"num_steps 5, topk 4, num_draft_tokens 8: SGLang {version}'s default for "
            "LlamaForCausalLM (_auto_choose_speculative_params)") in result.stderr
    assert spec.engine_version == (None if version == "0.5.23" else version)


def test_a_base_specs_release_picks_the_defaults(cli, tmp_path, configs):
    base = tmp_path / "base.yaml"
    base.write_text("name: b\nengine: sglang\nengine_version: 0.5.22\ntopology: {tp: 8}\n"
                    "model: {num_layers: 32, hidden_size: 4096, vocab_size: 128256}\n")
    result = cli("import", "--engine", "sglang", "--base", str(base), "--model-config",
                 str(configs["dsv3"]), "--", *SG, "--speculative-algorithm", "EAGLE")
    assert result.exit_code == 0, result.stderr
    assert "SGLang 0.5.22's default for DeepseekV3ForCausalLM" in result.stderr


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
    assert "SGLang 0.5.23's NGRAM default: num_draft_tokens 8 // max_bfs_breadth 4" in result.stderr


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
