"""`specplan export` exits 3 and names the reason when the engine cannot run the spec."""

from __future__ import annotations

import pytest

MODEL = "model: {num_layers: 8, hidden_size: 64, vocab_size: 1000}"
MOE = "model: {num_layers: 8, hidden_size: 64, vocab_size: 1000, moe: {num_experts: 8, top_k: 2}}"

CASES = {
    "sglang-eagle3-pp": (
        f"engine: sglang\ntopology: {{tp: 2, pp: 2}}\n{MODEL}\n"
        "speculative: {method: eagle3, num_steps: 3}\n", "sglang",
        "SGLang 0.5.23 cannot run x: SGLang runs speculative decoding under pipeline parallel "
        "(pp=2) only with EAGLE or NEXTN (single-layer), not eagle3 "
        "(arg_groups/validation_hook.py check_pipeline_parallel_compat)"),
    "sglang-dspark-pp": (
        f"engine: sglang\ntopology: {{tp: 2, pp: 2}}\n{MODEL}\n"
        "speculative: {method: dspark, num_steps: 3}\n", "sglang",
        "SGLang 0.5.23 cannot run x: SGLang runs DSpark under pipeline parallel only on PD "
        "prefill nodes (--disaggregation-mode prefill), which make no decode rounds "
        "(arg_groups/validation_hook.py check_pipeline_parallel_compat)"),
    "sglang-eagle-pp-dpattn": (
        f"engine: sglang\ntopology: {{tp: 4, pp: 2, dp: 2, dp_attention: true}}\n{MODEL}\n"
        "speculative: {method: eagle, num_steps: 3}\n", "sglang",
        "SGLang 0.5.23 cannot run x: SGLang runs EAGLE/NEXTN decode rounds under pipeline "
        "parallel only with SGLANG_ENABLE_PP_SPEC=1, which is not compatible with DP-attention "
        "(--attn-dp-size)"),
    "sglang-eagle-pp-pd-decode": (
        f"engine: sglang\ntopology: {{tp: 2, pp: 2}}\n{MODEL}\n"
        "speculative: {method: eagle, num_steps: 3, topk: 1, num_draft_tokens: 4}\n"
        "disaggregation: {role: decode}\n", "sglang",
        "SGLang 0.5.23 cannot run x: SGLang runs EAGLE under pipeline parallel on a PD decode "
        "instance neither with SGLANG_ENABLE_PP_SPEC=1 (\"not compatible with "
        "--disaggregation-mode\") nor without it (\"only supported on prefill nodes\") "
        "(arg_groups/validation_hook.py check_pipeline_parallel_compat)"),
    "sglang-dspark-moe-attn-tp2": (
        f"engine: sglang\ntopology: {{tp: 8, dp: 4, dp_attention: true, ep: 8}}\n{MOE}\n"
        "speculative: {method: dspark, num_steps: 3}\n", "sglang",
        "SGLang 0.5.23 cannot run x: SGLang's DSpark worker requires attn_tp == 1 under "
        "DP-attention with a MoE (DeepSeek-V4) draft; here attn_tp = tp 8 / dp 4 / cp 1 = 2 "
        "(set dp == tp; seed 000 section 2, dspark_worker_v2.py)"),
    "vllm-tree": (
        f"engine: sglang\ntopology: {{tp: 2}}\n{MODEL}\n"
        "speculative: {method: eagle, num_steps: 3, topk: 4, num_draft_tokens: 8}\n", "vllm",
        "vLLM 0.33.0 cannot run x: vLLM has no tree verify: speculative.topk must be 1, found 4"),
    "vllm-short-verify": (
        f"engine: sglang\ntopology: {{tp: 2}}\n{MODEL}\n"
        "speculative: {method: eagle, num_steps: 3, num_draft_tokens: 3}\n", "vllm",
        "vLLM 0.33.0 cannot run x: vLLM verifies num_speculative_tokens + 1 = 4 tokens; "
        "speculative.num_draft_tokens=3 has no vLLM spelling"),
    "vllm-partial-ep": (
        f"engine: sglang\ntopology: {{tp: 8, ep: 4}}\n{MOE}\n"
        "speculative: {method: mtp, num_steps: 1}\n", "vllm",
        "vLLM 0.33.0 cannot run x: vLLM expert parallel is all or nothing (ep = dp * pcp * tp = 8); SGLang's ep=4 inside "
        "tp=8 has no vLLM equivalent"),
    "vllm-moe-dp": (
        f"engine: sglang\ntopology: {{tp: 8, cp: 2, moe_dp: 2}}\n{MOE}\n", "vllm",
        "vLLM 0.33.0 cannot run x: vLLM has no MoE data parallel (topology.moe_dp=2)"),
}


