"""Mixed rounds: the sampled-token broadcast rule, proven by enumeration and by random rounds."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specplan import compile
from specplan.plan import PlanView
from specplan.schema import load_spec
from specplan.verify.mixed import Shape, Step, check_mixed, explore, explore_shape, in_broadcast


def replay(shape: Shape, steps, max_drafts: int, discount: str) -> int | None:
    """Run `steps` the plain way; the 1-based round whose broadcast leaves out a request that
    goes on, or None. Written apart from explore's breadth-first walk on purpose."""
    computed, inflation, out = 0, 0, 0
    for n, step in enumerate(steps, 1):
        if out >= shape.max_tokens:
            return None
        if computed < shape.prompt_len:
            scheduled = min(shape.chunk, shape.prompt_len - computed)
            sampled, gained, next_inflation = int(computed + scheduled >= shape.prompt_len), scheduled, 0
        else:
            k, a = step
            scheduled, sampled, gained, next_inflation = 1 + k, 1 + a, 1 + a, k - a
        cut = max_drafts if discount == "bound" else (scheduled - 1 if computed >= shape.prompt_len else 0)
        keep = in_broadcast(computed + inflation, scheduled, shape.prompt_len, shape.max_seq_len, cut)
        out += sampled
        if sampled and out < shape.max_tokens and not keep:
            return n
        computed, inflation = computed + gained, next_inflation
    return None


def _rounds(max_drafts: int):
    pair = st.integers(0, max_drafts).flatmap(lambda k: st.tuples(st.just(k), st.integers(0, k)))
    return st.lists(pair, min_size=1, max_size=12)


@pytest.mark.parametrize("max_drafts", range(0, 6))
def test_the_bound_keeps_every_request_that_goes_on(max_drafts):
    result = explore(max_drafts, "bound")
    assert result.counterexample is None
    assert result.shapes > 0 and result.rounds > result.shapes


@pytest.mark.parametrize("max_drafts", range(2, 6))
def test_the_seeds_discount_drops_a_request_that_goes_on(max_drafts):
    bad = explore(max_drafts, "drafts").counterexample
    assert bad is not None
    assert [s.kind for s in bad.steps] == ["chunk", "decode", "decode"]
    assert bad.steps[1].tokens - bad.steps[1].accepted == bad.inflation >= 2
    assert bad.steps[-1].tokens == bad.discount < bad.inflation
    pairs = [(s.tokens, s.accepted) for s in bad.steps]
    assert replay(bad.shape, pairs, max_drafts, "drafts") == len(bad.steps)
    assert replay(bad.shape, pairs, max_drafts, "bound") is None
    assert "round 3: decode with 0 drafts" in bad.describe()


def test_one_inflating_draft_is_absorbed_by_the_rule_either_way():
    assert explore(1, "drafts").counterexample is None


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 4), st.integers(1, 3), st.integers(1, 9), st.integers(0, 4), st.data())
def test_random_rounds_agree_with_the_enumeration(prompt, chunk, max_tokens, max_drafts, data):
    shape = Shape(prompt, chunk, max_tokens)
    pairs = data.draw(_rounds(max_drafts))
    assert replay(shape, pairs, max_drafts, "bound") is None
    broken_at = replay(shape, pairs, max_drafts, "drafts")
    _, _, bad = explore_shape(shape, max_drafts, "drafts")
    if broken_at is not None:  # the breadth-first walk finds one, never longer
        assert bad is not None and len(bad.steps) <= broken_at
    if bad is None:
        assert broken_at is None


def _view(tmp_path, discount: str, pp: int = 2) -> PlanView:
    path = tmp_path / "spec.yaml"
    path.write_text(f"name: mixed\nengine: vllm\ntopology: {{tp: 1, pp: {pp}, device: cpu}}\n"
                    "model: {num_layers: 8, hidden_size: 64, vocab_size: 512}\n"
                    "speculative: {method: eagle3, num_steps: 3, sampling: greedy}\n"
                    f"pipeline: {{sample_discount: {discount}}}\n")
    return PlanView(compile(load_spec(str(path))))


def test_the_plan_states_the_rule_and_check_proves_it(tmp_path):
    good = _view(tmp_path, "bound")
    rows = good.plan.pipeline.relay.sampled_rows
    assert (rows.discount, rows.discount_tokens) == ("bound", 3)
    assert "max drafts (3)" in rows.rule
    assert check_mixed(good) == []
    bad = _view(tmp_path, "drafts")
    assert bad.plan.pipeline.relay.sampled_rows.discount_tokens is None
    [finding] = check_mixed(bad)
    assert finding.severity == "ERROR" and finding.line == 6
    assert "round 2: decode with 2 drafts, 0 accepted; round 3: decode with 0 drafts" in finding.message


def test_no_pipeline_no_rule(tmp_path):
    view = _view(tmp_path, "drafts", pp=1)
    assert view.plan.pipeline.relay.sampled_rows is None
    assert check_mixed(view) == []


def test_step_reads():
    assert str(Step("chunk", 2)) == "prefill chunk of 2"
    assert str(Step("decode", 3, 1)) == "decode with 3 drafts, 1 accepted"
