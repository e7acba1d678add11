"""The n-gram widths a real launch line asks for are the engine's limits, not specplan's
(issue 23): SGLang's NGRAM drafts a BFS trie of num_draft_tokens nodes (methods/ngram.py), so
its own defaults (12 nodes under a breadth of 10, num_steps 12 // 10 = 1) import, check,
compile and simulate; a vLLM n-gram chain of 300 drafts does too. specplan's one bound of its
own (schema MAX_DRAFTS: 4,096 drafts per request per round) is named as specplan's, and
simulate refuses past what its CPU model runs in reasonable time, with exit 2.

The engines' own answers for the same widths (their real _handle_ngram, _derive_tree_links and
SpeculativeConfig) are tests/engines/test_engine_limits.py."""

from __future__ import annotations

import json

import pytest

from specplan.schema.load import load_spec_text
from specplan.schema.model import MAX_DRAFTS
from specplan.sim.bounds import SIM_MAX_WIDTH
from tests.helpers import model_config


LLAMA = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 4, "hidden_size": 256,
         "vocab_size": 1000, "num_attention_heads": 8, "num_key_value_heads": 8}
SG = ("python", "-m", "sglang.launch_server", "--model-path", "m", "--tp", "2",
      "--speculative-algorithm", "NGRAM")
VL = ("vllm", "serve", "m", "-tp", "2", "--speculative-config")


@pytest.fixture
def config(tmp_path):
    return model_config(tmp_path, LLAMA)


def imported(cli, tmp_path, engine, config, *line):
    """import -> spec.yaml, its exit code and stderr; the parsed spec when it imported."""
    result = cli("import", "--engine", engine, "--model-config", str(config), "--", *line)
    if result.exit_code != 0:
        return None, result
    path = tmp_path / "spec.yaml"
    path.write_text(result.stdout)
    return path, result


def widths(path):
    s = load_spec_text(path.read_text(), "spec").speculative
    return s.num_steps, s.topk, s.verify_width


def test_sglang_ngram_defaults_import_check_compile_and_simulate(cli, tmp_path, config):
    path, result = imported(cli, tmp_path, "sglang", config, *SG)
    assert result.exit_code == 0, result.stderr
    assert widths(path) == (1, 10, 12)  # a 12-node trie: past 1 + topk * num_steps = 11
    assert "num_steps 1, topk 10, num_draft_tokens 12: SGLang 0.5.23's NGRAM default" in result.stderr
    assert cli("check", str(path)).exit_code == 0
    out = tmp_path / "out"
    assert cli("compile", str(path), "-o", str(out)).exit_code == 0
    plan = json.loads((out / "plan.json").read_text())["speculative"]
    assert (plan["num_steps"], plan["topk"], plan["num_draft_tokens"]) == (1, 10, 12)
    sim = cli("simulate", str(path), "--rounds", "2")
    assert sim.exit_code == 0, sim.stdout + sim.stderr
    assert "PASS" in sim.stdout


def test_sglang_ngram_fewer_tokens_than_the_breadth_derives_zero_steps(cli, tmp_path, config):
    """SGLang: num_steps = 8 // 10 = 0, which it never reads for NGRAM; the trie has 8 nodes."""
    path, result = imported(cli, tmp_path, "sglang", config, *SG, "--speculative-num-draft-tokens", "8")
    assert result.exit_code == 0, result.stderr
    assert widths(path) == (0, 10, 8)
    assert cli("check", str(path)).exit_code == 0
    assert cli("compile", str(path), "-o", str(tmp_path / "out")).exit_code == 0


