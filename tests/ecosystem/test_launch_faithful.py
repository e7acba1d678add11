"""Export of an imported line: what specplan adds, an edited spec, and the flags it models."""

from __future__ import annotations

import json

import pytest

from specplan.ecosystem.argv import read_words
from specplan.engines import convention
from specplan.engines.flag_table import FlagProblem
from specplan.schema import load_spec

LLAMA = {"num_hidden_layers": 32, "hidden_size": 4096, "vocab_size": 128256}
DSV3 = {"num_hidden_layers": 61, "hidden_size": 7168, "vocab_size": 129280,
        "n_routed_experts": 256, "num_experts_per_tok": 8, "num_nextn_predict_layers": 1}


@pytest.fixture
def hub(tmp_path):
    """A local Hugging Face cache holding two configs (never the network)."""
    for hub_id, config in (("org/llama", LLAMA), ("deepseek-ai/DeepSeek-V3", DSV3)):
        snap = tmp_path / "hf" / "hub" / f"models--{hub_id.replace('/', '--')}" / "snapshots" / "r1"
        snap.mkdir(parents=True)
        (snap / "config.json").write_text(json.dumps(config))
    return {"HF_HOME": str(tmp_path / "hf")}


def _import(cli, tmp_path, hub, engine, line):
    out = tmp_path / "s.yaml"
    result = cli("import", "--engine", engine, "-o", str(out), "--", *line.split(), env=hub)
    assert result.exit_code == 0, result.stderr
    return out, result.stderr


def test_what_specplan_adds_follows_its_header(cli, tmp_path, hub):
    line = ("python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 4 "
            "--pp-size 2 --speculative-algorithm EAGLE3 --speculative-num-steps 2 "
            "--speculative-eagle-topk 1 --speculative-num-draft-tokens 3 --nnodes 1")
    spec, _ = _import(cli, tmp_path, hub, "sglang", line.replace("EAGLE3", "EAGLE"))
    out = cli("export", str(spec)).stdout
    lines = out.splitlines()
    added = lines.index("# added by specplan:")
    assert lines[added + 1].startswith("export SGLANG_ENABLE_PP_SPEC=1  # ")
    assert lines[-1] == line.replace("EAGLE3", "EAGLE")  # the user's words, untouched


def test_a_draft_path_the_spec_lacks_is_a_variable_not_a_value(cli, tmp_path, hub):
    line = ("python3 -m sglang.launch_server --model-path org/llama --speculative-algorithm "
            "EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 1 "
            "--speculative-num-draft-tokens 4")
    spec, _ = _import(cli, tmp_path, hub, "sglang", line)
    out = cli("export", str(spec)).stdout
    assert "#   --speculative-draft-model-path \"$DRAFT_MODEL_PATH\": speculative.draft_path is unset" in out
    assert out.endswith(line + ' \\\n  --speculative-draft-model-path "$DRAFT_MODEL_PATH"\n')
    script = tmp_path / "x.sh"
    script.write_text(out)
    again = cli("import", "--engine", "sglang", "-f", str(script), "-o", str(tmp_path / "b.yaml"), env=hub)
    assert again.exit_code == 0, again.stderr
    assert load_spec(tmp_path / "b.yaml").engine_args == load_spec(spec).engine_args


def test_an_edited_spec_is_exported_in_specplan_spelling_keeping_the_rest(cli, tmp_path, hub):
    spec, notes = _import(cli, tmp_path, hub, "vllm",
                          "vllm serve org/llama -tp 2 --disable-log-stats --max-num-seqs 64")
    assert notes.splitlines()[:2] == ["specplan import: kept, not planned: --disable-log-stats",
                                      "specplan import: kept, not planned: --max-num-seqs 64"]
    spec.write_text(spec.read_text().replace("tp: 2", "tp: 4"))
    out = cli("export", str(spec)).stdout
    assert "differs from the launch line it was imported from at topology.tp" in out
    assert "--tensor-parallel-size 4" in out and "-tp 2" not in out
    assert "  --disable-log-stats" in out and "  --max-num-seqs 64" in out


def test_modelled_flags_land_in_their_keys(cli, tmp_path, hub):
    spec, notes = _import(cli, tmp_path, hub, "vllm",
                          "vllm serve deepseek-ai/DeepSeek-V3 -dp 16 -dpl 8 -ep --all2all-backend "
                          "deepep_low_latency --enable-eplb --async-scheduling --kv-cache-dtype fp8 "
                          "--quantization fp8 --speculative-config.method deepseek_mtp "
                          "--speculative-config.num_speculative_tokens 2")
    s = load_spec(spec)
    assert (s.topology.dp, s.topology.nodes, s.topology.ep) == (16, 2, 16)
    assert (s.model.moe.a2a, s.model.moe.eplb, s.model.kv_cache_dtype, s.model.dtype) == (
        "deepep", True, "fp8_e4m3", "fp8")
    assert s.runtime.async_scheduling is True
    assert (s.speculative.method, s.speculative.num_steps) == ("mtp", 2)
    assert "kept, not planned" not in notes


