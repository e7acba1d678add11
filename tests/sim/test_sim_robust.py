"""simulate runs every spec check calls clean and fails every spec check calls unsafe (issue 21).

Each class the sweep found, through the CLI: the crash (now a PASS), the ERROR (now a named
failure under --allow-errors), the options (exit 2 naming the option), the run's processes and
folder (gone on every exit). Runs of rank processes are `slow`; what needs no run is not.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import cli


ROOT = Path(__file__).resolve().parents[2]
MODEL = "model: {num_layers: 4, hidden_size: 64, vocab_size: 512}\n"


def spec(tmp: Path, body: str, name: str = "case") -> str:
    path = tmp / f"{name}.yaml"
    path.write_text(f"name: {name}\n" + body + ("" if "model:" in body else MODEL))
    return str(path)


def simulate(path: str, *extra: str, rounds: int = 3, requests: int = 2):
    return cli("simulate", path, "--rounds", rounds, "--requests", requests, *extra)


CLEAN = {  # check calls these clean; simulate crashed on each (issue 21)
    "none-tp1": "engine: sglang\ntopology: {tp: 1}\nspeculative: {method: none}\n",
    "none-tp2": "engine: sglang\ntopology: {tp: 2}\nspeculative: {method: none}\n",
    "none-tp2-pp2-sampling": "engine: vllm\ntopology: {tp: 2, pp: 2}\n"
                             "speculative: {method: none, sampling: sampling}\n",
    # A per-stage converge (tp under pp > 1) whose stage 0 holds nothing until the relay.
    "eagle-tp2-pp2-group-tp": "engine: sglang\ntopology: {tp: 2, pp: 2}\n"
                              "speculative: {method: eagle, num_steps: 2}\nsync: {group: tp}\n",
    "eagle3-vllm-engine": "engine: vllm\nbehaviour: engine\ntopology: {tp: 2, pp: 2}\n"
                          "speculative: {method: eagle3, num_steps: 2}\n",
    "eagle-policy-rng": "engine: sglang\ntopology: {tp: 2, pp: 2}\n"
                        "speculative: {method: eagle, num_steps: 2, sampling: sampling}\n"
                         "sync: {policy: rng}\n",
    "eagle3-relay-column": "engine: vllm\ntopology: {tp: 2, pp: 2}\n"
                           "speculative: {method: eagle3, num_steps: 2}\npipeline: {relay: column}\n",
    "eagle-tree-one-step": "engine: sglang\ntopology: {tp: 1}\n"
                           "speculative: {method: eagle, num_steps: 1, topk: 4, num_draft_tokens: 5}\n",
    "ngram-tree-tp2": "engine: sglang\ntopology: {tp: 2}\n"
                      "speculative: {method: ngram, num_steps: 7, topk: 2, num_draft_tokens: 5}\n",
    # vLLM's n-gram drafts a chain ([bs, num_draft_tokens - 1], no tree mask); the sim drafted
    # SGLang's flat tree for every engine and the vLLM plan's site refused it.
    "ngram-vllm-chain-pp3": "engine: vllm\ntopology: {tp: 1, pp: 3}\n"
                            "model: {num_layers: 6, hidden_size: 64, vocab_size: 512}\n"
                            "speculative: {method: ngram, num_steps: 3}\n",
    # Two requests over four DP replicas: two replicas serve none and still run the round (the
    # README's DeepSeek-V4 DSpark spec crashed so, with 4 requests over its 8 replicas).
    "dspark-dpattn-idle-replicas": "engine: sglang\ntopology: {tp: 4, dp: 4, dp_attention: true, dp_lm_head: true, ep: 4}\n"
                                   "model: {num_layers: 4, hidden_size: 64, vocab_size: 512, "
                                   "moe: {num_experts: 8, top_k: 2}}\n"
                                   "speculative: {method: dspark, num_steps: 3}\n",
    # vLLM's own plan: the start-up free-memory MIN over the engine's every worker (tp x cp
    # here), not over tp alone (the sim's probe found the two cp ranks' readings differ).
    "dflash-vllm-engine-cp2": "engine: vllm\nbehaviour: engine\ntopology: {tp: 1, cp: 2}\n"
                              "speculative: {method: dflash, num_steps: 3}\n",
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CLEAN))
def test_a_clean_spec_simulates_to_pass(tmp_path, name):
    path = spec(tmp_path, CLEAN[name])
    assert cli("check", path).exit_code == 0
    res = simulate(path)
    assert res.exit_code == 0 and "PASS" in res.output, res.output[-3000:]


# An idle DP replica under sampling (issue 37): `--requests 1` over two replicas leaves one with
# zero rows, which every sampler path runs: the chain (mtp), the tree (eagle topk 2), the block
# (dspark mixed) and vLLM's n-gram chain.
IDLE_SAMPLED = {
    "mtp-sampling": "engine: sglang\ntopology: {tp: 2, dp: 2, dp_attention: true}\n"
                    "model: {num_layers: 4, hidden_size: 64, vocab_size: 512, attention: mla}\n"
                    "speculative: {method: mtp, num_steps: 3, topk: 1, num_draft_tokens: 4, "
                    "sampling: sampling}\n",
    "eagle-tree-mixed": "engine: sglang\ntopology: {tp: 2, dp: 2, dp_attention: true}\n"
                        "speculative: {method: eagle, num_steps: 2, topk: 2, num_draft_tokens: 4, "
                        "sampling: mixed}\n",
    "dspark-mixed": "engine: sglang\ntopology: {tp: 2, dp: 2, dp_attention: true, dp_lm_head: true}\n"
                    "speculative: {method: dspark, num_steps: 3, sampling: mixed}\n",
    "ngram-vllm-sampling": "engine: vllm\ntopology: {tp: 1, dp: 2}\n"
                           "speculative: {method: ngram, num_steps: 3, sampling: sampling}\n",
}


def test_an_idle_replica_under_sampling_simulates_to_pass(tmp_path):
    """The issue's spec: exit 1 (a reshape of 0 elements in _tree_sample) before; PASS now."""
    path = spec(tmp_path, IDLE_SAMPLED["mtp-sampling"])
    res = simulate(path, requests=1)
    assert res.exit_code == 0 and "PASS" in res.output, res.output[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(IDLE_SAMPLED) - {"mtp-sampling"}))
