"""simulate runs the gates (issue 34 item 4): `--inject gate` / `gate:<name>` gives each rank its
own reading at every gate (or the one named); a `behaviour: engine` spec whose gate check calls
an ERROR ends in GateMismatch naming the gate and the collective it selects, and specplan's
plan of the same spec, or an engine whose gate check calls clean, passes. Real gloo ranks.

The default suite keeps one 2-rank pair (SGLang DSpark's memory gate) and the refusals; every
other gate class runs behind `slow`.
"""

from __future__ import annotations

import json

import pytest

from tests.helpers import cli

DSPARK_TP2 = """name: {name}
engine: sglang
behaviour: {behaviour}
topology: {{tp: 2, device: cuda}}
model: {{num_layers: 4, hidden_size: 64, vocab_size: 512}}
speculative: {{method: {method}, num_steps: 3, sampling: greedy, aux_layers: [1, 2, 3]}}
{extra}"""
MOE = "moe: {num_experts: 4, top_k: 2}"
ADAPTIVE = ("engine_args:\n  - --speculative-config '{\"method\":\"dspark\",\"num_speculative_tokens\":3,"
            "\"enable_adaptive_verification\":true}'")


def _write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return str(path)


def _sim(spec: str, inject: str, *extra: str):
    return cli("simulate", spec, "--rounds", "2", "--requests", "2", "--inject", inject, *extra)


def _gate_errors(spec: str) -> list[str]:
    run = cli("check", spec, "--json", code=(0, 3))
    return [f["gate"] for f in json.loads(run.stdout)["findings"] if f.get("gate")]


def _fails_by_name(spec: str, gate: str, selects: str) -> None:
    assert gate in _gate_errors(spec)
    run = _sim(spec, f"gate:{gate}", "--allow-errors")
    out = " ".join(run.stdout.split())
    assert run.returncode == 3, out[-2000:]
    assert f"GateMismatch: gate {gate} (" in out and f"selects {selects}" in out, out[-2000:]


def _passes(spec: str, inject: str = "gate") -> None:
    assert _gate_errors(spec) == []
    run = _sim(spec, inject)
    assert run.returncode == 0 and "PASS" in run.stdout, run.stdout[-2000:]


@pytest.mark.parametrize("method", ["dspark"])
def test_memory_gate_left_to_each_rank_fails_by_name_and_specplans_plan_passes(tmp_path, method):
    engine = _write(tmp_path, "engine", DSPARK_TP2.format(name="engine", behaviour="engine",
                                                          method=method, extra="sync: {policy: off}\n"))
    _fails_by_name(engine, f"{method}_draft_graph_mem", "capture over tp [0, 1]")
    own = _write(tmp_path, "own", DSPARK_TP2.format(name="own", behaviour="specplan",
                                                    method=method, extra=""))
    _passes(own, f"gate:{method}_draft_graph_mem")


def test_inject_gate_refusals(tmp_path):
    spec = _write(tmp_path, "own", DSPARK_TP2.format(name="own", behaviour="specplan",
                                                     method="dspark", extra=""))
    run = cli("simulate", spec, "--inject", "gate:dp_padding_mode")
    assert run.returncode == 2
    assert "the plan has no gate 'dp_padding_mode'; its gates: dspark_draft_graph_mem" in run.output
    none = _write(tmp_path, "none", "name: none\nengine: vllm\ntopology: {tp: 1}\n"
                  "model: {num_layers: 4, hidden_size: 64, vocab_size: 512}\n"
                  "speculative: {method: eagle, num_steps: 3, sampling: greedy}\n")
    run = cli("simulate", none, "--inject", "gate")
    assert run.returncode == 2 and "this plan has none" in run.output


# -- every other gate class (slow: 2-rank runs each) -------------------------------------------

SGLANG_DPA = """name: {name}
engine: sglang
behaviour: {behaviour}
topology: {{tp: 2, dp: 2, dp_attention: true, device: cuda}}
model: {{num_layers: 4, hidden_size: 64, vocab_size: 512, moe: {{num_experts: 4, top_k: 2}}}}
speculative: {{method: eagle, num_steps: 3, topk: 1, num_draft_tokens: 4, sampling: greedy}}
"""
VLLM = """name: {name}
engine: vllm
behaviour: {behaviour}
topology: {topology}
model: {{num_layers: 4, hidden_size: 64, vocab_size: 512{moe}}}
speculative: {{method: {method}, num_steps: 3, sampling: greedy{taps}}}
{extra}
"""


def _vllm(tmp_path, name, behaviour, topology, method="eagle", moe="", extra=""):
    taps = ", aux_layers: [1, 2, 3]" if method in ("dspark", "dflash", "eagle3") else ""
    return _write(tmp_path, name, VLLM.format(name=name, behaviour=behaviour, topology=topology,
                                              method=method, moe=moe and f", {moe}", taps=taps,
                                              extra=extra))


