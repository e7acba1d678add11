"""`specplan import`: hand-written launch lines to specs, unknown flags, and round trips.

Round trips never skip: each (spec, engine) pair either round-trips or is listed in REFUSED
with its reason, so an export that refused everything would fail.
"""

from __future__ import annotations

from pathlib import Path

import json
import shlex

import pytest

from specplan.ecosystem.launch_import import parse_script
from specplan.schema import load_spec

SPECS = sorted((Path(__file__).resolve().parents[2] / "specs").glob("*.yaml"))

DSV4 = {"num_hidden_layers": 61, "hidden_size": 7168, "vocab_size": 129280,
        "n_routed_experts": 256, "num_experts_per_tok": 8}


@pytest.fixture
def checkpoint(tmp_path):
    folder = tmp_path / "DeepSeek-V4"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(DSV4))
    return folder


def _load(tmp_path, text):
    path = tmp_path / "imported.yaml"
    path.write_text(text)
    return load_spec(path)


def test_sglang_line_with_env(cli, tmp_path, checkpoint):
    result = cli("import", "--engine", "sglang", "--", "SGLANG_SPEC_TP_SYNC=all,-dspark-plan",
                 "python", "-m", "sglang.launch_server", "--model-path", str(checkpoint),
                 "--tp-size", "8", "--dp-size", "8", "--enable-dp-attention", "--ep-size", "8",
                 "--speculative-algorithm", "DSPARK", "--speculative-dspark-block-size=7",
                 "--speculative-draft-model-path", "org/dspark-draft", "--port", "30000",
                 env={"SGLANG_SOMETHING_ELSE": "1"})
    assert result.exit_code == 0, result.stderr
    spec = _load(tmp_path, result.stdout)
    assert spec.name == "deepseek-v4" and spec.engine == "sglang" and spec.behaviour == "engine"
    t = spec.topology
    assert (t.tp, t.dp, t.dp_attention, t.ep) == (8, 8, True, 8)
    assert (spec.model.num_layers, spec.model.moe.num_experts, spec.model.path) == (
        61, 256, str(checkpoint))
    s = spec.speculative
    assert (s.method, s.num_steps, s.draft_path) == ("dspark", 7, "org/dspark-draft")
    assert spec.sync.policy == "all" and spec.sync.sites == {"dspark_plan": "off"}
    assert "ignored SGLANG_SOMETHING_ELSE" in result.stderr


def test_vllm_line_with_env(cli, tmp_path, checkpoint):
    config = json.dumps({"method": "deepseek_mtp", "num_speculative_tokens": 2})
    result = cli("import", "--engine", "vllm", "--name", "dsv4-vllm", "--",
                 "vllm", "serve", str(checkpoint), "-tp", "4", "-pp", "2", "--dtype", "bfloat16",
                 "--speculative-config", config,
                 env={"VLLM_PP_LAYER_PARTITION": "31,30", "VLLM_USE_V2_MODEL_RUNNER": "1"})
    assert result.exit_code == 0, result.stderr
    spec = _load(tmp_path, result.stdout)
    assert (spec.name, spec.engine, spec.topology.tp, spec.topology.pp) == ("dsv4-vllm", "vllm", 4, 2)
    assert spec.model.pp_partition == [31, 30]
    assert (spec.speculative.method, spec.speculative.num_steps) == ("mtp", 2)


def test_writes_atomically_to_out(cli, tmp_path, checkpoint):
    out = tmp_path / "x.yaml"
    result = cli("import", "--engine", "vllm", "-o", str(out), "--",
                 "vllm", "serve", str(checkpoint), "--tensor-parallel-size=2")
    assert result.exit_code == 0 and result.stdout == ""
    assert load_spec(out).topology.tp == 2
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".specplan-")] == []


@pytest.mark.parametrize("engine,argv,message", [
    ("sglang", ["--tp-szie", "8"], "unknown sglang flag --tp-szie; did you mean --tp-size or --pp-size or --ep-size?"),
    ("vllm", ["vllm", "serve", "m", "--tensor-paralel-size", "2"],
     "unknown vllm flag --tensor-paralel-size; did you mean --tensor-parallel-size or "
     "--data-parallel-size or --pipeline-parallel-size?"),
    ("sglang", ["--t", "8"], "ambiguous option: --t could match"),
    ("vllm", ["vllm", "serve", "m", "-sc", '{"method": "eagle3", "num_spec_tokens": 3}'],
     "unknown --speculative-config key 'num_spec_tokens'; did you mean num_speculative_tokens"),
    ("sglang", ["--tp-size", "8", "--speculative-algorithm", "UNO"],
     "--speculative-algorithm UNO: specplan plans EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM, "
     "DFLASH, DSPARK"),
    ("sglang", ["--tp-size", "8"], "the launch line does not give the model's shape "
     "(num_layers, hidden_size, vocab_size): pass --base SPEC, --model-config config.json, "
     "or a local model path"),
])
def test_bad_lines_exit_2(cli, engine, argv, message):
    result = cli("import", "--engine", engine, "--", *argv)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"specplan import: {message}")


