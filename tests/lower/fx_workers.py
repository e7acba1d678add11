"""A rank program for tests/lower/test_fx_module.py: drive a generated runtime module on gloo.

Every rank binds the plan through the module and runs its stage's startup, prefill and decode
programs with local decisions generated from (rank, round, decision); it then checks each
converged or relayed value against what its source rank generated, and the accept's commit.
"""

from __future__ import annotations

import importlib
import sys
import zlib

import torch

from specplan.runtime.runtime import DTYPES
from tests.ranks import serve


def gen(rank: int, rnd: int, decision: str, shape, dtype: str, num_steps: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(zlib.crc32(f"{rank}/{rnd}/{decision}".encode()))
    if dtype == "float32":
        return torch.rand(shape, generator=g)
    if dtype == "bool":
        return torch.randint(0, 2, shape, generator=g).bool()
    high = num_steps + 1 if decision.startswith(("correct_len", "accept_len")) else 7
    return torch.randint(0, high, shape, generator=g).to(DTYPES[dtype])


def fields(view) -> dict:
    """decision -> (field, boundary or None, relay or None)."""
    out = {}
    for b in view.boundaries:
        out.update({f.decision: [f, b, None] for f in b.fields})
    for r in view.relays:
        for f in r.fields:
            out.setdefault(f.decision, [f, None, None])[2] = r
    return out


def origins(view, rank: int, b, r) -> list[int]:
    """The ranks whose local values this rank must end up with (several for a MIN)."""
    last = view.group_of("pp", rank)[-1]
    holder = last if r is not None else rank
    if b is None:
        return [holder]
    group = view.group_of(b.family, holder)
    return group if b.op == "all_reduce_min" else [group[b.source_member]]


def expected(view, rank, rnd, live, f, b, r, steps) -> torch.Tensor:
    shape = view.live_shape(f, live)
    values = [gen(o, rnd, f.decision, shape, f.dtype, steps) for o in origins(view, rank, b, r)]
    return torch.stack(values).amin(0) if len(values) > 1 else values[0]


def engine(module_dir: str, module: str, plan_path: str, rounds: str, mixed: str = "") -> dict:
    """`mixed`: the plan's decode round carries alternative accept sites; each round fires
    one (the first on even rounds, the second on odd), every rank hands over that site's
    decisions only and names it in `accept_site`; the other site's decisions arrive as zeros."""
    sys.path.insert(0, module_dir)
    mod = importlib.import_module(module)
    rt = mod.bind(plan_path)
    view, steps, checks = rt.plan, rt.plan.raw["speculative"]["num_steps"], 0
    known = fields(rt.plan)
    accepts = [n for n, s in view.sites.items() if s["phase"] == "accept" and s["round"] == "decode"]
    kinds = [("startup", 0), ("prefill", 0)] + [("decode", r) for r in range(1, int(rounds) + 1)]
    for kind, rnd in kinds:
        live = 1 + (rnd * 3) % view.max_batch
        silent = set()
        if mixed and kind == "decode":
            fired = accepts[rnd % 2]
            silent = {f.decision for f, _, _ in known.values() if f.site in accepts and f.site != fired}
        values = {d: gen(rt.rank, rnd, d, view.live_shape(f, live), f.dtype, steps)
                  for d, (f, _, _) in known.items() if d not in silent}
        values["prefix_lens"] = torch.full((live,), 10 + rnd, dtype=torch.int32)
        values["token_counts"] = torch.arange(7, dtype=torch.int32) + 100 * rt.rank
        if silent:
            values["accept_site"] = fired
        out = mod.run(rt, kind, round=rnd, live_rows=live, values=values)
        for d, got in out.items():
            if d in silent:
                assert not got.any(), (rt.rank, rnd, d, "an unfired accept site arrives as zeros")
                checks += 1
            elif d == "accepted":
                checks += check_accept(got, out, values["prefix_lens"], silent)
            elif d == "token_counts":
                want = torch.stack([torch.arange(7, dtype=torch.int32) + 100 * m for m in rt.ranks[view.raw["dp_agreement"]["family"]]])
                assert torch.equal(got, want), (rt.rank, got, want)
                checks += 1
            else:
                want = expected(view, rt.rank, rnd, live, *known[d], steps)
                assert torch.equal(got, want), (rt.rank, kind, rnd, d, got, want)
                checks += 1
    rt.close()
    return {"rank": rt.rank, "checks": checks}


def check_accept(acc, out, prefix, silent=frozenset()) -> int:
    key, correct = next(((k, v) for k, v in out.items() if k not in silent and
                         k.startswith(("correct_len", "accept_len", "num_correct_drafts"))),
                        ("target_predict", None))  # DFlash greedy: derived by greedy_accept
    if correct is not None:
        assert torch.equal(acc.commit_lens, (correct + 1).to(torch.int32)), (acc.commit_lens, correct)
    assert torch.equal(acc.new_seq_lens, prefix + acc.commit_lens)
    if not key.startswith("num_correct"):  # a chain: out_tokens pads with -1 past commit_lens
        cols = torch.arange(acc.out_tokens.shape[1])[None, :]
        assert (acc.out_tokens[cols >= acc.commit_lens[:, None].long()] == -1).all(), acc.out_tokens
    return 1


def main(argv: list[str]) -> None:
    serve(globals(), argv)
