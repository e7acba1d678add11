"""Gloo worker processes for the batch-identity tests (launched by launch.launch(..., module=)).

Each rank converges (or relays) real values over real gloo, handing the runtime its rows'
(request, generation); one rank's batch is made to differ and the test reads the error.
"""

from __future__ import annotations

import json
import os

import torch

from rt_workers import gen
from specplan.runtime import bind
from specplan.runtime.batch import Batch, BatchHistory
from tests.ranks import serve

REQUESTS = [10, 11, 12, 13]
ODD = {  # variant -> (requests, generations) one rank holds at the odd round
    "request": ([10, 11, 99, 13], [0, 0, 0, 0]),
    "generation": ([10, 11, 12, 13], [0, 1, 0, 0]),
    "order": ([10, 12, 11, 13], [0, 0, 0, 0]),
}


def rows(variant: str, odd: bool, form: str):
    reqs, gens = ODD[variant] if odd else (REQUESTS, [0, 0, 0, 0])
    if form == "tensor":
        return Batch(torch.tensor(reqs, dtype=torch.int64), torch.tensor(gens, dtype=torch.int32))
    if form == "pair":
        return (reqs, gens)
    return Batch(reqs, gens)


def mismatch(plan_path: str, variant: str, odd_rank: str, odd_round: str, hot_path: str = "host",
             form: str = "batch", identity: str = "plan") -> dict:
    """Rounds 1..3 over every broadcast boundary; rank `odd_rank` holds the `variant` batch at
    `odd_round`. Prints `USED <round>` after each round whose values were all checked."""
    rt = bind(plan_path, hot_path=hot_path,
              batch_identity=None if identity == "plan" else identity == "on")
    odd_rank, odd_round, live = int(odd_rank), int(odd_round), len(REQUESTS)
    for rnd in (1, 2, 3):
        requests = rows(variant, rt.rank == odd_rank and rnd == odd_round, form)
        checked = []
        for b in rt.plan.boundaries:
            if b.op != "broadcast":
                continue
            shapes = [rt.plan.live_shape(f, live) for f in b.fields]
            values = {f.decision: gen(rt.rank, rnd, f.decision, s, f.dtype) for f, s in zip(b.fields, shapes)}
            out = rt.converge(b.id, values, round=rnd, live_rows=live, requests=requests)
            source = rt.ranks[b.family][b.source_member]
            checked += [(out[f.decision], gen(source, rnd, f.decision, s, f.dtype))
                        for f, s in zip(b.fields, shapes)]
        rt.check_round()  # the device path's one read per round
        assert all(torch.equal(a, b) for a, b in checked)
        print(f"USED {rnd}", flush=True)
    rt.close()
    return {"rank": rt.rank}


def nosync(plan_path: str) -> dict:
    """Device path with the rows as device tensors: record every host read inside the
    converges (the digest is torch ops on the device, the word compared by the guard)."""
    from specplan.runtime.host_sync import HostSyncRecorder

    rt = bind(plan_path, hot_path="device")
    hot, live, calls = HostSyncRecorder(), 4, 0
    for rnd in (1, 2):
        requests = Batch(torch.tensor([10, 11, 12, 13]), torch.tensor([0, rnd, 0, 0], dtype=torch.int32))
        for b in rt.plan.boundaries:
            if b.op != "broadcast":
                continue
            values = {f.decision: gen(rt.rank, rnd, f.decision, rt.plan.live_shape(f, live), f.dtype)
                      for f in b.fields}
            with hot:
                rt.converge(b.id, values, round=rnd, live_rows=live, requests=requests)
            calls += 1
        rt.check_round()
    rt.close()
    return {"rank": rt.rank, "calls": calls, "hot": hot.events}


def late(plan_path: str, site: str, k: str, held: str) -> dict:
    """PP: the last stage relays `site` every round; stage 0 consumes round r's relay at round
    r + k, passing the batch it held for round r (`held` = "sent") or its current one
    ("current"). Row 1's state is reused at round 3 (same slot, generation 1)."""
    rt = bind(plan_path)
    k, live, rounds = int(k), 4, 6
    r = rt.plan.relay_of(site)
    last = rt.ranks["pp"][-1]
    history = BatchHistory(depth=k + 1)

    def batch_of(rnd):
        return Batch([0, 1, 2, 3], [0, 1 if rnd >= 3 else 0, 0, 0])

    def relay_for(rnd, requests):
        shapes = [rt.plan.live_shape(f, live) for f in r.fields]
        values = {f.decision: gen(last, rnd, f.decision, s, f.dtype) for f, s in zip(r.fields, shapes)}
        out = rt.relay(site, values if rt.rank == last else None, round=rnd, live_rows=live,
                       requests=requests)
        assert all(torch.equal(out[d], values[d]) for d in values)

    consumed = []
    for t in range(rounds + k):
        if rt.rank == last:
            if t < rounds:
                relay_for(t, batch_of(t))
            continue
        if t < rounds:
            history.record(t, batch_of(t))
        if t >= k:
            sent = t - k
            relay_for(sent, history.at(sent) if held == "sent" else batch_of(min(t, rounds - 1)))
            consumed.append([t, sent])
    rt.close()
    return {"rank": rt.rank, "consumed": consumed}


def halves(plan_path: str, site: str, odd: str) -> dict:
    """A relay carried in the engine's own message (SGLang's PP output dict): the last stage
    makes the bytes with `relay_out`, the test sends them stage to stage as the engine would
    (last -> 0 -> 1 ...), every earlier stage checks them with `relay_in`. `odd`: "none"; "gen"
    (stage 0 holds a reused row 1 at round 2); "round" (stage 0 counts one round ahead at 2).
    Prints `USED <round>` after each round whose relay was checked."""
    import torch.distributed as dist

    rt = bind(plan_path)
    r, live = rt.plan.relay_of(site), 4
    pp = rt.ranks["pp"]
    me, last = pp.index(rt.rank), len(pp) - 1
    for rnd in (1, 2, 3):
        shapes = [rt.plan.live_shape(f, live) for f in r.fields]
        values = {f.decision: gen(pp[last], rnd, f.decision, s, f.dtype) for f, s in zip(r.fields, shapes)}
        reused = odd == "gen" and me == 0 and rnd == 2
        requests = Batch(REQUESTS, [0, 1 if reused else 0, 0, 0])
        message = [None]  # the engine's message: pickled here, a tensor dict in SGLang
        if me == last:
            message[0] = rt.relay_out(site, values, round=rnd, live_rows=live, requests=requests)
            dist.send_object_list(message, dst=pp[0], group=rt.groups["pp"])
            continue
        dist.recv_object_list(message, src=pp[me - 1 if me else last], group=rt.groups["pp"])
        if me + 1 < last:
            dist.send_object_list(message, dst=pp[me + 1], group=rt.groups["pp"])  # as it came
        wire = message[0]
        claimed = rnd + 1 if odd == "round" and me == 0 and rnd == 2 else rnd
        out = rt.relay_in(site, wire, round=claimed, live_rows=live, requests=requests)
        assert all(torch.equal(out[d], values[d]) for d in values)
        print(f"USED {rnd}", flush=True)
    return {"rank": rt.rank}


def main(argv: list[str]) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    serve(globals(), argv)


if __name__ == "__main__":  # pragma: no cover
    print(json.dumps(ODD))
