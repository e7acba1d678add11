"""Issue 21's engine rules through the CLI (the engines' own functions are run against the same
rules in tests/engines/test_engine_rules.py and tests/deploy/test_handoff_engines.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import cli


ROOT = Path(__file__).resolve().parents[2]


def write(tmp: Path, text: str, name: str = "spec.yaml") -> Path:
    (tmp / name).write_text(text)
    return tmp / name


def small(engine: str, topology: str, speculative: str = "{}", model: str = "", behaviour: str = "engine") -> str:
    return (f"name: r\nengine: {engine}\nbehaviour: {behaviour}\ntopology: {topology}\n"
            f"model: {{num_layers: 16, hidden_size: 64, vocab_size: 128{model}}}\n"
            f"speculative: {speculative}\n")


@pytest.mark.parametrize("pp, code", [(1, 0), (2, 3)])
def test_vllm_eagle_draft_layer_collides_under_pp(tmp_path, pp, code):
    spec = write(tmp_path, small("vllm", f"{{tp: 1, pp: {pp}}}", "{method: eagle, num_steps: 3}"))
    out = cli("check", spec, code=code).output
    if pp > 1:
        assert "draft-layer id 8 collides with target layer 8 of stage 1" in out
    ours = write(tmp_path, small("vllm", "{tp: 1, pp: 2}", "{method: eagle, num_steps: 3}",
                                 behaviour="specplan"), "ours.yaml")
    cli("check", ours, code=0)  # specplan's own plan keeps global ids


def test_vllm_eplb_without_expert_parallel_is_refused(tmp_path):
    moe = ", moe: {num_experts: 8, top_k: 2, eplb: true}"
    out = cli("check", write(tmp_path, small("vllm", "{tp: 2}", model=moe)), code=2).output
    assert "model.moe.eplb: eplb needs expert parallel" in out and "_validate_parallel_config" in out
    cli("check", write(tmp_path, small("vllm", "{tp: 2, ep: 2}", model=moe), "ep.yaml"), code=0)


def test_sglang_tap_num_layers_is_refused(tmp_path):
    spec = small("sglang", "{tp: 2}", "{method: eagle3, num_steps: 3, aux_layers: [2, 8, 16]}",
                 behaviour="specplan")
    out = cli("check", write(tmp_path, spec), code=2).output
    assert "speculative.aux_layers[2]: tap 16 (= num_layers" in out and "LlamaModel.forward" in out
    cli("check", write(tmp_path, spec.replace("8, 16]", "8, 15]"), "ok.yaml"), code=0)


def test_import_plans_zbal_on_npu(tmp_path):
    base = write(tmp_path, small("sglang", "{tp: 2}", behaviour="specplan"), "base.yaml")
    line = ["python", "-m", "sglang.launch_server", "--model-path", "m", "--tp-size", "2", "--device", "npu"]
    out = cli("import", "--engine", "sglang", "--base", base, "--", "SGLANG_ZBAL_LOCAL_MEM_SIZE=1024", *line,
              code=0).output
    assert "backend: zbal" in out and "_DEVICE_TO_DISTRIBUTED_BACKEND" in out
    assert "backend" not in cli("import", "--engine", "sglang", "--base", base, "--", *line, code=0).output
    cli("import", "--engine", "sglang", "--base", base, "--", "SGLANG_ZBAL_LOCAL_MEM_SIZE=lots", *line, code=2)


def test_inline_instances_default_their_names(tmp_path):
    text = (ROOT / "specs" / "disagg" / "kimi-k3-dspark-pd.yaml").read_text()
    text = text.replace("    name: kimi-k3-prefill\n", "").replace("    name: kimi-k3-decode\n", "")
    out = cli("explain", write(tmp_path, text, "pd.yaml"), code=0).output
    assert "prefill kimi-k3-dspark-pd-prefill" in out and "decode kimi-k3-dspark-pd-decode" in out


@pytest.mark.parametrize("case, code, expected", [
    ("clean-mla-dcp-relayout", 0, "no findings"),
    ("error-decode-dcp-gqa", 3, "PD decode DCP requires an MLA or hybrid-MLA KV pool"),
    ("error-decode-dcp-topology", 3, "Unsupported PD DCP topology: 2 -> 1"),
    ("error-replicated-kv", 3, "not (tp_ratio < 0 and is_kv_replicated)"),
])
def test_prefill_decode_dcp_pairs(case, code, expected):
    cases = ROOT / "tests" / "deploy" / "cases" / case
    out = cli("check", cases / "prefill.yaml", cases / "decode.yaml", "--json", code=code).output
    assert (expected in out) == (code == 3), out


@pytest.mark.parametrize("role, code", [("prefill", 0), ("decode", 3)])
def test_sglang_runs_dspark_under_pp_on_prefill_nodes_only(tmp_path, role, code):
    """check_pipeline_parallel_compat: pipeline-parallel DSPARK requires disaggregation-mode
    prefill (export refused the prefill instance too)."""
    spec = small("sglang", "{tp: 2, pp: 2}", "{method: dspark, num_steps: 3}", behaviour="specplan")
    out = cli("export", write(tmp_path, spec + f"disaggregation: {{role: {role}}}\n"), code=code).output
    assert ("--disaggregation-mode prefill" in out) if code == 0 else True


def _release(version: str, topology: str, speculative: str = "{method: none}") -> str:
    return (f"name: r\nengine: sglang\nengine_version: \"{version}\"\ntopology: {topology}\n"
            f"model: {{num_layers: 16, hidden_size: 64, vocab_size: 128}}\nspeculative: {speculative}\n")


@pytest.mark.parametrize("version, code", [("0.5.20", 3), ("0.5.21", 0), ("0.5.23", 0)])
def test_sglang_0_5_20_runs_no_speculative_decoding_under_pp(tmp_path, version, code):
    """Issue 37: 0.5.20's check_server_args refuses every speculative algorithm under PP on
    CUDA; export refuses it (exit 3) instead of setting SGLANG_ENABLE_PP_SPEC, which 0.5.20
    lacks. tests/engines/test_release_rules.py runs each release's own function."""
    spec = write(tmp_path, _release(version, "{tp: 2, pp: 2}", "{method: eagle, num_steps: 2}"))
    out = cli("check", spec, "--json", code=code).output
    exported = cli("export", spec, code=code)
    if code:
        assert f"SGLang {version} runs no speculative decoding under pipeline parallel (pp=2)" in out
        assert "check_server_args" in exported.output and "SGLANG_ENABLE_PP_SPEC" not in exported.output
    else:
        assert "export SGLANG_ENABLE_PP_SPEC=1" in exported.output