def test_every_sampler_path_runs_an_idle_replica(tmp_path, name):
    path = spec(tmp_path, IDLE_SAMPLED[name])
    res = simulate(path, requests=1)
    assert res.exit_code == 0 and "PASS" in res.output, res.output[-3000:]


NAMED = {  # check ERROR -> simulate --allow-errors fails by name, exit 3 (never 1)
    "none-idle-skip": ("engine: sglang\ntopology: {tp: 2, dp: 2, dp_attention: true}\n"
                       "model: {num_layers: 4, hidden_size: 64, vocab_size: 512, "
                       "moe: {num_experts: 4, top_k: 2}}\n"
                       "speculative: {method: none}\nsync: {idle_ranks: skip}\n",
                       ["--requests", "1"], "CollectiveTimeout: sim all_gather on group tp"),
    # As many requests as replicas: the sim still leaves the last replica idle (its idle
    # program is what the plan says), and the hang check predicts happens.
    "standalone-idle-skip-every-request-placed": (
        "engine: sglang\ntopology: {tp: 2, dp: 2, dp_attention: true}\n"
        "speculative: {method: standalone, num_steps: 2}\nsync: {idle_ranks: skip}\n",
        ["--requests", "2"], "CollectiveTimeout: sim all_gather on group tp"),
    # A ring relay (SGLang's) from the last stage at its run-time width: stage 0 waits for the
    # planned count, as NCCL does; gloo completed it short and the sim passed.
    "eagle-dynamic-width-ring": ("engine: sglang\ntopology: {tp: 1, pp: 2}\n"
                                 "speculative: {method: eagle, num_steps: 2}\n"
                                 "pipeline: {payload_width: dynamic}\n", [],
                                 "CollectiveTimeout: collective for site eagle_target (boundary 65536, ring)"),
    "none-dynamic-width": ("engine: vllm\ntopology: {tp: 1, pp: 2}\nspeculative: {method: none}\n"
                           "pipeline: {payload_width: dynamic}\n", [],
                           "CollectiveTimeout: collective for site none_target"),
    "none-policy-off": ("engine: sglang\ntopology: {tp: 2, pp: 2}\n"
                        "speculative: {method: none, sampling: sampling}\nsync: {policy: off}\n",
                        [], "decision next_token_ids differs at round 0"),
    "drafts-not-relayed-tp2-pp3": ("engine: sglang\ntopology: {tp: 2, pp: 3}\n"
                                   "model: {num_layers: 6, hidden_size: 64, vocab_size: 512}\n"
                                   "speculative: {method: eagle, num_steps: 2}\n"
                                   "pipeline: {relay_drafts: false}\n", [],
                                   "decision draft_tokens differs at round 1"),
    # SGLang 0.5.23 launches no EAGLE3 under pipeline parallel (check_pipeline_parallel_compat):
    # the engine's launch is the failure, and nothing runs.
    "sglang-eagle3-pp2-launch-refused": ("engine: sglang\ntopology: {tp: 1, pp: 2}\n"
                                         "speculative: {method: eagle3, num_steps: 2}\n", [],
                                         "FAIL: sglang refuses to launch this topology: SGLang runs "
                                         "speculative decoding under pipeline parallel (pp=2) only "
                                         "with EAGLE or NEXTN"),
    # Sampling leaves no token reference: the target's own argmax along the committed tokens.
    "draft-layer-collision-mixed": ("engine: vllm\ntopology: {tp: 1, pp: 2}\n"
                                    "model: {num_layers: 8, hidden_size: 64, vocab_size: 512}\n"
                                    "speculative: {method: eagle3, num_steps: 2, sampling: mixed}\n"
                                    "pipeline: {draft_layer_ids: stage_local}\n", [],
                                    "where the model on one process predicts"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(NAMED))
def test_an_error_spec_fails_by_name(tmp_path, name):
    body, extra, shows = NAMED[name]
    path = spec(tmp_path, body)
    assert cli("check", path).exit_code == 3
    res = simulate(path, "--allow-errors", *extra)
    assert res.exit_code == 3 and "FAIL" in res.output and shows in res.output, res.output[-3000:]


def test_dropped_aux_routing_hands_the_drafter_the_last_stages_taps_only():
    """SGLang 0.5.23 under PP (behaviour: engine): non-last stages return hidden states only
    (PPProxyTensors), so their captures never reach the drafter; check's 'nothing carries it'
    ERROR is what the sim's drafter sees (LayoutMismatch at the first verify)."""
    from specplan import compile
    from specplan.schema.load import load_spec_text
    from specplan.sim.engine import produced_taps

    text = ("name: dropped\nengine: sglang\nbehaviour: engine\ntopology: {tp: 1, pp: 2, device: cpu}\n"
            "model: {num_layers: 8, hidden_size: 64, vocab_size: 512}\n"
            "speculative: {method: eagle3, num_steps: 2}\n")
    plan = compile(load_spec_text(text, "dropped.yaml"))
    assert plan.pipeline.aux_routing == "dropped" and plan.speculative.taps == (2, 4, 5)
    assert [produced_taps(plan, s) for s in (0, 1)] == [(), (5,)]


@pytest.mark.parametrize("option,value", [("--seed", 2**70), ("--seed", -1), ("--rounds", 10**30),
                                          ("--requests", 10**9), ("--max-layers", 10**20),
                                          ("--timeout-s", 0), ("--timeout-s", "nan"), ("--timeout-s", 10**9)])
def test_options_are_bounded_by_name(tmp_path, monkeypatch, option, value):
    import tempfile

    path = spec(tmp_path, CLEAN["none-tp1"])
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))  # where a run's folder would be left
    res = cli("simulate", path, option, value)
    assert res.exit_code == 2 and f"'{option}'" in res.output and "Traceback" not in res.output
    assert list(tmp.iterdir()) == []


