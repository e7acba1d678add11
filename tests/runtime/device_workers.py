"""Rank programs on the device hot path, forced on a CPU (bind(hot_path="device")).

Gloo tensors stand for device tensors: the runtime runs the code it runs on CUDA (header compared
on the device into a flag, no host timer, per-field device copies), and `HostSyncRecorder`
shows that no converge or relay reads a value back to the host.
"""

from __future__ import annotations

from launch import serve
from rt_workers import run_rounds
from specplan.runtime import bind
from specplan.runtime.host_sync import HostSyncRecorder


def engine(plan_path: str, rounds: str, fault: str = "") -> dict:
    """Every boundary and relay; the desync flag is read once per round, before values are checked."""
    rt = bind(plan_path, hot_path="device")
    checks = run_rounds(rt, int(rounds), fault, after_round=rt.check_round)
    rt.close()
    return {"rank": rt.rank, "checks": checks, "hot_path": rt.hot_path}


def nosync(plan_path: str, rounds: str) -> dict:
    """Record host reads inside every converge / relay call, and inside one check_round."""
    rt = bind(plan_path, hot_path="device")
    hot = HostSyncRecorder()
    checks = run_rounds(rt, int(rounds), hot=hot)
    with HostSyncRecorder() as check:
        rt.check_round()
    rt.close()
    return {"rank": rt.rank, "checks": checks, "hot": hot.events, "check": check.events}


def main(argv: list[str]) -> None:
    serve(globals(), argv)
