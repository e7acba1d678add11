"""SGLang's NGRAM takes topk from --speculative-ngram-max-bfs-breadth (default 10) and ignores
--speculative-eagle-topk: _handle_ngram (arg_groups/speculative_hook.py, the same in 0.5.20 ..
0.5.23) declares speculative_eagle_topk = speculative_ngram_max_bfs_breadth, and a declaration
is the last writer. Import reads the topk SGLang runs; export writes the breadth flag, so a
spec's topk is the one SGLang runs (tests/engines/test_engine_limits.py runs the wheel's own
_handle_ngram on the same lines)."""

from __future__ import annotations


import pytest

from specplan.schema.load import load_spec_text
from tests.helpers import model_config


LLAMA = {"num_hidden_layers": 32, "hidden_size": 4096, "vocab_size": 128256,
         "architectures": ["LlamaForCausalLM"]}
SG = ["python", "-m", "sglang.launch_server", "--model-path", "m", "--tp", "2",
      "--speculative-algorithm", "NGRAM"]
IGNORED = "--speculative-eagle-topk 1 is not what SGLang's NGRAM runs: it takes topk from " \
          "--speculative-ngram-max-bfs-breadth"


@pytest.fixture
def config(tmp_path):
    return model_config(tmp_path, LLAMA)


def _import(cli, config, *flags, out=None):
    args = ["import", "--engine", "sglang", "--model-config", str(config)]
    result = cli(*args, *(["-o", str(out)] if out else []), "--", *SG, *flags)
    assert result.exit_code == 0, result.stderr
    return result, None if out else load_spec_text(result.stdout, "imported").speculative


def _widths(s):
    return s.num_steps, s.topk, s.verify_width


def test_without_the_breadth_flag_topk_is_sglangs_default_and_eagle_topk_is_said_ignored(cli, config):
    result, s = _import(cli, config, "--speculative-num-steps", "4", "--speculative-eagle-topk", "1",
                        "--speculative-num-draft-tokens", "5")
    assert _widths(s) == (4, 10, 5)
    assert IGNORED + ", 10 by default (_handle_ngram); imported as topk 10" in result.stderr


def test_the_breadth_flag_is_the_topk(cli, config):
    result, s = _import(cli, config, "--speculative-num-steps", "4",
                        "--speculative-ngram-max-bfs-breadth", "3", "--speculative-num-draft-tokens", "9")
    assert _widths(s) == (4, 3, 9)
    assert "eagle-topk" not in result.stderr


def test_the_breadth_flag_wins_over_eagle_topk(cli, config):
    result, s = _import(cli, config, "--speculative-num-steps", "2", "--speculative-eagle-topk", "1",
                        "--speculative-ngram-max-bfs-breadth", "4", "--speculative-num-draft-tokens", "6")
    assert _widths(s) == (2, 4, 6)
    assert IGNORED + ", 4 (_handle_ngram)" in result.stderr


def test_only_eagle_topk_with_the_defaults_derives_from_the_default_breadth(cli, config):
    """No --speculative-num-steps: SGLang derives it as num_draft_tokens // breadth, with
    breadth 10 whatever --speculative-eagle-topk says."""
    result, s = _import(cli, config, "--speculative-eagle-topk", "4")
    assert _widths(s) == (1, 10, 12)
    assert IGNORED.replace("topk 1", "topk 4") in result.stderr


def test_no_draft_token_count_is_sglangs_12(cli, config):
    result, s = _import(cli, config, "--speculative-num-steps", "3", "--speculative-ngram-max-bfs-breadth", "2")
    assert _widths(s) == (3, 2, 12)
    assert "num_draft_tokens 12: SGLang 0.5.23's NGRAM default (_handle_ngram)" in result.stderr


def test_eagle_topk_still_sets_an_eagle_tree(cli, config):
    """The breadth flag means nothing to EAGLE: its topk stays --speculative-eagle-topk."""
    line = [w if w != "NGRAM" else "EAGLE" for w in SG]
    result = cli("import", "--engine", "sglang", "--model-config", str(config), "--", *line,
                 "--speculative-draft-model-path", "d", "--speculative-num-steps", "3",
                 "--speculative-eagle-topk", "2", "--speculative-num-draft-tokens", "6",
                 "--speculative-ngram-max-bfs-breadth", "5")
    assert result.exit_code == 0, result.stderr
    s = load_spec_text(result.stdout, "imported").speculative
    assert _widths(s) == (3, 2, 6)


def _export_lines(cli, spec, *extra):
    result = cli("export", str(spec), *extra)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_export_of_an_ngram_spec_writes_the_breadth_flag(cli, tmp_path):
    spec = tmp_path / "ngram.yaml"
    spec.write_text("name: ngram\nengine: sglang\ntopology: {tp: 2}\n"
                    "model: {num_layers: 32, hidden_size: 4096, vocab_size: 128256}\n"
                    "speculative: {method: ngram, num_steps: 4, topk: 3, num_draft_tokens: 9}\n")
    script = _export_lines(cli, spec)
    assert "--speculative-ngram-max-bfs-breadth 3" in script
    assert "--speculative-eagle-topk" not in script
    assert "--speculative-num-steps 4" in script and "--speculative-num-draft-tokens 9" in script


def test_a_vllm_ngram_chain_exported_to_sglang_keeps_its_chain(cli, tmp_path):
    """vLLM's ngram drafts a chain (topk 1): on SGLang that is breadth 1, not the default 10."""
    spec = tmp_path / "ngram.yaml"
    spec.write_text("name: ngram\nengine: vllm\ntopology: {tp: 2}\n"
                    "model: {num_layers: 32, hidden_size: 4096, vocab_size: 128256}\n"
                    "speculative: {method: ngram, num_steps: 4}\n")
    script = _export_lines(cli, spec, "--engine", "sglang")
    assert "--speculative-ngram-max-bfs-breadth 1" in script
    assert "--speculative-eagle-topk" not in script


@pytest.mark.parametrize("flags", [
    ("--speculative-num-steps", "4", "--speculative-ngram-max-bfs-breadth", "3",
     "--speculative-num-draft-tokens", "9"),
    ("--speculative-num-steps", "4", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "5"),
])
def test_round_trip_through_specplans_spelling(cli, tmp_path, config, flags):
    """import -> drop the line (specplan's spelling) -> export -> import: the same widths."""
    spec = tmp_path / "a.yaml"
    _import(cli, config, *flags, out=spec)
    text = spec.read_text()
    bare = tmp_path / "bare.yaml"
    bare.write_text(text[: text.index("engine_args:")])
    script = tmp_path / "b.sh"
    script.write_text(_export_lines(cli, bare))
    again = cli("import", "--engine", "sglang", "--model-config", str(config), "-f", str(script))
    assert again.exit_code == 0, again.stderr
    back = load_spec_text(again.stdout, "again").speculative
    first = load_spec_text(text, "a").speculative
    assert _widths(back) == _widths(first)
    assert "is not what SGLang's NGRAM runs" not in again.stderr