def test_rounds_times_requests_is_bounded_by_the_kv_cache(tmp_path):
    res = cli("simulate", spec(tmp_path, CLEAN["none-tp1"]), "--rounds", 4096, "--requests", 1000)
    assert res.exit_code == 2 and "--rounds 4096 with --requests 1000" in res.output


def test_a_slow_rendezvous_names_the_slow_machine(monkeypatch):
    """The rendezvous waits rendezvous_s (the spec's runtime.timeout_s under simulate), and its
    message says the ranks were slow to start, not that one holds another plan."""
    from specplan.runtime import comm
    from specplan.runtime.errors import CollectiveTimeout
    from specplan.sim.launch import free_port

    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    t0 = time.monotonic()
    with pytest.raises(CollectiveTimeout, match="too slow to start every rank"):
        comm._store(0, 2, 1.0, 1.0)  # rank 1 never comes
    assert time.monotonic() - t0 < 30
    assert comm._store(0, 2, 1.0, None) is None  # without rendezvous_s: init_process_group's


@pytest.mark.slow
@pytest.mark.parametrize("device", ["cuda", "npu"])
def test_chunked_prefill_runs_on_the_cpu_whatever_the_device(tmp_path, device):
    path = spec(tmp_path, f"engine: sglang\ntopology: {{tp: 1, pp: 2, device: {device}}}\n"
                          "speculative: {method: eagle, num_steps: 2}\n")
    res = cli("simulate", path, "--chunked-prefill", 4, "--requests", 3)
    assert res.exit_code == 0 and "PASS" in res.output, res.output[-3000:]
    assert f"runs on the CPU (gloo), one process per stage: topology.device {device}" in res.output


