"""Spellings retired before the oldest supported release (issue 38 item 1): the generated
tables (engines/<engine>/flags/retired.json, tools/retired_flags.py) and `specplan import`
reading a line written for an older release in the supported spelling, through the CLI."""

from __future__ import annotations

import json

import pytest

from specplan.engines.flag_table import FlagProblem, flag_table
from specplan.engines.releases import RELEASES
from specplan.engines.retired import retired_data
from specplan.schema import load_spec

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 32,
         "hidden_size": 4096, "vocab_size": 128256}
DSV3 = {"architectures": ["DeepseekV3ForCausalLM"], "num_hidden_layers": 61, "hidden_size": 7168,
        "vocab_size": 129280, "n_routed_experts": 256, "num_experts_per_tok": 8,
        "num_nextn_predict_layers": 1, "kv_lora_rank": 512}


@pytest.fixture
def config(tmp_path):
    def write(data, name="config.json"):
        path = tmp_path / name
        path.write_text(json.dumps(data))
        return str(path)
    return write


def _refused_by_every_supported(engine: str, name: str) -> bool:
    for version in RELEASES[engine]:
        try:
            flag_table(engine, version).match(name)
            return False
        except FlagProblem:
            pass
    return True


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_each_retired_spelling_is_one_no_supported_release_reads(engine):
    data = retired_data(engine)
    assert data["supported"] == RELEASES[engine][0] and len(data["releases"]) >= 7
    assert set(data["names"]) == set(data["releases"])
    order = [*data["releases"], data["supported"]]
    for row in data["retired"]:
        assert all(_refused_by_every_supported(engine, n) for n in row["names"] if n != "-O"), row
        assert order.index(row["retired_in"]) == order.index(row["last"]) + 1, row
        kind = (row.get("replacement") or {}).get("kind")
        if kind in ("renamed", "sets", "code"):  # a supported flag: one the oldest reads
            flag = row["replacement"].get("flag") or row["replacement"]["assign"][0][0]
            flag_table(engine, data["supported"]).match(flag)


def test_the_issue_s_spellings_are_in_the_tables():
    sglang, vllm = retired_data("sglang"), retired_data("vllm")
    names = {n: r for r in sglang["retired"] for n in r["names"]}
    assert names["--enable-deepep-moe"]["replacement"] == {
        "kind": "code", "assign": [["--moe-a2a-backend", "deepep"]]}
    assert names["--disable-piecewise-cuda-graph"]["replacement"]["kind"] == "sets"
    keys = {n: r["replacement"] for r in vllm["retired"] for n in r["names"]}
    assert keys["--speculative-model"] == {"kind": "key", "flag": "--speculative-config", "key": "model"}
    assert keys["--speculative-draft-tensor-parallel-size"]["key"] == "draft_tensor_parallel_size"