@pytest.mark.parametrize("name", CASES)
def test_refusal_names_the_reason(cli, write_spec, name):
    text, engine, reason = CASES[name]
    result = cli("export", str(write_spec("name: x\n" + text)), "--engine", engine)
    assert result.exit_code == 3
    assert result.stdout == ""
    assert result.stderr == f"specplan export: {reason}\n"


def test_mismatch_is_a_comment_not_a_refusal(cli):
    # The plan converges EAGLE drafts SGLang never converges: a note, exit 0.
    result = cli("export", "specs/qwen3-next-mtp-dpattn-ep8.yaml")
    assert result.exit_code == 0
    assert ("which SGLang cannot converge: the specplan plugin the line loads (SPECPLAN_PLAN) "
            "converges them") in result.stdout
    assert result.stdout.splitlines()[-1] == ("SPECPLAN_PLAN=build/qwen3-next-mtp-dpattn-ep8/plan.json "
                                              'python -m sglang.launch_server "${args[@]}"')


def test_a_translated_export_loads_no_plan(cli):
    # The plan compiled from the spec is the other engine's layout: the plugin cannot run it.
    out = cli("export", "specs/deepseek-v4-flash-mtp-tp2-pp2.yaml", "--engine", "sglang").stdout
    assert "SPECPLAN_PLAN=build" not in out
    assert "the engine will not match the plan there unless it loads the specplan plugin" in out


def test_cross_engine_keeps_the_layer_split(cli):
    out = cli("export", "specs/deepseek-v4-flash-mtp-tp2-pp2.yaml", "--engine", "sglang").stdout
    assert "export SGLANG_PP_LAYER_PARTITION=22,21  #" in out
    assert "vllm gives remainder layers to the stages before the last ([22, 21])" in out


ENGINE_ARGS = {  # entries the engine's parser refuses: every command exits 2 naming the entry
    "unknown-flag": ('["--tp-size", "2", "--x"]', "engine_args[2]: unknown sglang flag --x"),
    "stray-words": ('["--tp-size 2", "a b"]', "engine_args[1]: unrecognized arguments: a"),
    "open-quote": ('["--tp-size 2", "--served-model-name \'x"]', "engine_args[1]: No closing quotation"),
    # what export's re-reading refuses (the hostile sweep: ImportProblem tracebacks)
    "bad-value": ('["--tp-size=abc"]', "engine_args[0]: --tp-size expects an integer, found 'abc'"),
    "only-env": ('["X=1"]', "engine_args: the line holds only environment assignments (X)"),
}


@pytest.mark.parametrize("command", ["check", "export", "explain"])
@pytest.mark.parametrize("case", sorted(ENGINE_ARGS))
def test_engine_args_the_parser_refuses_are_exit_2_naming_the_entry(tmp_path, command, case):
    """export raised FlagProblem as a traceback (exit 1) while check passed the same spec
    (issue 37): each command now reads engine_args as export does."""
    from tests.helpers import cli

    args, shows = ENGINE_ARGS[case]
    path = tmp_path / "x.yaml"
    path.write_text(f"name: x\nengine: sglang\ntopology: {{tp: 2}}\n{MODEL}\nengine_args: {args}\n")
    res = cli(command, str(path))
    assert res.exit_code == 2, res.output
    (line,) = res.stderr.splitlines()
    assert line.startswith(f"{path}:5:") and shows in line
    assert "SGLang 0.5.23's parser refuses the launch line engine_args hold" in line


def test_a_pd_prefill_instance_runs_eagle_under_pp_without_the_gated_relay(cli, write_spec):
    # SGLang asserts SGLANG_ENABLE_PP_SPEC "is not compatible with --disaggregation-mode"; a PD
    # prefill node runs PP + EAGLE without it (check_pipeline_parallel_compat).
    spec = write_spec("name: x\nengine: sglang\ntopology: {tp: 2, pp: 2}\n" + MODEL + "\n"
                      "speculative: {method: eagle, num_steps: 3, topk: 1, num_draft_tokens: 4}\n"
                      "disaggregation: {role: prefill}\n")
    result = cli("export", str(spec))
    assert result.exit_code == 0, result.stderr
    assert "--disaggregation-mode prefill" in result.stdout
    assert "SGLANG_ENABLE_PP_SPEC" not in result.stdout
