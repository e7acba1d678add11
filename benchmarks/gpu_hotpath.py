"""Prepared GPU check: the converge with and without host synchronisation, on NCCL.

    # one GPU (the lent H200): the guard + a one-rank NCCL broadcast, behind queued GPU work
    python benchmarks/gpu_hotpath.py
    # N GPUs: the whole DSpark plan over NCCL, host path vs device path
    torchrun --nproc-per-node N benchmarks/gpu_hotpath.py

Each "round" first queues a stand-in forward (a chain of bf16 matmuls, ~1 ms of GPU work) and then
the round's converges; the round ends with one `torch.cuda.synchronize()` (the engine's own sync
point, e.g. sampled tokens copied to the host), where the device path reads its flag
(`check_round`). The host path compares every header on the host, so every converge waits for the
queued forward to finish: the CPU can no longer run ahead of the GPU. Printed per path: median
wall ms per round, median host ms until the round's last converge returned (how far the CPU ran
ahead), host reads recorded by HostSyncRecorder during the converges (device path: must be 0),
and whether one device-path converge can be captured in a CUDA graph and replayed.
Nothing is asserted: the output is the report. Run time well under a minute.
`--cpu-dry-run` runs the same code on a CPU over gloo (no graph capture): it checks the script,
its numbers mean nothing.
"""

from __future__ import annotations

import datetime
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist

from specplan.runtime.guard import DeviceFlag, DeviceGuard, GuardHeader, header_slot
from specplan.runtime.host_sync import HostSyncRecorder

SPEC = """
name: gpu-hotpath-tp{n}
engine: sglang
topology: {{tp: {n}, device: {device}}}
model: {{num_layers: 8, hidden_size: 64, vocab_size: 1000}}
speculative: {{method: dspark, num_steps: 3}}
sync: {{policy: all}}
runtime: {{max_batch: 256, timeout_s: 60}}
"""
ROUNDS, LIVE, CONVERGES = 50, 64, 5


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def forward(x: torch.Tensor) -> torch.Tensor:
    for _ in range(8):
        x = torch.tanh(x @ x)
    return x


def run_rounds(step, work: torch.Tensor, check) -> tuple[float, float]:
    walls, aheads = [], []
    for r in range(ROUNDS):
        sync()
        start = time.perf_counter()
        forward(work)
        for _ in range(CONVERGES):
            step(r)
        ahead = time.perf_counter() - start
        sync()
        check()
        walls.append(time.perf_counter() - start)
        aheads.append(ahead)
    return statistics.median(walls[5:]) * 1e3, statistics.median(aheads[5:]) * 1e3


def single_gpu(device) -> None:
    """The guard's two checks around a one-rank NCCL broadcast of the family buffer."""
    buf = torch.zeros(4096, dtype=torch.uint8, device=device)
    slot_host, slot_dev = header_slot(buf), header_slot(buf, device_path=True)
    host, flag = GuardHeader(3, 0x1234), DeviceFlag(device)
    dev = DeviceGuard(3, 0x1234, 0, flag, device)
    payload = torch.randint(0, 1000, (LIVE, 4), device=device)
    view = buf[64: 64 + payload.numel() * 8].view(torch.int64).view(LIVE, 4)

    def host_step(r):
        host.set(LIVE, r)
        host.write(slot_host)
        view.copy_(payload)
        dist.broadcast(buf, src=0, async_op=True).wait(timeout=datetime.timedelta(seconds=60))
        assert host.matches(slot_host)
        return view.clone()

    def dev_step(r):
        dev.set(LIVE, r)
        dev.write(slot_dev)
        view.copy_(payload)
        dist.broadcast(buf, src=0, async_op=True).wait()
        dev.matches(slot_dev)
        return view.clone()

    report(host_step, dev_step, lambda: None, lambda: flag.read(), device)


def multi_gpu(device, n: int) -> None:
    from bench_hotpath import decode_inputs
    from specplan.runtime import bind
    from specplan.runtime.runtime import Runtime

    with tempfile.TemporaryDirectory() as tmp:
        plan = _plan(Path(tmp), n, device.type)
    host = bind(plan, hot_path="host", device=device)
    dev = Runtime(host.plan, host.device, host.backend, None, "device")
    inputs = {rt: [(b, {k: v.to(device) for k, v in vals.items()}) for b, vals in decode_inputs(rt, LIVE)]
              for rt in (host, dev)}

    def step_of(rt):
        def step(r):
            bid, values = inputs[rt][r % len(inputs[rt])]
            return rt.converge(bid, values, round=r, live_rows=LIVE)
        return step

    report(step_of(host), step_of(dev), host.check_round, dev.check_round, device)
    host.close()


def _plan(tmp: Path, n: int, device: str) -> dict:
    from specplan import compile
    from specplan.schema import load_spec

    src = tmp / "spec.yaml"
    src.write_text(SPEC.format(n=n, device=device))
    return compile(load_spec(str(src)))


def report(host_step, dev_step, host_check, dev_check, device) -> None:
    size = 2048 if device.type == "cuda" else 64
    work = torch.randn(size, size, device=device, dtype=torch.bfloat16) * 0.01
    for name, step, check in (("host", host_step, host_check), ("device", dev_step, dev_check)):
        run_rounds(step, work, check)  # warm
        wall, ahead = run_rounds(step, work, check)
        with HostSyncRecorder() as rec:
            for r in range(3):
                step(r)
        sync()
        if dist.get_rank() == 0:
            print(f"{name:>6} path: {wall:7.3f} ms/round wall, host returned after {ahead:7.3f} ms, "
                  f"host reads in {3} converges: {len(rec.events)} {sorted({e[0] for e in rec.events})}")
    if device.type == "cuda":
        graph_check(dev_step, dev_check)


def graph_check(dev_step, dev_check) -> None:
    """Capture one device-path converge in a CUDA graph and replay it."""
    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            dev_step(0)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            dev_step(1)
        for _ in range(3):
            g.replay()
        torch.cuda.synchronize()
        dev_check()
        verdict = "captured and replayed 3 times, flag clear"
    except Exception as exc:  # the report says what failed
        verdict = f"capture failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    if dist.get_rank() == 0:
        print(f"CUDA graph (device path converge): {verdict}")


def main() -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    n = int(os.environ["WORLD_SIZE"])
    if "--cpu-dry-run" in sys.argv:
        device, name = torch.device("cpu"), "cpu dry run"
        dist.init_process_group("gloo")
    else:
        torch.cuda.set_device(local)
        device, name = torch.device("cuda", local), torch.cuda.get_device_name(local)
        dist.init_process_group("nccl", device_id=device)
    if dist.get_rank() == 0:
        print(f"{dist.get_backend()}, {n} rank(s), {name}, torch {torch.__version__}, "
              f"{ROUNDS} rounds x {CONVERGES} converges behind ~8 bf16 2048^2 matmuls")
    if n == 1:
        single_gpu(device)
    else:
        multi_gpu(device, n)  # closes the runtime, which leaves the process group
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