def test_an_abbreviation_an_older_parser_read_is_modernised(cli, config, tmp_path):
    out = tmp_path / "s.yaml"
    result = cli("import", "--engine", "sglang", "--model-config", config(LLAMA), "-o", str(out),
                 "--", "python3", "-m", "sglang.launch_server", "--model", "m",
                 "--speculative-algo", "EAGLE", "--speculative-draft", "org/eagle",
                 "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                 "--speculative-num-draft-tokens", "4")
    assert result.exit_code == 0, result.stderr
    assert ("written for SGLang <= 0.4.10: `--speculative-draft` is "
            "`--speculative-draft-model-path` since 0.5.2") in result.stderr
    spec = load_spec(out)
    assert spec.speculative.draft_path == "org/eagle"
    assert "--speculative-draft-model-path org/eagle" in spec.engine_args
    exported = cli("export", str(out))
    assert "--speculative-draft-model-path org/eagle" in exported.stdout
    assert "--speculative-draft " not in exported.stdout


def test_strict_keeps_the_supported_releases_refusal(cli, config):
    result = cli("import", "--engine", "sglang", "--model-config", config(LLAMA), "--strict", "--",
                 "python3", "-m", "sglang.launch_server", "--model", "m", "--speculative-draft", "x")
    assert result.exit_code == 2
    assert "ambiguous option: --speculative-draft could match" in result.stderr
    assert "--strict" in result.stderr and "written for" not in result.stderr


def test_vllm_speculative_flags_become_speculative_config_keys(cli, config, tmp_path):
    out = tmp_path / "s.yaml"
    result = cli("import", "--engine", "vllm", "--model-config", config(LLAMA), "-o", str(out),
                 "--", "vllm", "serve", "m", "--speculative_model", "[ngram]",
                 "--num_speculative_tokens", "5", "--ngram_prompt_lookup_max", "4")
    assert result.exit_code == 0, result.stderr
    assert "`--speculative_model` is `--speculative-config` key `model` since 0.8.5" in result.stderr
    spec = load_spec(out)
    assert (spec.speculative.method, spec.speculative.num_steps) == ("ngram", 5)
    assert spec.engine_args[-1] == ("--speculative-config '{\"model\": \"[ngram]\", "
                                    "\"num_speculative_tokens\": 5, \"prompt_lookup_max\": 4}'")


def test_retired_keys_merge_into_a_json_flag_written_with_equals(cli, config, tmp_path):
    # `--speculative-config='{"method": ...}'`: one word, spaces in its JSON (argparse reads
    # it as the option and its value); the retired flag's key joins that object.
    out = tmp_path / "s.yaml"
    result = cli("import", "--engine", "vllm", "--model-config", config(LLAMA), "-o", str(out),
                 "--", "vllm", "serve", "m", '--speculative-config={"model": "d", "method": "eagle"}',
                 "--num-speculative-tokens", "3")
    assert result.exit_code == 0, result.stderr
    spec = load_spec(out)
    assert (spec.speculative.method, spec.speculative.num_steps) == ("eagle", 3)
    assert spec.engine_args[-1] == ("'--speculative-config={\"num_speculative_tokens\": 3, "
                                    "\"model\": \"d\", \"method\": \"eagle\"}'")
    exported = cli("export", str(out))
    assert exported.stdout.splitlines()[-1] == (
        "vllm serve m '--speculative-config={\"num_speculative_tokens\": 3, \"model\": \"d\", "
        "\"method\": \"eagle\"}'")


def test_a_flag_its_release_set_through_post_init_is_written_as_that(cli, config, tmp_path):
    out = tmp_path / "s.yaml"
    result = cli("import", "--engine", "sglang", "--model-config", config(DSV3), "-o", str(out),
                 "--", "python3", "-m", "sglang.launch_server", "--model-path", "m", "--tp", "8",
                 "--enable-ep-moe")
    assert result.exit_code == 0, result.stderr
    assert "`--enable-ep-moe` is `--ep-size 8` since 0.5.5" in result.stderr
    assert load_spec(out).topology.ep == 8


def test_a_flag_whose_meaning_was_split_is_refused_with_both_meanings(cli, config, monkeypatch):
    # The generated tables hold no such flag today (--cuda-graph-max-bs looks split into
    # -decode / -prefill, but SGLang 0.5.15 to 0.5.19 kept it as the -decode alias): a table
    # row of that kind, as tools/retired_flags.py writes one, with the SGLang 0.4.10 name list.
    import specplan.ecosystem.retired as retired

    real = retired_data("sglang")
    row = {"names": ["--cuda-graph-max-bs"], "dest": "cuda_graph_max_bs", "nargs": "1",
           "help": "Set the maximum batch size for cuda graph.", "first": "0.4.10",
           "last": "0.4.10", "retired_in": "0.5.2",
           "replacement": {"kind": "split", "flags": ["--cuda-graph-max-bs-decode",
                                                        "--cuda-graph-max-bs-prefill"],
                           "help": {"--cuda-graph-max-bs-decode": "decode graphs",
                                    "--cuda-graph-max-bs-prefill": "prefill graphs"}}}
    table = {**real, "releases": ["0.4.10"], "names": {"0.4.10": real["names"]["0.4.10"]},
             "retired": [row]}
    monkeypatch.setattr(retired, "retired_data", lambda engine: table)
    result = cli("import", "--engine", "sglang", "--model-config", config(LLAMA), "--",
                 "python3", "-m", "sglang.launch_server", "--model-path", "m",
                 "--cuda-graph-max-bs", "8")
    assert result.exit_code == 2
    assert ("written for SGLang <= 0.4.10: `--cuda-graph-max-bs` changed meaning in 0.5.2: it "
            "meant 'Set the maximum batch size for cuda graph.' (SGLang 0.4.10); its place is now "
            "taken by `--cuda-graph-max-bs-decode`: decode graphs; `--cuda-graph-max-bs-prefill`: "
            "prefill graphs") in result.stderr, result.stderr


def test_an_older_release_alias_reads_as_the_flag_it_named(cli, config, tmp_path):
    out = tmp_path / "s.yaml"
    result = cli("import", "--engine", "sglang", "--model-config", config(LLAMA), "-o", str(out),
                 "--", "python3", "-m", "sglang.launch_server", "--model-path", "m",
                 "--cuda-graph-max-bs", "8", "--disable-piecewise-cuda-graph")
    assert result.exit_code == 0, result.stderr
    assert ("written for SGLang <= 0.5.19: `--cuda-graph-max-bs` is `--cuda-graph-max-bs-decode` "
            "since 0.5.20") in result.stderr
    assert ("`--disable-piecewise-cuda-graph` is `--cuda-graph-backend-prefill disabled` since "
            "0.5.20") in result.stderr
    assert load_spec(out).runtime.max_batch == 8


MTP = ["--speculative-config", '{"method": "deepseek_mtp", "num_speculative_tokens": 1}']


def test_a_flag_another_flag_turns_on_is_dropped_only_beside_it(cli, config, tmp_path):
    """vLLM 0.9.2's help of `--enable-reasoning`: "When `--reasoning-parser` is specified,
    reasoning mode is automatically enabled." (retired.json `implied`)."""
    out = tmp_path / "s.yaml"
    line = ["vllm", "serve", "m", "--tensor-parallel-size", "8", *MTP, "--enable-reasoning"]
    result = cli("import", "--engine", "vllm", "--model-config", config(DSV3), "-o", str(out),
                 "--", *line, "--reasoning-parser", "deepseek_r1")
    assert result.exit_code == 0, result.stderr
    assert ("written for vLLM <= 0.9.2: `--enable-reasoning` was retired in 0.10.2; "
            "`--reasoning-parser`, on the line, turns it on") in result.stderr
    args = " ".join(load_spec(out).engine_args)
    assert "--reasoning-parser deepseek_r1" in args and "--enable-reasoning" not in args
    alone = cli("import", "--engine", "vllm", "--model-config", config(DSV3), "--", *line)
    assert alone.exit_code == 2
    assert "`--reasoning-parser` is not on the line" in alone.stderr


def test_a_flag_its_release_moved_into_hf_overrides_is_that_key():
    """vLLM 0.11.0's ModelConfig.__post_init__: `if self.rope_scaling: hf_override =
    {"rope_scaling": self.rope_scaling}; hf_overrides_kw.update(hf_override)` (read by
    tools/retired_flags.py hf_override_mappings); 0.12.0's parser has no --rope-scaling."""
    rows = {n: r for r in retired_data("vllm")["retired"] for n in r["names"]}
    rope = rows["--rope-scaling"]
    assert (rope["last"], rope["retired_in"]) == ("0.11.0", "0.12.0")
    assert rope["replacement"] == {"kind": "key", "flag": "--hf-overrides", "key": "rope_scaling",
                                   "from": "post_init"}
    assert rows["--rope-theta"]["replacement"]["key"] == "rope_theta"


def test_the_retired_connectors_name_what_the_supported_factory_registers():
    from specplan.engines.vllm.launch import REGISTERED_CONNECTORS

    rows = {r["name"]: r for r in retired_data("vllm")["connectors"]}
    assert not set(rows) & REGISTERED_CONNECTORS
    assert rows["SharedStorageConnector"]["replacement"]["name"] == "ExampleConnector"
    assert (rows["SharedStorageConnector"]["last"], rows["SharedStorageConnector"]["retired_in"]) \
        == ("0.12.0", "0.13.0")
    assert rows["LMCacheConnector"]["replacement"]["kind"] == "v1"
    assert rows["LMCacheConnector"]["replacement"]["name"] == "LMCacheConnectorV1"
    for row in rows.values():
        assert row["replacement"] is None or row["replacement"]["name"] in REGISTERED_CONNECTORS


def test_a_reused_connector_name_is_the_old_release_s_other_connector():
    rows = {r["name"]: r for r in retired_data("vllm")["reused_connectors"]}
    mooncake = rows["MooncakeConnector"]
    assert (mooncake["class"], mooncake["last"], mooncake["retired_in"], mooncake["v0"]) \
        == ("SimpleConnector", "0.9.2", "0.10.2", True)
    assert mooncake["now_module"].endswith("v1.mooncake.mooncake_connector")
    assert rows["MooncakeStoreConnector"]["reused_in"] == "0.25.0"


MOONCAKE = ["--kv-transfer-config", '{"kv_connector": "MooncakeConnector", "kv_role": "kv_producer"}']


@pytest.mark.parametrize("older, said", [
    (["--enable-reasoning", "--reasoning-parser", "deepseek_r1"],
     "written for vLLM <= 0.9.2: kv_connector `MooncakeConnector` was vLLM 0.7.3 to 0.9.2's "
     "SimpleConnector (simple_connector.py, a V0 engine connector, a KVConnectorBase, retired in "
     "0.10.2); vLLM 0.13.0 registers the name again for the V1 engine's MooncakeConnector "
     "(mooncake_connector.py), read here as that"),
    ([], None),
], ids=["written-for-0.9", "supported"])
def test_a_line_of_a_release_whose_mooncake_connector_was_v0_says_so(cli, config, tmp_path, older, said):
    out = tmp_path / "s.yaml"
    result = cli("import", "--engine", "vllm", "--model-config", config(LLAMA), "-o", str(out),
                 "--", "vllm", "serve", "m", *older, *MOONCAKE)
    assert result.exit_code == 0, result.stderr
    assert load_spec(out).disaggregation.connector == "mooncake"
    notes = " ".join(result.stderr.split())
    if said:
        assert said in notes
    else:
        assert "MooncakeConnector` was" not in notes and "written for" not in notes


ROPE = ["--rope-scaling", '{"rope_type": "yarn", "factor": 4.0}']


def test_rope_scaling_merges_into_the_line_s_own_hf_overrides(cli, config, tmp_path):
    out = tmp_path / "s.yaml"
    result = cli("import", "--engine", "vllm", "--model-config", config(LLAMA), "-o", str(out),
                 "--", "vllm", "serve", "m", *ROPE, "--hf-overrides", '{"max_position_embeddings": 8}')
    assert result.exit_code == 0, result.stderr
    assert ("written for vLLM <= 0.11.0: `--rope-scaling` is `--hf-overrides` key `rope_scaling` "
            "since 0.12.0 (vLLM 0.11.0's ModelConfig.__post_init__ puts it there itself)") in result.stderr
    assert load_spec(out).engine_args[-1] == ("--hf-overrides '{\"rope_scaling\": {\"rope_type\": "
                                             "\"yarn\", \"factor\": 4.0}, \"max_position_embeddings\": 8}'")


@pytest.mark.parametrize("line, refusal", [
    (ROPE, "unknown vllm flag --rope-scaling"),
    (["--kv-transfer-config", '{"kv_connector": "SharedStorageConnector", "kv_role": "kv_both"}'],
     "kv_connector 'SharedStorageConnector' is not a connector vLLM registers"),
])
def test_strict_keeps_the_refusal_of_a_retired_flag_or_connector(cli, config, line, refusal):
    result = cli("import", "--engine", "vllm", "--model-config", config(LLAMA), "--strict", "--",
                 "vllm", "serve", "m", *line)
    assert result.exit_code == 2 and refusal in result.stderr, result.stderr
    assert "written for" not in result.stderr and "Traceback" not in result.stderr


def test_a_retired_connector_inside_multiconnector_is_modernised_as_written(cli, config, tmp_path):
    value = ('{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":'
             '{"connectors":[{"kv_connector":"LMCacheConnector","kv_role":"kv_both"}]}}')
    out = tmp_path / "s.yaml"
    result = cli("import", "--engine", "vllm", "--model-config", config(LLAMA), "-o", str(out),
                 "--", "vllm", "serve", "m", f"--kv-transfer-config={value}")
    assert result.exit_code == 0, result.stderr
    assert "written for vLLM <= 0.9.2: kv_connector `LMCacheConnector` is `LMCacheConnectorV1` " \
           "since 0.10.2" in result.stderr
    modern = value.replace('"LMCacheConnector"', '"LMCacheConnectorV1"')
    assert f"--kv-transfer-config={modern}" in " ".join(load_spec(out).engine_args).replace("'", "")


@pytest.mark.parametrize("theta", [{"rope_theta": 500000.0},
                                   {"rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}}])
def test_the_checkpoint_s_rope_theta_goes_into_the_moved_rope_scaling(cli, config, tmp_path, theta):
    """vLLM 0.30.0+ (transformers 5) replace rope_parameters whole with a dict rope_scaling
    override; vLLM 0.11.0 kept rope_theta beside it (engines/vllm/launch.py HF_OVERRIDE_REPLACES):
    the model's own rope_theta (a transformers 4 or 5 config.json) is put in, as 0.11.0 ran it."""
    out = tmp_path / "s.yaml"
    result = cli("import", "--engine", "vllm", "--model-config", config({**LLAMA, **theta}),
                 "-o", str(out), "--", "vllm", "serve", "m", *ROPE)
    assert result.exit_code == 0, result.stderr
    assert "--hf-overrides rope_scaling: rope_theta 500000.0 from the model's config.json" in result.stderr
    assert load_spec(out).engine_args[-1] == ("--hf-overrides '{\"rope_scaling\": {\"rope_theta\": "
                                             "500000.0, \"rope_type\": \"yarn\", \"factor\": 4.0}}'")
    exported = cli("export", str(out))
    assert '"rope_theta": 500000.0' in exported.stdout
    mine = cli("import", "--engine", "vllm", "--model-config", config({**LLAMA, **theta}), "--",
               "vllm", "serve", "m", "--hf-overrides", '{"rope_scaling": {"factor": 4.0}}')
    assert mine.exit_code == 0 and "rope_theta" not in mine.stderr  # a modern line is the user's own


def test_a_retired_connector_nothing_replaced_is_refused_naming_its_releases(cli, config):
    value = '{"kv_connector": "PyNcclConnector", "kv_role": "kv_producer"}'
    result = cli("import", "--engine", "vllm", "--model-config", config(LLAMA), "--",
                 "vllm", "serve", "m", "--kv-transfer-config", value)
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert ("--kv-transfer-config kv_connector 'PyNcclConnector' is not a connector vLLM registers "
            "(written for vLLM <= 0.9.2: kv_connector `PyNcclConnector` was retired in 0.10.2 and no "
            "supported connector took its place; simple_connector.py registered it in 0.7.3 to "
            "0.9.2)") in result.stderr, result.stderr


def test_a_json_key_older_releases_read_is_refused_naming_them(cli, config):
    """retired.json `keys`: vLLM 0.8.5-0.11.0's SpeculativeConfig had disable_logprobs (the
    config class its parser validated against), no supported release's has."""
    rows = {(r["flag"], r["key"]): r for r in retired_data("vllm")["keys"]}
    assert rows[("--speculative-config", "disable_logprobs")]["retired_in"] == "0.12.0"
    assert ("--speculative-config", "draft_pipeline_parallel_size") not in rows  # no release had it
    line = ["vllm", "serve", "m", "--speculative-config",
            '{"method": "ngram", "num_speculative_tokens": 3, "disable_logprobs": false}']
    result = cli("import", "--engine", "vllm", "--model-config", config(LLAMA), "--", *line)
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert "unknown --speculative-config key 'disable_logprobs'" in result.stderr
    assert ("written for vLLM <= 0.11.0: --speculative-config key `disable_logprobs` was retired in "
            "0.12.0 (vLLM 0.8.5 to 0.11.0 had it); no supported key took its place") in result.stderr
    strict = cli("import", "--engine", "vllm", "--model-config", config(LLAMA), "--strict", "--", *line)
    assert strict.exit_code == 2 and "written for" not in strict.stderr