@pytest.mark.parametrize("speculative, message", [
    # A trie of one node drafts nothing.
    ("{method: ngram, num_steps: 0, topk: 10}",
     "speculative.num_steps: method 'ngram' verifies a trie of num_draft_tokens nodes, root "
     "included, and needs at least 2 (one draft), found num_draft_tokens=None, num_steps=0"),
    # An EAGLE tree keeps SGLang's bound (organize_draft_results: topk candidates at one step).
    ("{method: eagle, num_steps: 1, topk: 10, num_draft_tokens: 12}",
     "num_draft_tokens=12 must be in 2 .. 1 + topk + (num_steps-1)*topk^2 = 11"),
    # Two steps of topk 3 score 3 + 9 candidates: 13 verified at most, root included.
    ("{method: eagle, num_steps: 2, topk: 3, num_draft_tokens: 14}",
     "num_draft_tokens=14 must be in 2 .. 1 + topk + (num_steps-1)*topk^2 = 13"),
], ids=["a-trie-of-one-node", "an-eagle-tree-past-its-levels", "an-eagle-tree-past-its-candidates"])
def test_widths_past_a_methods_bound_are_refused(cli, write_spec, speculative, message):
    path = write_spec(f"""\
        name: t
        engine: sglang
        topology: {{tp: 2}}
        model: {{num_layers: 4, hidden_size: 64, vocab_size: 1000}}
        speculative: {speculative}
        """)
    result = cli("check", str(path))
    assert result.exit_code == 2
    assert message in result.stderr


def test_vllm_ngram_chain_of_300_drafts_imports_checks_compiles_and_simulates(cli, tmp_path, config):
    path, result = imported(cli, tmp_path, "vllm", config, *VL,
                            '{"method":"ngram","num_speculative_tokens":300,"prompt_lookup_max":4}')
    assert result.exit_code == 0, result.stderr
    assert widths(path) == (300, 1, 301)
    assert cli("check", str(path)).exit_code == 0
    assert cli("compile", str(path), "-o", str(tmp_path / "out")).exit_code == 0
    sim = cli("simulate", str(path), "--rounds", "2")  # about 5 s on one core
    assert sim.exit_code == 0, sim.stdout + sim.stderr


def test_past_specplans_own_bound_the_message_names_it_as_specplans(cli, tmp_path, config):
    k = MAX_DRAFTS + 1  # vLLM's SpeculativeConfig takes it (tests/engines/test_engine_limits.py)
    _, result = imported(cli, tmp_path, "vllm", config, *VL,
                         json.dumps({"method": "ngram", "num_speculative_tokens": k}))
    assert result.exit_code == 2
    assert (f"speculative.num_steps: expected at most {MAX_DRAFTS:,} (specplan's limit for this "
            f"key), found integer {k}") in result.stderr


def test_simulate_refuses_a_width_past_its_cpu_model_with_exit_2(cli, write_spec):
    path = write_spec(f"""\
        name: t
        engine: vllm
        topology: {{tp: 2}}
        model: {{num_layers: 4, hidden_size: 64, vocab_size: 1000}}
        speculative: {{method: ngram, num_steps: {MAX_DRAFTS}}}
        """)
    assert cli("check", str(path)).exit_code == 0
    result = cli("simulate", str(path), "--rounds", "2")
    assert result.exit_code == 2
    assert (f"the plan verifies {MAX_DRAFTS + 1:,} tokens per request per round "
            f"(speculative.num_steps / num_draft_tokens); simulate runs at most {SIM_MAX_WIDTH:,} "
            "on the CPU") in result.stderr


def test_simulate_refuses_a_deployment_whose_instances_verify_past_its_cpu_model(cli, tmp_path):
    """The width bound holds for a deployment's instances as for one spec (exit 2, not a run)."""
    common = ("engine: vllm\ntopology: {tp: 2}\nmodel: {num_layers: 4, hidden_size: 64, "
              f"vocab_size: 1000}}\nspeculative: {{method: ngram, num_steps: {MAX_DRAFTS}}}\n")
    for role, peer in (("prefill", "decode"), ("decode", "prefill")):
        (tmp_path / f"{role}.yaml").write_text(
            f"name: {role[0]}\ndisaggregation: {{role: {role}, peer: {peer}.yaml}}\n" + common)
    assert cli("check", str(tmp_path / "decode.yaml")).exit_code == 0
    result = cli("simulate", str(tmp_path / "decode.yaml"), "--rounds", "2")
    assert result.exit_code == 2, result.output
    assert f"simulate runs at most {SIM_MAX_WIDTH:,} on the CPU" in result.stderr