def _ranks_of(tmp: Path) -> list[int]:
    """Live processes started with TMPDIR=tmp other than the test's own: the run's ranks, its
    fork server and its reaper (a forked rank shows the fork server's command line, so they
    are found by the environment they all inherit)."""
    out, mark = [], f"TMPDIR={tmp}".encode()
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and mark in (proc / "environ").read_bytes().split(b"\0"):
                out.append(int(proc.name))
        except OSError:
            continue
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()[:300].decode(errors="replace")
    except OSError:
        return "(gone)"


def _signals_as_a_terminal_gives_them() -> None:
    """A job started in the background of a non-interactive shell (as CI may start this suite)
    inherits SIGINT ignored, and Python then keeps it ignored: give the child the default a
    terminal's Ctrl-C meets."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL, signal.SIGINT])
def test_a_signalled_simulate_leaves_no_rank_and_no_folder(tmp_path, sig):
    path = spec(tmp_path, CLEAN["none-tp2"])
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(ROOT))
    p = subprocess.Popen([sys.executable, "-m", "specplan.cli", "simulate", path, "--rounds", "2000"],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True, preexec_fn=_signals_as_a_terminal_gives_them)
    end = time.monotonic() + 120
    while time.monotonic() < end and not (list(tmp.glob("specplan-sim-*/rank1.log"))
                                          and len(_ranks_of(tmp)) >= 4):
        time.sleep(0.2)
    folders = list(tmp.glob("specplan-sim-*"))
    assert folders and len(_ranks_of(tmp)) >= 4, "the run never started its ranks"
    p.send_signal(sig)
    p.wait(timeout=60)
    end = time.monotonic() + 30
    while time.monotonic() < end and (_ranks_of(tmp) or any(f.exists() for f in folders)):
        time.sleep(0.2)
    left = {pid: _cmdline(pid) for pid in _ranks_of(tmp)}
    assert not left and not any(f.exists() for f in folders), left


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@pytest.mark.slow
def test_a_peer_too_slow_for_the_timeout_fails_a_clean_spec_by_the_machine_not_the_plan(tmp_path):
    """One rank stopped (SIGSTOP) past --timeout-s: its peers' collectives time out, and since
    check finds no hang in the plan, the report says the machine was too slow."""
    path = spec(tmp_path, CLEAN["none-tp2"])
    p = subprocess.Popen([sys.executable, "-m", "specplan.cli", "simulate", path, "--rounds", "2000",
                          "--timeout-s", "2"], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ranks: list[int] = []
    end = time.monotonic() + 120
    while time.monotonic() < end and len(ranks) < 2:  # the fork server's children: the ranks
        ranks = [r for server in _children(p.pid) for r in _children(server)]
        time.sleep(0.2)
    assert len(ranks) == 2, "the run never started its ranks"
    time.sleep(3)  # past the rendezvous, into the rounds
    os.kill(max(ranks), signal.SIGSTOP)
    time.sleep(5)
    os.kill(max(ranks), signal.SIGCONT)  # slow, not dead: it meets a peer that has left
    out, err = p.communicate(timeout=180)
    assert p.returncode == 3, (out, err)
    text = " ".join(out.split())  # the report wraps at 100 columns where the round's digits put it
    assert "CollectiveTimeout" in text and "within 2s" in text, out
    assert "check finds no hang in this plan" in text and "--timeout-s" in text, out
