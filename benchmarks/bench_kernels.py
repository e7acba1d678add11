"""Time every speculative-decoding kernel against its pure-torch reference.

    python benchmarks/bench_kernels.py

On a GPU: realistic shapes (batch 256, vocab 128k, 7 drafts, trees of 8 nodes), median time of
the Triton kernel and of the torch reference, and the Triton kernel's bandwidth against the
H200's ~4.8 TB/s. Bytes are nominal: every input and output tensor counted once (a kernel that
stops early, such as the rejection walk, touches less).

On a CPU: the Triton interpreter (TRITON_INTERPRET=1, set here) checked against the reference
on small shapes, then reference timings at modest shapes.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import torch

ON_GPU = torch.cuda.is_available()
if not ON_GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is first imported
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specplan.runtime import kernels as K  # noqa: E402

PEAK_GBPS = 4800.0  # H200 HBM3e


def _probs(gen, *shape):
    x = torch.rand(*shape, generator=gen).pow(4)
    return x / x.sum(-1, keepdim=True)


def _chain_tree(bs, n):
    nxt = torch.arange(1, n + 1).repeat(bs, 1)
    nxt[:, -1] = -1
    return torch.arange(bs * n).view(bs, n), nxt, torch.full((bs, n), -1)


def make_cases(bs, vocab, steps, gen):
    """(name, public function, args, kwargs) per kernel at one shape."""
    n = steps + 1
    target = torch.randint(0, 4, (bs, n), generator=gen)
    drafts = torch.where(torch.rand(bs, steps, generator=gen) < 0.8, target[:, :steps], 9)
    num = torch.full((bs,), steps, dtype=torch.int32)
    total = bs * steps
    ridx, nxt, sib = _chain_tree(bs, n)
    cand = torch.cat([torch.zeros(bs, 1, dtype=torch.int64), drafts], dim=1)
    tree_p = _probs(gen, bs, n, vocab)
    tensors = [torch.randint(0, 9, (bs,), dtype=torch.int32), torch.randint(0, 9, (bs,)),
               torch.rand(bs, steps), torch.rand(bs) < 0.5]
    offsets, end = [], 64  # a 64-byte guard header first, then 8-byte aligned fields
    for t in tensors:
        offsets.append(end)
        end += -(-_nbytes(t) // 8) * 8
    topk = 4
    parent_list = torch.cat([torch.tensor([-1]), torch.arange(topk), 4 + torch.arange(topk) * topk])
    sel = torch.cat([torch.arange(topk), 4 + torch.arange(topk) * topk])[:n - 1]
    rs_args = (torch.randint(0, vocab, (total,), generator=gen), num, _probs(gen, total, vocab),
               _probs(gen, total, vocab), torch.randint(0, vocab, (bs,), generator=gen),
               torch.rand(total, generator=gen, dtype=torch.float64),
               torch.empty(bs, vocab).exponential_(generator=gen), None)
    return [
        ("greedy_accept", K.greedy_accept, (drafts, target, num), {}),
        ("rejection_sample", K.rejection_sample, rs_args, {}),
        ("verify_tree_greedy", K.verify_tree_greedy, (cand, ridx, nxt, sib, target, n), {}),
        ("tree_sample_target_only", K.tree_sample_target_only,
         (cand, ridx, nxt, sib, torch.rand(bs, n, generator=gen), torch.rand(bs, generator=gen),
          tree_p, torch.zeros_like(tree_p), n), {}),
        ("build_tree", K.build_tree, (parent_list.repeat(bs, 1), sel.repeat(bs, 1),
                                      torch.randint(0, 999, (bs,)), topk), {}),
        ("finalize_accept", K.finalize_accept,
         (num - 1, target[:, 0], num * 10, drafts, num + 1), {}),
        ("pack_fused", K.pack_fused, (torch.zeros(end, dtype=torch.uint8), tensors, offsets), {}),
        ("unpack_fused (copy)", K.unpack_fused,
         (K.pack_fused(torch.zeros(end, dtype=torch.uint8), tensors, offsets, impl="torch"),
          [(t.dtype, t.shape, o) for t, o in zip(tensors, offsets)]), {"copy": True}),
    ]


def _to(x, device):
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, list):
        return [_to(t, device) for t in x]
    return x


def _nbytes(x):
    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    if isinstance(x, (list, tuple)):
        return sum(_nbytes(t) for t in x)
    return 0


def _same(a, b):
    if isinstance(a, torch.Tensor):
        return torch.equal(a.cpu(), b.cpu())
    return all(_same(x, y) for x, y in zip(a, b))


def _time(fn, repeats):
    """Median seconds per call (CUDA events on a GPU, perf_counter on a CPU)."""
    fn()
    samples = []
    for _ in range(repeats):
        if ON_GPU:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            samples.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def check_interpreter():
    print("Triton interpreter vs torch reference (bs=4, vocab=64, 3 drafts):")
    for name, fn, args, kwargs in make_cases(4, 64, 3, torch.Generator().manual_seed(0)):
        if name == "pack_fused":
            ok = _same(fn(args[0].clone(), *args[1:], impl="triton"), fn(args[0].clone(), *args[1:], impl="torch"))
        else:
            ok = _same(fn(*args, **kwargs, impl="triton"), fn(*args, **kwargs, impl="torch"))
        print(f"  {name:26s} {'ok' if ok else 'MISMATCH'}")


def bench(bs, vocab, steps, impls, repeats):
    device = "cuda" if ON_GPU else "cpu"
    print(f"\nbs={bs} vocab={vocab} drafts={steps} on {device}")
    header = f"  {'kernel':26s} {'MB':>9s}" + "".join(f" {i + ' ms':>12s}" for i in impls)
    print(header + (f" {'triton GB/s':>12s} {'% of peak':>10s}" if "triton" in impls else ""))
    for name, fn, args, kwargs in make_cases(bs, vocab, steps, torch.Generator().manual_seed(1)):
        args = _to(args, device)
        out = fn(*args, **kwargs, impl=impls[0])
        moved = _nbytes(args) + _nbytes(out)
        times = {i: _time(lambda i=i: fn(*args, **kwargs, impl=i), repeats) for i in impls}
        row = f"  {name:26s} {moved / 1e6:9.2f}" + "".join(f" {times[i] * 1e3:12.3f}" for i in impls)
        if "triton" in impls:
            gbps = moved / times["triton"] / 1e9
            row += f" {gbps:12.1f} {100 * gbps / PEAK_GBPS:9.1f}%"
        print(row)


def main():
    if ON_GPU:
        bench(256, 128 * 1024, 7, ["triton", "torch"], repeats=20)
        return
    check_interpreter()
    bench(64, 32 * 1024, 7, ["torch"], repeats=5)


if __name__ == "__main__":
    main()