def test_sglang_eagle_on_an_mtp_checkpoint_is_mtp(cli, tmp_path, hub):
    spec, notes = _import(cli, tmp_path, hub, "sglang",
                          "python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 "
                          "--tp 8 --speculative-algorithm EAGLE --speculative-num-steps 1 "
                          "--speculative-eagle-topk 1 --speculative-num-draft-tokens 2 "
                          "--enable-dp-lm-head --dp 8 --enable-dp-attention "
                          "--disable-overlap-schedule --cuda-graph-max-bs-decode 64")
    s = load_spec(spec)
    assert s.speculative.method == "mtp" and "is MTP" in notes
    assert (s.topology.dp_lm_head, s.runtime.async_scheduling, s.runtime.max_batch) == (True, False, 64)
    assert "older spelling of --attn-dp-size 8" in notes


@pytest.mark.parametrize("engine,words,problem", [
    ("sglang", ["--pp", "2"], "ambiguous option: --pp could match --pp-async-batch-depth, "
     "--pp-max-micro-batch-size, --pp-size"),
    ("sglang", ["--tp-size"], "argument --tp-size: expected one argument"),
    ("sglang", ["--dtype", "bf16"], "argument --dtype: invalid choice: 'bf16'"),
    ("sglang", ["model"], "unrecognized arguments: model"),
    ("vllm", ["m", "n"], "unrecognized arguments: n"),
    ("vllm", ["m", "--compilation-config", "{x"], "argument --compilation-config: not JSON"),
])
def test_the_engines_refusals(engine, words, problem):
    with pytest.raises(FlagProblem) as exc:
        read_words(convention(engine).flag_table(), words)
    assert str(exc.value).startswith(problem)


def test_vllm_spellings():
    table = convention("vllm").flag_table()
    args, values = read_words(table, ["m", "-O", "3", "--tensor_parallel_size=2",
                                      "--compilation-config", '{"mode": 3}',
                                      "--compilation-config.cudagraph_capture_sizes+", "1,2",
                                      "-sc.method=ngram", "--no-enable-expert-parallel"])
    assert values["model_tag"] == "m" and values["optimization_level"] == "3"
    assert values["tensor_parallel_size"] == "2" and values["enable_expert_parallel"] is False
    # the dotted form is appended last, as FlexibleArgumentParser does: it wins over the JSON
    assert values["compilation_config"] == {"cudagraph_capture_sizes": ["1", "2"]}
    assert values["speculative_config"] == {"method": "ngram"}
    assert [a.words for a in args][:2] == [("m",), ("-O", "3")]


def test_a_config_file_is_read_as_the_engines_read_it(cli, tmp_path, hub):
    config = tmp_path / "serve.yaml"
    config.write_text("tensor-parallel-size: 4\nenable-expert-parallel: true\n"
                      "speculative-config:\n  method: deepseek_mtp\n  num_speculative_tokens: 1\n")
    line = f"vllm serve deepseek-ai/DeepSeek-V3 --config {config} -tp 8"
    spec, notes = _import(cli, tmp_path, hub, "vllm", line)
    s = load_spec(spec)
    assert (s.topology.tp, s.topology.ep, s.speculative.method) == (8, 8, "mtp")  # the line wins
    assert f"read 3 options from --config {config}" in notes
    assert cli("export", str(spec)).stdout.splitlines()[-1] == line


def test_unplanned_variables_on_the_line_are_kept(cli, tmp_path, hub):
    line = ("SGLANG_ENABLE_SPEC_V2=1 python3 -m sglang.launch_server --model-path org/llama "
            "--tp 2")
    spec, notes = _import(cli, tmp_path, hub, "sglang", line)
    assert "specplan import: kept, not planned: SGLANG_ENABLE_SPEC_V2=1" in notes.splitlines()
    assert cli("export", str(spec)).stdout.splitlines()[-1] == line


def test_a_sync_edit_adds_the_variable_and_keeps_the_line(cli, tmp_path, hub):
    line = ("python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 "
            "--attn-dp-size 8 --enable-dp-lm-head --speculative-algorithm DSPARK --speculative-dspark-block-size 7 "
            "--speculative-draft-model-path org/dspark")
    spec, _ = _import(cli, tmp_path, hub, "sglang", line)
    assert cli("export", str(spec)).stdout.splitlines()[1:] == [line]  # the engine's default: all
    spec.write_text(spec.read_text().replace("policy: all", "policy: rng"))
    out = cli("export", str(spec)).stdout.splitlines()
    assert out[1:] == ["# added by specplan:", "export SGLANG_SPEC_TP_SYNC=rng  # SpecTpSync "
                       "sites the plan converges: dspark-mem, dspark-target", line]
