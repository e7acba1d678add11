"""n-gram drafting per engine (issue 22): SGLang's drafts an irregular tree (draft_tokens and a
tree_mask), vLLM's a chain of num_steps drafts. A vLLM ngram spec checks, compiles, and its plan
carries only what vLLM's tensors compute, so the plugin's load accepts it (it was refused:
"site ngram_draft carries ['draft_tokens', 'tree_mask']")."""

from __future__ import annotations

import pytest

from specplan.methods import get_method
from specplan.plan import load_plan
from tests.helpers import cli

SPEC = """name: ngram-{engine}
engine: {engine}
topology: {{tp: 2, pp: {pp}, device: cpu}}
model: {{num_layers: 8, hidden_size: 64, vocab_size: 1000}}
speculative: {{method: ngram, num_steps: 3, sampling: sampling}}
runtime: {{max_batch: 8}}
"""


def _draft_site(build):
    plan = load_plan(build / "plan.json")
    return [d.name for d in next(s for s in plan.sites if s.name == "ngram_draft").decisions]


def test_each_engine_has_its_own_ngram_decisions():
    assert get_method("ngram").site("ngram_draft").decisions == ("draft_tokens", "tree_mask")
    from specplan.engines import convention

    chain = convention("vllm").method("ngram")
    assert chain.site("ngram_draft").decisions == ("draft_tokens",)
    assert chain.decision("draft_tokens").shape == ("bs", "num_draft_tokens - 1")
    assert not chain.tree and convention("sglang").method("ngram") is get_method("ngram")
    assert chain is get_method("ngram").variants["chain"]


@pytest.mark.parametrize("pp", [1, 2])
def test_vllm_ngram_checks_compiles_and_loads(tmp_path, pp):
    spec = tmp_path / "ngram.yaml"
    spec.write_text(SPEC.format(engine="vllm", pp=pp))
    checked = cli("check", str(spec), catch=False)
    assert checked.exit_code == 0, checked.stdout + checked.stderr
    assert cli("compile", str(spec), "-o", str(tmp_path / "build"), catch=False).exit_code == 0
    assert _draft_site(tmp_path / "build") == ["draft_tokens"]
    pytest.importorskip("torch")
    from specplan.plugins.vllm_codec import plan_sites

    sites = plan_sites(load_plan(tmp_path / "build" / "plan.json"))  # the plugin's load check
    assert {k: s.name for k, s in sites.items() if s} == {
        "accept": "ngram_accept", "target": "ngram_target", "draft": "ngram_draft"}


def test_sglang_ngram_keeps_its_tree_mask(tmp_path):
    spec = tmp_path / "ngram.yaml"
    spec.write_text(SPEC.format(engine="sglang", pp=1))
    assert cli("compile", str(spec), "-o", str(tmp_path / "build"), catch=False).exit_code == 0
    assert _draft_site(tmp_path / "build") == ["draft_tokens", "tree_mask"]
