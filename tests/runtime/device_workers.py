"""Rank programs on the device hot path, forced on a CPU (bind(hot_path="device")).

Gloo tensors stand for device tensors: the runtime runs the code it runs on CUDA (header compared
on the device into a flag, no host timer, per-field device copies), and `HostSyncRecorder`
shows that no converge or relay reads a value back to the host.
"""

from __future__ import annotations

from rt_workers import run_rounds
from specplan.runtime import bind
from specplan.runtime.host_sync import HostSyncRecorder
from tests.ranks import serve


def engine(plan_path: str, rounds: str, fault: str = "") -> dict:
    """Every boundary and relay; the desync flag is read once per round, before values are checked."""
    rt = bind(plan_path, hot_path="device")
    checks = run_rounds(rt, int(rounds), fault, after_round=rt.check_round)
    rt.close()
    return {"rank": rt.rank, "checks": checks, "hot_path": rt.hot_path}


def nosync(plan_path: str, rounds: str) -> dict:
    """Record host reads inside every converge / relay call, and inside one check_round."""
    import torch

    rt = bind(plan_path, hot_path="device")
    hot = HostSyncRecorder()
    checks = run_rounds(rt, int(rounds), hot=hot)
    if "dspark_accept_greedy" in rt.plan.sites:  # the accept's commit derivation too
        values = {"correct_len_greedy": torch.ones(4, dtype=torch.int32),
                  "bonus_greedy": torch.full((4,), 7),
                  "cap_trim_lens_greedy": torch.zeros(4, dtype=torch.int32)}
        prefix, drafts = torch.full((4,), 10, dtype=torch.int32), torch.zeros(4, 3, dtype=torch.int64)
        with hot:
            rt.accept("dspark_accept_greedy", values, round=99, live_rows=4, prefix_lens=prefix,
                      draft_tokens=drafts)
        checks += 1
    with HostSyncRecorder() as check:
        rt.check_round()
    rt.close()
    return {"rank": rt.rank, "checks": checks, "hot": hot.events, "check": check.events}


def main(argv: list[str]) -> None:
    serve(globals(), argv)


def traced(plan_path: str, rounds: str, mode: str) -> dict:
    """An engine tracing to SPECPLAN_TRACE_DIR with its own request ids and accepted lengths.

    mode `accept`: Runtime.accept over the DSpark accept site (it records commit_lens);
    `record:S`: the engine derives its commit itself and calls record_acceptance with lengths
    scaled by S (S < 1 plants an acceptance drop).
    """
    import torch

    rt = bind(plan_path)
    live, rids = 4, [f"rid-{i}-{rt.plan.name}" for i in range(4)]
    for rnd in range(1, int(rounds) + 1):
        correct = ((torch.arange(live) + rnd) % 4).to(torch.int32)  # 0..3 accepted drafts
        if mode == "accept":
            values = {"correct_len_greedy": correct, "bonus_greedy": torch.full((live,), 7),
                      "cap_trim_lens_greedy": torch.zeros(live, dtype=torch.int32)}
            rt.accept("dspark_accept_greedy", values, round=rnd, live_rows=live,
                      prefix_lens=torch.full((live,), 10, dtype=torch.int32),
                      draft_tokens=torch.arange(live * 3).reshape(live, 3), requests=rids)
            continue
        scale = float(mode.split(":")[1])
        rt.record_acceptance(rnd, rids, [round((int(c) + 1) * scale) for c in correct])
    rt.close()
    return {"rank": rt.rank}
