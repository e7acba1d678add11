"""The engine releases as tables: `engine_version`, and import / export by release.

Release facts used here were measured from the wheels (flags/*.json): SGLang 0.5.20 and 0.5.21
have no --attn-dp-size (DP-attention is --dp-size N --enable-dp-attention there); SGLang
--speculative-skip-dp-mlp-sync exists up to 0.5.22; vLLM --enable-mamba-fine-grained-prefix-cache
only in 0.30.0.
"""

from __future__ import annotations

import json

import pytest

from specplan.engines import convention
from specplan.engines.flag_table import flag_table
from specplan.engines.releases import RELEASES
from specplan.schema import load_spec
from tests.helpers import model_config


DSV3 = {"num_hidden_layers": 61, "hidden_size": 7168, "vocab_size": 129280,
        "n_routed_experts": 256, "num_experts_per_tok": 8, "architectures": ["DeepseekV3ForCausalLM"]}
SPEC = """\
name: dpattn
engine: sglang
{version}topology: {{tp: 8, dp: 4, dp_attention: true}}
model: {{num_layers: 4, hidden_size: 256, vocab_size: 1024}}
"""


@pytest.fixture
def config(tmp_path):
    return str(model_config(tmp_path, DSV3))


def test_every_release_has_its_own_table():
    for engine, versions in RELEASES.items():
        tables = [flag_table(engine, v) for v in versions]
        assert [t.version for t in tables] == list(versions)
        assert len({frozenset(t.options) for t in tables}) == len(versions), engine
    assert "--attn-dp-size" not in flag_table("sglang", "0.5.21").options
    assert "--attn-dp-size" in flag_table("sglang", "0.5.22").options


@pytest.mark.parametrize("command", ["check", "explain"])
def test_a_release_outside_the_table_is_exit_2_listing_the_supported(cli, write_spec, command):
    spec = write_spec(SPEC.format(version='engine_version: "0.5.9"\n'))
    result = cli(command, str(spec))
    assert result.exit_code == 2
    assert ("engine_version: SGLang 0.5.9 is not a supported release; supported: 0.5.20, "
            "0.5.21, 0.5.22, 0.5.23") in result.stderr
    assert "Traceback" not in result.stderr


def test_explain_shows_a_release_that_is_not_the_newest(cli, write_spec):
    old = write_spec(SPEC.format(version='engine_version: "0.5.21"\n'), "old.yaml")
    new = write_spec(SPEC.format(version=""), "new.yaml")
    assert cli("explain", str(old)).stdout.splitlines()[0].startswith("dpattn  engine sglang 0.5.21  world 8")
    assert cli("explain", str(new)).stdout.splitlines()[0].startswith("dpattn  engine sglang  world 8")
    assert json.loads(cli("explain", str(old), "--json").stdout)["engine_version"] == "0.5.21"
    assert "engine_version" not in json.loads(cli("explain", str(new), "--json").stdout)


def test_import_picks_the_newest_release_that_accepts_the_line(cli, tmp_path, config):
    line = ["python", "-m", "sglang.launch_server", "--model-path", "deepseek-ai/DeepSeek-V3",
            "--tp", "8", "--speculative-skip-dp-mlp-sync"]
    result = cli("import", "--engine", "sglang", "--model-config", config, "--", *line)
    assert result.exit_code == 0, result.stderr
    assert "engine_version: \"0.5.22\"" in result.stdout
    assert ("read as SGLang 0.5.22, the newest supported release whose flags accept every flag "
            "of the line (SGLang 0.5.23: unknown sglang flag --speculative-skip-dp-mlp-sync") in result.stderr
    pinned = cli("import", "--engine", "sglang", "--engine-version", "0.5.23", "--model-config",
                 config, "--", *line)
    assert pinned.exit_code == 2
    assert pinned.stderr.startswith("specplan import: unknown sglang flag --speculative-skip-dp-mlp-sync")
    older = cli("import", "--engine", "sglang", "--engine-version", "0.5.20", "--model-config",
                config, "--", *line)
    assert older.exit_code == 0 and "engine_version: \"0.5.20\"" in older.stdout


@pytest.mark.parametrize("flag,strict", [("--rope-scalling", ()), ("--rope-scaling", ("--strict",))])
def test_import_of_a_line_no_release_accepts_names_them_all(cli, config, flag, strict):
    """A flag no release ever had, or (--strict) one an older release had: today's refusal."""
    result = cli("import", "--engine", "vllm", "--model-config", config, *strict, "--", "vllm",
                 "serve", "m", flag, "{}")
    assert result.exit_code == 2
    assert "(no supported release accepts the line: vLLM 0.30.0 to vLLM 0.33.0)" in result.stderr
    assert "written for" not in result.stderr


def test_import_reads_a_flag_only_an_old_vllm_has(cli, config):
    result = cli("import", "--engine", "vllm", "--model-config", config, "--", "vllm", "serve",
                 "m", "-tp", "2", "--enable-mamba-fine-grained-prefix-cache")
    assert result.exit_code == 0, result.stderr
    assert "engine_version: \"0.30.0\"" in result.stdout
    assert convention("vllm", "0.30.0").title == "vLLM 0.30.0"


@pytest.mark.parametrize("version,spelled", [
    ("0.5.20", ["--dp-size 4", "--enable-dp-attention"]),
    ("0.5.21", ["--dp-size 4", "--enable-dp-attention"]),
    ("0.5.22", ["--attn-dp-size 4"]),
])
def test_export_writes_the_release_spelling(cli, write_spec, version, spelled):
    spec = write_spec(SPEC.format(version=""))
    result = cli("export", str(spec), "--engine-version", version)
    assert result.exit_code == 0, result.stderr
    assert f"# specplan export: dpattn on SGLang {version}" in result.stdout
    flags = [line.split("#")[0].strip() for line in result.stdout.splitlines() if line.startswith("  ")]
    assert all(f in flags for f in spelled), flags
    assert ("--attn-dp-size 4" in flags) == (version == "0.5.22")


def test_export_to_a_release_outside_the_table_is_exit_2(cli, write_spec):
    spec = write_spec(SPEC.format(version=""))
    result = cli("export", str(spec), "--engine-version", "0.6.0")
    assert result.exit_code == 2
    assert "SGLang 0.6.0 is not a supported release; supported: 0.5.20, 0.5.21, 0.5.22, 0.5.23" in result.stderr


def test_an_older_release_spec_round_trips_through_its_own_spelling(cli, tmp_path, write_spec):
    spec = write_spec(SPEC.format(version='engine_version: "0.5.20"\n'))
    script = tmp_path / "run.sh"
    script.write_text(cli("export", str(spec)).stdout)
    assert "--enable-dp-attention" in script.read_text()
    back = cli("import", "--engine", "sglang", "-f", str(script), "--base", str(spec))
    assert back.exit_code == 0, back.stderr
    out = tmp_path / "back.yaml"
    out.write_text(back.stdout)
    assert load_spec(out).engine_version == "0.5.20"
    assert load_spec(out).topology == load_spec(spec).topology