@pytest.mark.parametrize("topology", ["{tp: 2, dp: 2, cp: 2}", "{tp: 4, dp: 2, cp: 4}"])
@pytest.mark.parametrize("version, code", [("0.5.20", 2), ("0.5.21", 2), ("0.5.22", 0), ("0.5.23", 0)])
def test_sglang_cp_counts_plain_dp_replicas_before_0_5_22(tmp_path, topology, version, code):
    """Issue 37: 0.5.20 / 0.5.21 handle_context_parallelism assert tp % (dp_size * attn_cp) with
    plain DP replicas counted; 0.5.22 on count DP-attention's only (attn_dp_size)."""
    res = cli("check", write(tmp_path, _release(version, topology)), code=code)
    if code:
        assert f"SGLang {version} counts every DP replica here" in res.output
        assert "handle_context_parallelism: tp_size % (dp_size * attn_cp_size)" in res.output


def test_vllm_eplb_process_group_is_in_explain(tmp_path):
    """Issue 37: vLLM's initialize_model_parallel builds an `eplb` group of the EP group's ranks
    under --enable-eplb, right after ep (tests/engines/test_vllm_group_order.py runs it)."""
    import json

    moe = ", moe: {num_experts: 8, top_k: 2, eplb: true}"
    spec = write(tmp_path, small("vllm", "{tp: 2, dp: 2, ep: 4}", model=moe))
    got = json.loads(cli("explain", spec, "--json", code=0).stdout)
    names = list(got["groups"])
    assert names[names.index("ep") + 1] == "eplb" and "eplb" not in got["aliases"]
    assert got["groups"]["eplb"] == got["groups"]["ep"] == [[0, 1, 2, 3]]
    off = write(tmp_path, small("vllm", "{tp: 2, dp: 2, ep: 4}", model=moe.replace("true", "false")), "off.yaml")
    assert "eplb" not in json.loads(cli("explain", off, "--json", code=0).stdout)["groups"]


PD = [  # (engine, connector, prefill topology, decode topology, the engine's words)
    ("sglang", "mooncake", "{tp: 4, dcp: 2}", "{tp: 2, dcp: 2}", "PD peers must connect matching DCP ranks"),
    ("vllm", "nixl_push", "{tp: 2}", "{tp: 2, dcp: 2}",
     "NixlPushConnector does not support decode_context_parallel_size > 1."),
    ("vllm", "nixl_push", "{tp: 2, dcp: 2}", "{tp: 2}",
     "NixlPushConnector does not support decode_context_parallel_size > 1."),
    ("vllm", "nixl", "{tp: 6, dcp: 3}", "{tp: 2, dcp: 2}", "DCP sizes must divide one another"),
]


@pytest.mark.parametrize("engine, connector, prefill, decode, words", PD, ids=lambda x: str(x))
def test_pd_dcp_pairs_the_engines_refuse(tmp_path, engine, connector, prefill, decode, words):
    """Issue 37: three prefill/decode DCP pairs specplan planned and the engines refuse (the
    engines' own functions: tests/deploy/test_handoff_engines.py)."""
    model = "model: {num_layers: 8, hidden_size: 64, vocab_size: 512, attention: mla}\n"
    pd = write(tmp_path, f"name: pd\nengine: {engine}\n{model}connector: {connector}\ninstances:\n"
                         f"  prefill: {{name: p, topology: {prefill}}}\n  decode: {{name: d, topology: {decode}}}\n")
    out = cli("check", pd, "--json", code=3).output
    assert words in out, out


def test_sglang_families_at_tp_1_alias_tp_and_dcp_follows_tp(tmp_path):
    """Issue 37: SGLang's initialize_model_parallel reuses the tp communicator for every family
    as wide as tp, at tp 1 too (`_ATTN_TP = _TP`, ...), and builds the dcp groups right after tp
    (only when dcp > 1)."""
    import json

    one = write(tmp_path, small("sglang", "{tp: 1, pp: 2}"), "one.yaml")
    got = json.loads(cli("explain", one, "--json", code=0).stdout)
    assert got["aliases"] == {f: "tp" for f in ("attn_cp", "attn_tp", "moe_dp", "moe_ep", "moe_tp")}
    assert "attn_tp (= tp)" in cli("explain", one, "--all-families", code=0).output
    dcp = write(tmp_path, small("sglang", "{tp: 4, dcp: 2}", model=", attention: mla"), "dcp.yaml")
    names = list(json.loads(cli("explain", dcp, "--json", code=0).stdout)["groups"])
    assert names[:3] == ["tp", "dcp", "attn_cp"]
