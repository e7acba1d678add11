"""The n-gram widths specplan accepts are what each engine release itself accepts, run from the
wheels (tests/engines/ngram_limits_probe.py): SGLang's _handle_ngram resolves the widths and
its _derive_tree_links walks a trie of more nodes than 1 + topk * num_steps; vLLM's
SpeculativeConfig takes any num_speculative_tokens > 0. specplan's spec loader accepts the same
widths (up to its own documented bound, MAX_DRAFTS) and refuses what the engine refuses. The
newest releases run under `engines`, the older ones under `versions`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specplan.engines.releases import RELEASES, newest
from specplan.errors import SpecError
from specplan.schema.load import load_spec_text
from specplan.schema.model import MAX_DRAFTS

pytestmark = pytest.mark.engines
HERE = Path(__file__).resolve().parent


def releases(engine: str):
    return [pytest.param(v, marks=() if v == newest(engine) else pytest.mark.versions)
            for v in RELEASES[engine]]


def probe(engine: str, version: str) -> dict:
    proc = subprocess.run([sys.executable, str(HERE / "ngram_limits_probe.py"), engine, version],
                          capture_output=True, text=True, timeout=600, cwd=HERE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def spec(engine: str, speculative: str):
    return load_spec_text(f"name: n\nengine: {engine}\ntopology: {{tp: 2}}\n"
                          "model: {num_layers: 4, hidden_size: 64, vocab_size: 1000}\n"
                          f"speculative: {speculative}\n", "n")


@pytest.mark.parametrize("version", releases("sglang"))
def test_sglang_resolves_ngram_widths_specplan_accepts(version):
    real = probe("sglang", version)
    assert real["None"] == [1, 10, 12]  # the default line: 12 nodes, past 1 + 10 * 1
    assert real["8"] == [0, 10, 8]  # fewer nodes than the breadth: num_steps 0
    assert real["300"] == [30, 10, 300]
    for steps, topk, width in (real["None"], real["8"], real["300"]):
        s = spec("sglang", f"{{method: ngram, num_steps: {steps}, topk: {topk}, "
                           f"num_draft_tokens: {width}}}").speculative
        assert (s.num_steps, s.topk, s.verify_width) == (steps, topk, width)
    # The 12-node trie: the root's ten children chained as siblings, node 11 below node 1 (two
    # levels deep at num_steps 1): SGLang's own tree links for it.
    trie = real["trie"]
    assert trie["next_sibling"][1:10] == list(range(2, 11)) and trie["next_sibling"][10] == -1
    assert trie["next_token"][:2] == [1, 11]


@pytest.mark.parametrize("version", releases("vllm"))
def test_vllm_takes_any_positive_chain_and_specplan_up_to_its_own_bound(version):
    real = probe("vllm", version)
    assert real["300"] == 300 and real[str(MAX_DRAFTS)] == MAX_DRAFTS and real["5000"] == 5000
    assert real["0"].startswith("Input should be greater than 0")
    for k in (300, MAX_DRAFTS):
        assert spec("vllm", f"{{method: ngram, num_steps: {k}}}").speculative.num_steps == k
    with pytest.raises(SpecError, match="specplan's limit for this key"):
        spec("vllm", "{method: ngram, num_steps: 5000}")
    with pytest.raises(SpecError, match="needs num_steps >= 1, found 0"):
        spec("vllm", "{method: ngram, num_steps: 0}")


NGRAM_LINES = [  # the corpus's line, then breadth, both, eagle-topk alone, nothing
    (Path(__file__).resolve().parents[1] / "ecosystem" / "lines" / "llama-3.1-8b-ngram.sglang.sh")
    .read_text().split()[3:],
    ["--model", "m", "--speculative-algorithm", "NGRAM", "--speculative-num-steps", "4",
     "--speculative-ngram-max-bfs-breadth", "3", "--speculative-num-draft-tokens", "9"],
    ["--model", "m", "--speculative-algorithm", "NGRAM", "--speculative-num-steps", "2",
     "--speculative-eagle-topk", "1", "--speculative-ngram-max-bfs-breadth", "4"],
    ["--model", "m", "--speculative-algorithm", "NGRAM", "--speculative-eagle-topk", "4"],
    ["--model", "m", "--speculative-algorithm", "NGRAM", "--speculative-ngram-max-bfs-breadth", "3",
     "--speculative-num-draft-tokens", "7"],
]


@pytest.mark.parametrize("version", releases("sglang"))
def test_sglang_ngram_topk_is_what_the_wheel_resolves_for_the_line(cli, tmp_path, version):
    """Each line through the wheel's own parser and _handle_ngram, and through `specplan
    import`: the same num_steps, topk (the BFS breadth, never --speculative-eagle-topk) and
    num_draft_tokens."""
    proc = subprocess.run([sys.executable, str(HERE / "ngram_limits_probe.py"), "sglang-lines", version],
                          input=json.dumps(NGRAM_LINES), capture_output=True, text=True, timeout=600,
                          cwd=HERE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    real = json.loads(proc.stdout.strip().splitlines()[-1])
    assert real[0] == [4, 10, 5]  # the corpus line's --speculative-eagle-topk 1 is not run
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"num_hidden_layers": 32, "hidden_size": 4096,
                                  "vocab_size": 128256, "architectures": ["LlamaForCausalLM"]}))
    for words, want in zip(NGRAM_LINES, real):
        result = cli("import", "--engine", "sglang", "--engine-version", version, "--model-config",
                     str(config), "--", "python", "-m", "sglang.launch_server", *words)
        assert result.exit_code == 0, result.stderr
        s = load_spec_text(result.stdout, "imported").speculative
        assert [s.num_steps, s.topk, s.verify_width] == want, words
