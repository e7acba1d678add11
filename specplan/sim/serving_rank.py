"""One pipeline stage of `specplan simulate --chunked-prefill`: `python -m specplan.sim.serving_rank
DIR` with RANK, WORLD_SIZE, MASTER_* (started by serving_launch.py, one process per stage).

Every stage runs the same deterministic scheduler (specplan/sim/serving.py); what crosses between
stages goes over gloo:

- the forward: stage 0 embeds each row's tokens (a prompt chunk, or its last sampled token and
  drafts) and sends them stage to stage (point to point, the engine's own traffic); every later
  stage runs on what it received, so what stage 0 got wrong reaches the last stage's verify;
- the entry: the last stage's sampled tokens and next drafts of a round reach the earlier
  stages through the bound runtime, `rt.relay` on the plan's relay site (or, for a plan that
  carries them in the replica-wide accept converge, `rt.converge` on that site), once stage 0
  consumes it, with `round=` the round it was sent for and `requests=` the rows each side holds
  for it: the last stage the rows it sent for (kept in a `BatchHistory` since that round),
  stage 0 the rows its update writes (`Serving.views`). Stage 0 applies the values it received.

With `runtime.batch_identity` the runtime's guard compares the two batches' digests and raises
`BatchMismatch` on the first entry they differ in. Writes DIR/rank<R>.json: outputs, stats and
the error; exit 0, 3 (a BatchMismatch), or 1 (anything else).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

EXIT_FOUND_PROBLEM = 3


class GlooLink:
    """The stages of one pipeline as gloo ranks (tp 1: rank = stage)."""

    def __init__(self, rt, cfg):
        from specplan.runtime.batch import BatchHistory

        self.rt, self.cfg = rt, cfg
        self.stages = list(rt.ranks.get("pp", range(rt.world_size)))
        self.stage = self.stages.index(rt.rank)
        self.last = len(self.stages) - 1
        self.site = cfg.site
        b = rt.plan.relay_of(self.site)
        self.via_relay = b is not None
        if b is None and self.last > 0:  # no pp relay: the replica-wide accept converge
            b = rt.plan.boundary_of(self.site)
        self.boundary = b
        self.history = BatchHistory(depth=cfg.max_rounds)
        self.width = 2 + 2 * cfg.max_drafts  # [count, sampled (1 + drafts), drafts] a row

    # -- the entry ------------------------------------------------------------------------
    def sent(self, e, rows) -> None:
        if self.stage == self.last:
            self.history.record(e.round, _batch(rows))

    def deliver(self, e, t: int, mine, sent):
        live = len(e.rows)
        if self.stage == self.last:
            values, requests = self._pack(e, live), self.history.at(e.round)
        else:
            values, requests = None, _batch(mine)
        call = self.rt.relay if self.via_relay else self.rt.converge
        out = call(self.site, values, round=e.round, live_rows=live, requests=requests)
        return self._unpack(out, live)

    def _widths(self, live: int) -> list[tuple]:
        out = []
        for f in self.boundary.fields:
            shape = self.rt.plan.live_shape(f, live)
            n = 1
            for d in shape:
                n *= d
            out.append((f, shape, n // live))
        total = sum(w for _, _, w in out)
        if total < self.width:
            raise RuntimeError(f"site {self.site} carries {total} values a row; an entry needs "
                               f"{self.width} (sampled tokens and drafts)")
        return out

    def _pack(self, e, live: int) -> dict:
        import torch

        from specplan.runtime.prepared import DTYPES

        d = self.cfg.max_drafts
        m = torch.full((live, sum(w for _, _, w in self._widths(live))), -1, dtype=torch.int64)
        for i, (s, dr) in enumerate(zip(e.sampled, e.drafts)):
            m[i, 0] = len(s)
            m[i, 1:1 + len(s)] = torch.tensor(s)
            m[i, 2 + d:2 + d + len(dr)] = torch.tensor(dr)
        values, col = {}, 0
        for f, shape, w in self._widths(live):
            values[f.decision] = m[:, col:col + w].reshape(shape).to(DTYPES[f.dtype])
            col += w
        return values

    def _unpack(self, out: dict, live: int):
        import torch

        d = self.cfg.max_drafts
        m = torch.cat([out[f.decision].reshape(live, w).to(torch.int64)
                       for f, _, w in self._widths(live)], dim=1).tolist()
        return ([row[1:1 + row[0]] for row in m], [row[2 + d:2 + 2 * d] for row in m])

    # -- the forward ------------------------------------------------------------------------
    def forward(self, t: int, xs: list[list[int]]) -> list[list[int]]:
        import torch
        import torch.distributed as dist

        sizes = [len(x) for x in xs]
        if self.stage == 0:
            flat = torch.tensor([v for x in xs for v in x], dtype=torch.int64)
        else:
            flat = torch.empty(sum(sizes), dtype=torch.int64)
            dist.recv(flat, src=self.stages[self.stage - 1])
        if self.stage < self.last:
            dist.send(flat, dst=self.stages[self.stage + 1])
        vals, out = flat.tolist(), []
        for n in sizes:
            out.append(vals[:n])
            vals = vals[n:]
        return out


def _batch(rows):
    from specplan.runtime.batch import Batch

    return Batch([q for q, _ in rows], [g for _, g in rows])


def run(sim_dir: Path) -> tuple[dict, int]:
    import torch

    from specplan.runtime import bind
    from specplan.sim.serving import RequestSpec, Serving, ServingConfig

    torch.set_num_threads(1)
    raw = json.loads((sim_dir / "serving.json").read_text())
    cfg = ServingConfig(**raw["config"])
    requests = [RequestSpec(q, tuple(p), n) for q, p, n in raw["requests"]]
    rt = bind(str(sim_dir / "plan.json"))
    link = GlooLink(rt, cfg)
    o = Serving(cfg, requests, link).run()
    if o.error is None:
        rt.close()
    return ({"rank": rt.rank, "pipeline_stage": link.stage, "error": o.error, "error_round": o.error_round,
             "known": True, "outputs": {str(q): v for q, v in o.outputs.items()}, "stats": o.stats},
            EXIT_FOUND_PROBLEM if o.error else 0)


def main(argv: list[str]) -> None:
    from specplan.sim.worker import rank_main

    rank_main(argv, lambda sim_dir, rank: run(sim_dir))


if __name__ == "__main__":
    main(sys.argv[1:])
