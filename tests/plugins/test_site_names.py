"""Every method's plan, compiled, through each plugin's site mapping: the decisions a plugin
hands for a site are the names the plan gives them (the plan, the sim and both plugins use one
name). Method none's token was once `next_token` in the plan and `next_token_ids` in the
plugins: vLLM's plan_sites found no target site and the plugin refused every TP x PP start."""

from __future__ import annotations

import pytest

import specplan
from specplan.methods import METHODS
from specplan.plugins.sglang_draft import EAGLE_FAMILY, HANDS, NGRAM
from specplan.plugins.sglang_sites import CALLS, EAGLE_ACCEPT
from specplan.plugins.vllm_codec import DRAFT, TARGET, accept_layout, plan_sites
from specplan.engines.sglang.spec_tp_sync import SITE_SLUGS

STEPS = {"none": None, "dflash": 7, "dspark": 5}


def _plan(engine: str, method: str, sampling: str, topology: dict):
    speculative = {"method": method}
    if method != "none":
        speculative.update(num_steps=STEPS.get(method, 3), sampling=sampling)
    return specplan.load({"name": f"{method}-{sampling}", "engine": engine, "topology": topology,
                          "model": {"num_layers": 8, "hidden_size": 256, "vocab_size": 1024},
                          "speculative": speculative, "runtime": {"max_batch": 8}}).compile()


CASES = [(m, s) for m in METHODS for s in ("greedy", "sampling") if m != "none" or s == "greedy"]


@pytest.mark.parametrize("method,sampling", CASES, ids=[f"{m}-{s}" for m, s in CASES])
@pytest.mark.parametrize("topology", [{"tp": 2}, {"tp": 2, "pp": 2}], ids=["tp2", "tp2pp2"])
def test_vllm_finds_every_site_it_hands(method, sampling, topology):
    plan = _plan("vllm", method, sampling, topology)
    found = plan_sites(plan)
    by_phase = {p: [s for s in plan.sites if s.phase == p] for p in ("target", "draft", "accept")}
    assert by_phase["target"], f"{method}: no target site"
    for phase, names in (("target", TARGET), ("draft", DRAFT)):
        for site in by_phase[phase]:
            assert tuple(d.name for d in site.decisions) == names, site.name
            assert found[phase] is site, f"{method}: vLLM's {phase} site not found ({site.name})"
    if by_phase["accept"]:
        assert found["accept"] in by_phase["accept"]
        assert accept_layout(plan, found["accept"]) in ("path", "count_bonus", "target_predict")
    else:
        assert found["accept"] is None


def _sglang_hands(method: str, site) -> tuple[str, ...] | None:
    """The decisions the SGLang plugin hands for a plan site (None: a site it does not hook)."""
    if site.phase == "target":
        return HANDS["target"]  # sglang_draft's prefill hook and sglang_pp's relay
    if method in NGRAM and site.phase == "draft":
        return HANDS["ngram_draft"]
    if method in EAGLE_FAMILY and site.phase in ("draft", "draft_extend"):
        return HANDS[site.phase]
    if method in EAGLE_FAMILY + NGRAM and site.phase == "accept":
        return EAGLE_ACCEPT
    calls = [CALLS[slug] for slug in SITE_SLUGS.get(site.name, ()) if slug in CALLS]
    return calls[0] if calls else None


@pytest.mark.parametrize("method,sampling", CASES, ids=[f"{m}-{s}" for m, s in CASES])
def test_sglang_hands_the_plan_names(method, sampling):
    plan = _plan("sglang", method, sampling, {"tp": 2})
    hooked = 0
    for site in plan.sites:
        hands = _sglang_hands(method, site)
        if hands is None:
            continue
        hooked += 1
        # A calls site's decision is SGLang's variable or it with the site's suffix
        # (sglang_sites._decision_of); a chain's draft site keeps the tree's leading decisions.
        names = tuple(next((h for h in hands if d.name == h or d.name.startswith(h + "_")), d.name)
                      for d in site.decisions)
        assert names and names == hands[: len(names)], f"{site.name}: plan {names}, plugin {hands}"
    assert hooked, f"{method}: no site the SGLang plugin hooks"