def test_parse_script_reads_plain_lines():
    env, argv = parse_script("export VLLM_PP_LAYER_PARTITION=8,8\n"
                             "VLLM_USE_V2_MODEL_RUNNER=1 vllm serve m \\\n  -tp 2  # two GPUs\n")
    assert env == {"VLLM_PP_LAYER_PARTITION": "8,8"}
    assert argv == ["VLLM_USE_V2_MODEL_RUNNER=1", "vllm", "serve", "m", "-tp", "2"]


def _flag_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith("#")]


SGLANG_LINE = ["python", "-m", "sglang.launch_server", "--model-path", "org/qwen3-next",
               "--tp-size", "8", "--attn-dp-size", "4", "--ep-size", "8",
               "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3",
               "--speculative-eagle-topk", "2", "--speculative-num-draft-tokens", "6"]
VLLM_LINE = ["vllm", "serve", "org/qwen3", "-tp", "2", "-dp", "2", "-pcp", "2", "-pp", "2",
             "--speculative-config", '{"method":"eagle3","model":"org/eagle3","num_speculative_tokens":5}']


@pytest.mark.parametrize("engine,line", [("sglang", SGLANG_LINE), ("vllm", VLLM_LINE)])
def test_export_of_import_gives_the_same_flags(cli, tmp_path, engine, line):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(DSV4))
    spec = tmp_path / "s.yaml"
    first = cli("import", "--engine", engine, "--model-config", str(config), "-o", str(spec),
                "--", *line)
    assert first.exit_code == 0, first.stderr
    script = cli("export", str(spec)).stdout
    _, argv = parse_script(script)
    assert argv == line  # the user's words, in the user's spelling and order
    assert shlex.join(line) in script.splitlines()


# Every (spec, engine) export refuses, with a piece of its reason; every other pair must
# round-trip. A stale entry or an export that starts refusing a pair fails.
REFUSED = {
    ("deepseek-v4-dspark-tp16-dp8", "sglang"): "DSpark worker requires attn_tp == 1",
    ("kimi-k3-dspark-tp8-pp2", "sglang"): "DSpark under pipeline parallel only on PD prefill",
    ("llama-3.2-1b-eagle3-pp2", "sglang"): "only with EAGLE or NEXTN (single-layer), not eagle3",
    ("llama-3.2-1b-eagle3-pp4", "sglang"): "only with EAGLE or NEXTN (single-layer), not eagle3",
    ("qwen3-32b-eagle3-dp2-pp2-cp2", "sglang"): "multi-node data-parallel replicas are not supported",
}
PAIRS = [(spec, engine) for spec in SPECS for engine in ("sglang", "vllm")]
ROUND_TRIPS = [(spec, engine) for spec, engine in PAIRS if (spec.stem, engine) not in REFUSED]


def test_round_trips_outnumber_refusals():
    assert set(REFUSED) <= {(spec.stem, engine) for spec, engine in PAIRS}
    assert len(PAIRS) == 2 * len(SPECS) >= 18
    assert len(ROUND_TRIPS) == len(PAIRS) - len(REFUSED) >= 13


@pytest.mark.parametrize("spec,engine", [p for p in PAIRS if p not in ROUND_TRIPS],
                         ids=lambda x: getattr(x, "stem", x))
def test_export_refuses_what_the_engine_cannot_run(cli, spec, engine):
    script = cli("export", str(spec), "--engine", engine)
    assert script.exit_code == 3 and script.stdout == ""
    assert REFUSED[(spec.stem, engine)] in script.stderr


@pytest.mark.parametrize("spec,engine", ROUND_TRIPS, ids=lambda x: getattr(x, "stem", x))
def test_import_of_export_gives_the_spec_back(cli, tmp_path, spec, engine):
    script = cli("export", str(spec), "--engine", engine)
    assert script.exit_code == 0, script.stderr
    path = tmp_path / "export.sh"
    path.write_text(script.stdout)
    back = cli("import", "--engine", engine, "-f", str(path), "--base", str(spec))
    assert back.exit_code == 0, back.stderr
    got, want = _load(tmp_path, back.stdout), load_spec(spec)
    if engine == want.engine:
        assert got.model_dump() == want.model_dump()
    else:  # the translated layout: same ranks, the other engine's spelling
        from specplan.ecosystem.translate import translate
        assert got.model_dump() == translate(want, engine)[0].model_dump()