@pytest.mark.slow
def test_dflash_memory_gate(tmp_path):
    engine = _write(tmp_path, "engine", DSPARK_TP2.format(name="engine", behaviour="engine",
                                                          method="dflash", extra="sync: {policy: off}\n"))
    _fails_by_name(engine, "dflash_draft_graph_mem", "capture over tp [0, 1]")
    own = _write(tmp_path, "own", DSPARK_TP2.format(name="own", behaviour="specplan",
                                                    method="dflash", extra=""))
    _passes(own, "gate:dflash_draft_graph_mem")


@pytest.mark.slow
@pytest.mark.parametrize("behaviour", ["engine", "specplan"])
def test_sglang_dp_attention_round_gates_agreed_over_tp_pass(tmp_path, behaviour):
    # dp_padding_mode, dp_idle_forward, target_graph, eagle_draft_graph: SGLang agrees each over
    # tp by its token-count all-gather, so every rank's own reading meets one value.
    _passes(_write(tmp_path, behaviour, SGLANG_DPA.format(name=behaviour, behaviour=behaviour)))


@pytest.mark.slow
@pytest.mark.parametrize("behaviour", ["engine", "specplan"])
def test_vllm_step_gates_pass(tmp_path, behaviour):
    # step_batch_descriptor, skip_drafts, draft_batch_descriptor over the replica (tp 2), and
    # batch_shard_owner over tp.
    spec = _vllm(tmp_path, behaviour, behaviour, "{tp: 2}",
                 extra='engine_args: ["--enable-batch-sharded-sampling"]')
    _passes(spec)


@pytest.mark.slow
@pytest.mark.parametrize("behaviour", ["engine", "specplan"])
def test_vllm_lockstep_dp_gates_pass(tmp_path, behaviour):
    # dp_idle_dummy_batch and the step's DP padding, agreed over the stage (ep).
    spec = _vllm(tmp_path, behaviour, behaviour, "{tp: 1, dp: 2, ep: 2}", method="mtp", moe=MOE)
    _passes(spec)


@pytest.mark.slow
@pytest.mark.parametrize(("topology", "selects"), [("{tp: 2}", "all_reduce over tp [0, 1]"),
                                                   ("{tp: 1, cp: 2}", "all_gather over pcp [0, 1]")])
def test_vllm_adaptive_budget(tmp_path, topology, selects):
    # Each rank ranks its own confidences (vllm#54011): the engine fails by name on tp and pcp.
    engine = _vllm(tmp_path, "engine", "engine", topology, method="dspark", extra=ADAPTIVE)
    _fails_by_name(engine, "adaptive_verify_budget", selects)
    own = _vllm(tmp_path, "own", "specplan", topology, method="dspark", extra=ADAPTIVE)
    _passes(own, "gate:adaptive_verify_budget")


SGLANG_ADAPTIVE = """name: {name}
engine: sglang
behaviour: {behaviour}
topology: {{tp: 2, device: cuda}}
model: {{num_layers: 4, hidden_size: 64, vocab_size: 512}}
speculative: {{method: eagle, num_steps: 3, topk: 1, num_draft_tokens: 4, sampling: greedy}}
engine_args: ["python -m sglang.launch_server", "--tp 2", "--speculative-algorithm EAGLE", "--speculative-adaptive"]
{extra}"""


@pytest.mark.slow
def test_sglang_adaptive_steps(tmp_path):
    # Agreed through the accept lengths (the eagle_accept site in specplan's plan): clean under
    # the engine and specplan's plan; with that site turned off, each rank's own step count.
    for behaviour in ("engine", "specplan"):
        _passes(_write(tmp_path, behaviour, SGLANG_ADAPTIVE.format(name=behaviour, behaviour=behaviour,
                                                                   extra="")))
    off = _write(tmp_path, "off", SGLANG_ADAPTIVE.format(name="off", behaviour="specplan",
                                                         extra="sync: {sites: {eagle_accept: 'off'}}\n"))
    _fails_by_name(off, "eagle_adaptive_steps", "all_reduce over tp [0, 1]")


@pytest.mark.slow
def test_sglang_dspark_ragged_verify_budget(tmp_path):
    ragged = 'engine_args: ["SGLANG_RAGGED_VERIFY_MODE=compact", "python -m sglang.launch_server"]\n'
    engine = _write(tmp_path, "engine", DSPARK_TP2.format(name="engine", behaviour="engine",
                                                          method="dspark", extra=ragged))
    _fails_by_name(engine, "dspark_verify_budget", "broadcast over tp [0, 1]")
    own = _write(tmp_path, "own", DSPARK_TP2.format(name="own", behaviour="specplan",
                                                    method="dspark", extra=ragged))
    _passes(own, "gate:dspark_verify_budget")
