"""The verdict of a sim run and its report: throughput, acceptance, collectives, phases.

Pass only when every rank finished, every rank of a replica emitted the same tokens for each
request, and (greedy decoding) each request's tokens equal plain greedy decoding of the same
model on one process (`reference.greedy`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

PHASES = ("draft", "target", "accept", "converge", "commit", "probe")


@dataclass
class Verdict:
    ok: bool
    problems: list[str] = field(default_factory=list)
    checked: int = 0  # requests compared with the reference
    agreed: int = 0  # requests whose ranks agreed


def verdict(outcome) -> Verdict:
    v = Verdict(ok=True)
    res = outcome.results
    failed = {r: x["error"] for r, x in res.items() if x.get("error")}
    for rank, err in sorted(failed.items()):
        v.problems.append(f"rank {rank}: {err.splitlines()[0] if err else 'failed'}")
    v.problems.extend(outcome.notes)
    if failed or outcome.notes:
        v.ok = False
        return v
    by_request: dict[str, dict[int, list[int]]] = {}
    for rank, x in res.items():
        for q, toks in x["tokens"].items():
            by_request.setdefault(q, {})[rank] = toks
    if not by_request:
        v.problems.append("no request emitted any token")
    for q, ranks in sorted(by_request.items(), key=lambda kv: int(kv[0])):
        if not any(ranks.values()):
            v.problems.append(f"request {q}: no rank emitted a token")
        elif len({tuple(t) for t in ranks.values()}) > 1:
            v.problems.append(f"request {q}: ranks {sorted(ranks)} emitted different tokens")
        else:
            v.agreed += 1
    if outcome.prepared.plan.speculative.sampling == "greedy" and not v.problems:
        _against_reference(outcome, by_request, v)
    elif not v.problems:
        _against_model(outcome, by_request, v)
    v.ok = not v.problems
    return v


def _against_reference(outcome, by_request: dict, v: Verdict) -> None:
    from specplan.sim.engine import prompt_of
    from specplan.sim.model import ModelConfig
    from specplan.sim.weights import init_weights
    from specplan.sim.reference import greedy

    m = outcome.prepared.model
    cfg = ModelConfig(**{**m, "taps": tuple(m["taps"])})
    w = init_weights(cfg)
    for q, ranks in by_request.items():
        got = next(iter(ranks.values()))
        want = greedy(cfg, prompt_of(outcome.options.seed, int(q), cfg.vocab), len(got), w)
        v.checked += 1
        if got != want:
            at = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
            v.problems.append(f"request {q}: token {at} is {got[at]}, plain greedy decoding "
                              f"gives {want[at]} (first {at} tokens agree)")


def _against_model(outcome, by_request: dict, v: Verdict) -> None:
    """Sampled tokens have no reference, but the target's argmax after each committed prefix,
    and the logit it predicts it with, do: the model on one process, teacher-forced along the
    same tokens. A target that ran other weights (a draft layer landing on a target layer) or
    other inputs (a stage that embedded placeholder drafts) shows here, in the logit when the
    argmax happens to survive it (a float64 model: ranks that summed in another order differ
    by rounding only)."""
    from specplan.sim.engine import prompt_of
    from specplan.sim.model import ModelConfig
    from specplan.sim.weights import init_weights
    from specplan.sim.reference import picks

    m = outcome.prepared.model
    cfg = ModelConfig(**{**m, "taps": tuple(m["taps"])})
    w, seen = init_weights(cfg), set()
    for rank, x in sorted(outcome.results.items()):
        for q, got in x.get("predicted", {}).items():
            if q in seen or not got:
                continue
            seen.add(q)
            prompt = prompt_of(outcome.options.seed, int(q), cfg.vocab)
            want, peaks = (s[len(prompt) - 1:] for s in picks(cfg, prompt + by_request[q][rank][:-1], w))
            if got != want:
                at = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
                v.problems.append(f"request {q}: after token {at} the target (rank {rank}) predicts "
                                  f"{got[at]} where the model on one process predicts {want[at]}: the "
                                  f"target ran other weights or inputs than the model's")
                continue
            scores = x.get("scores", {}).get(q, [])
            off = next((i for i, (a, b) in enumerate(zip(scores, peaks))
                        if abs(a - b) > 1e-6 * max(1.0, abs(b))), None)
            if off is not None:
                v.problems.append(f"request {q}: after token {off} the target (rank {rank}) predicts "
                                  f"{got[off]} with logit {scores[off]:.6g} where the model on one "
                                  f"process gives it {peaks[off]:.6g}: the target ran other weights "
                                  f"or inputs than the model's")


def summary(outcome) -> dict:
    """Numbers for the report and the benchmark, from the result files."""
    res = [x for x in outcome.results.values() if not x.get("error")]
    if not res:
        return {}
    rounds = outcome.options.rounds
    first: dict[int, dict] = {}
    for x in res:  # one rank per replica speaks for its requests
        first.setdefault(x["replica"], x)
    commits = [n for x in first.values() for r, lens in x["commits"].items() if r != "0" for n in lens]
    requests = sum(len(x["requests"]) for x in first.values())
    decode = max(x["decode_s"] for x in res)
    phases = {p: max(x["timers"].get(p, 0.0) for x in res) for p in PHASES}
    return {"rounds": rounds, "requests": requests,
            "tokens_per_round": sum(commits) / max(1, rounds),
            "accept_len": sum(commits) / max(1, len(commits)),
            "rounds_per_s": rounds / decode if decode else 0.0,
            "collectives": max(x["calls"] for x in res), "bytes": max(x["bytes"] for x in res),
            "phases": phases, "decode_s": decode,
            "converge_share": phases["converge"] / decode if decode else 0.0}


def simulated(plan) -> tuple[str, str]:
    """(behaviour, policy) of the plan simulated: a `behaviour: engine` plan runs the engine's
    own converges unless the spec writes sync.policy (a knob, or the engine's own preset)."""
    mode = plan.behaviour.mode
    if mode == "engine" and "sync.policy" not in plan.source.lines:
        return mode, f"{plan.engine} default"
    return mode, plan.sync.policy


def unconverged(plan) -> list[str]:
    """The sites a plan leaves unconverged over groups of more than one rank."""
    wide = {f.name for f in plan.families if f.group_size > 1}
    return [s.name for s in plan.sites if not s.converge and s.family in wide]


def report_json(outcome, v: Verdict, exit_code: int) -> dict:
    """`specplan simulate --json`: one object.

    name, world_size, replicas, method, sampling, behaviour (engine | specplan), policy (the
    sync.policy, or "<engine> default" for an engine's own plan), unconverged (sites left
    unconverged over groups of more than one rank): the plan simulated; rounds,
    requests, seed, inject ("" when none): the run; shrunk: what was shrunk for the CPU, in
    words; summary: per decode round tokens_per_round, accept_len, collectives and bytes (per
    rank, the busiest rank's mean), rounds_per_s, decode_s and phases (seconds per phase,
    slowest rank), or {} when no rank finished; verdict: ok, agreed (requests whose ranks
    agreed), checked (requests compared with plain greedy decoding; 0 under sampling) and
    problems (one line each); acceptance: mean (accepted length per request per decode
    round, overall) and replicas (the same per replica); trace_dir: where the ranks wrote their
    traces (--trace-dir), or null; exit_code: what the command exits with.
    """
    from specplan.sim.traces import acceptance

    plan, opt = outcome.prepared.plan, outcome.options
    s = summary(outcome)
    keep = ("tokens_per_round", "accept_len", "collectives", "bytes", "rounds_per_s", "decode_s", "phases")
    behaviour, policy = simulated(plan)
    return {"name": plan.name, "world_size": plan.world_size, "replicas": outcome.prepared.replicas,
            "method": plan.speculative.method, "sampling": plan.speculative.sampling,
            "behaviour": behaviour, "policy": policy, "unconverged": unconverged(plan),
            "rounds": opt.rounds, "requests": opt.requests, "seed": opt.seed,
            "inject": opt.inject, "shrunk": list(outcome.prepared.shrunk),
            "summary": {k: s[k] for k in keep} if s else {},
            "verdict": {"ok": v.ok, "agreed": v.agreed, "checked": v.checked, "problems": list(v.problems)},
            "acceptance": acceptance(outcome), "trace_dir": outcome.trace_dir, "exit_code": exit_code}


def render(outcome, v: Verdict, console) -> None:
    from rich.table import Table
    from rich.text import Text

    plan, opt = outcome.prepared.plan, outcome.options
    behaviour, policy = simulated(plan)
    console.print(Text.assemble((plan.name, "bold"), f": world {plan.world_size}, "
                  f"{outcome.prepared.replicas} replica(s), method {plan.speculative.method} "
                  f"({plan.speculative.sampling}), behaviour {behaviour}, policy {policy}, "
                  f"{opt.rounds} rounds, {opt.requests} requests, seed {opt.seed}"
                  + (f", inject {opt.inject}" if opt.inject else "")))
    left = unconverged(plan)
    if behaviour == "engine":
        console.print(f"the engine's own plan: {len(plan.boundaries)} converge boundaries; "
                      f"unconverged: {', '.join(left) or 'none'}")
    if outcome.prepared.shrunk:
        console.print("shrunk for the CPU: " + "; ".join(outcome.prepared.shrunk))
    s = summary(outcome)
    if s:
        t = Table(title="per round")
        for col in ("tokens/round", "accept length", "collectives/rank", "bytes/rank", "rounds/s"):
            t.add_column(col, justify="right")
        t.add_row(f"{s['tokens_per_round']:.2f}", f"{s['accept_len']:.2f}",
                  f"{s['collectives']:.1f}", f"{s['bytes']:.0f}", f"{s['rounds_per_s']:.1f}")
        console.print(t)
        p = Table(title="time by phase (slowest rank, decode rounds)")
        for ph in PHASES:
            p.add_column(ph, justify="right")
        p.add_row(*(f"{s['phases'][ph]:.3f}s" for ph in PHASES))
        console.print(p)
    if outcome.trace_dir:
        console.print(f"traces: {outcome.trace_dir}/rank<R>.jsonl, ranks 0-{plan.world_size - 1} "
                      "(specplan diff; diff --acceptance compares two runs)")
    if v.ok:
        ref = (f"; {v.checked} requests token-identical to plain greedy decoding"
               if v.checked else "; sampling: no reference, ranks compared")
        console.print(Text.assemble(("PASS", "green"), ": every replica's ranks agreed on every "
                                    f"decision ({v.agreed} requests){ref}"))
        return
    console.print(Text.assemble(("FAIL", "red"), ":"))
    for problem in v.problems:  # rank errors quote gloo ("[/...pair.cc:553]"): never markup
        console.print(Text(f"  {problem}"))
