"""Issue 21's sweep of valid specs: seeded random specs, engine x method x sampling x topology x
knobs, through explain, check, compile and export (in process, the real CLI), then a sample of
the small ones through simulate, which must agree with check. Prints the exit codes per command
and every exit 1 (an internal error) or disagreement.

    PYTHONPATH=. TRITON_INTERPRET=1 python tools/spec_sweep.py [N] [SIMULATED] [SEED]

N specs (default 300) through explain, check, compile and export, then SIMULATED more
(default 20: two thirds check calls clean, one third ERROR) with at most 4 ranks and a tiny
model through check and simulate, each with drawn simulate options (sim_options: --requests
from 1 to one more than the replicas, so replicas serve none under sampling too, --max-layers
below the model's depth, --seed, --rounds, --json, --trace-dir, --timeout-s). A clean spec
PASSes, an ERROR one FAILs by name; --max-layers may be refused (exit 2) only naming the option.
Topologies reach 64 ranks (tp up to 16, pp up to 4, dp up to 8, cp, DP-attention, ep with a
MoE model); every spec is drawn from the schema's own choices, so exit 2 means the planner or
the schema refused a combination with a message (counted apart, never a crash).
"""
from __future__ import annotations

import json
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path

import yaml
from click.testing import CliRunner

from specplan.cli import main

METHODS = ("none", "eagle", "eagle3", "mtp", "standalone", "ngram", "dflash", "dspark")
TREES = ("eagle", "eagle3", "mtp", "standalone", "ngram")
KNOBS = {"relay": ("broadcast", "column", "ring"), "aux_routing": ("chain", "direct"),
         "relay_drafts": (True, False), "payload_width": ("pinned", "agreed", "dynamic"),
         "draft_layer_ids": ("global", "stage_local"), "tap_ids": ("global", "stage_local")}


def draw(rng: random.Random, i: int, cpu: bool = False) -> dict:
    """A spec; `cpu`: a topology of at most 4 ranks and a tiny model, for simulate."""
    engine = rng.choice(("sglang", "vllm"))
    method = rng.choice(METHODS)
    if cpu:
        while True:
            tp, pp, dp, cp = rng.choice((1, 2)), rng.choice((1, 2, 3)), rng.choice((1, 2)), rng.choice((1, 1, 2))
            if tp * pp * (dp * cp if engine == "vllm" else 1) <= 4:
                break
    else:
        tp, pp = rng.choice((1, 2, 4, 8, 16)), rng.choice((1, 1, 2, 3, 4))
        dp, cp = rng.choice((1, 1, 2, 4, 8)), rng.choice((1, 1, 1, 2))
    topo = {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "device": rng.choice(("cuda", "cuda", "cpu", "npu"))}
    if engine == "sglang" and dp > 1:
        topo["dp_attention"] = rng.random() < 0.6
    layers = rng.randint(max(pp, 4), 8 if cpu else 64)
    model = {"num_layers": layers, "hidden_size": 64 if cpu else rng.choice((64, 2048, 4096)),
             "vocab_size": 512 if cpu else rng.choice((512, 32000, 151936))}
    if cpu:
        topo["device"] = "cpu"
    if rng.random() < 0.3:
        model["moe"] = {"num_experts": 8 if cpu else rng.choice((8, 64, 256)), "top_k": 2}
        if rng.random() < 0.5:
            topo["ep"] = rng.choice((1, 2, 4, 8, tp))
    sp = {"method": method, "sampling": rng.choice(("greedy", "sampling", "mixed"))}
    if method != "none":
        sp["num_steps"] = rng.randint(1, 7)
        if method in TREES and rng.random() < 0.4:
            sp["topk"] = rng.choice((2, 4))
            sp["num_draft_tokens"] = rng.randint(2, 1 + sp["topk"] * sp["num_steps"])
    spec = {"name": f"sweep-{i}", "engine": engine, "topology": topo, "model": model, "speculative": sp}
    if rng.random() < 0.2:
        spec["behaviour"] = "engine"
    else:
        sync = {}
        if rng.random() < 0.5:
            sync["policy"] = rng.choice(("safe", "all", "rng", "init", "off"))
        if rng.random() < 0.4:
            sync["group"] = rng.choice(("replica", "attn_tp", "tp"))
        if rng.random() < 0.2:
            sync["idle_ranks"] = "skip"
        spec["sync"] = sync
        spec["pipeline"] = {k: rng.choice(v) for k, v in KNOBS.items() if rng.random() < 0.25}
    return spec


def sim_options(rng: random.Random, spec: dict, where: Path) -> list[str]:
    """Drawn simulate options: requests leaving replicas idle, the shrink, seeds, output forms."""
    t = spec["topology"]
    replicas = t["dp"] if spec["engine"] == "vllm" or t.get("dp_attention") else 1
    opts = ["--rounds", str(rng.randint(1, 3)), "--requests", str(rng.randint(1, replicas + 1))]
    if rng.random() < 0.4:
        opts += ["--max-layers", str(rng.randint(1, spec["model"]["num_layers"]))]
    if rng.random() < 0.3:
        opts += ["--seed", str(rng.choice((1, 2**31, 2**63 - 1)))]
    if rng.random() < 0.25:
        opts += ["--json"]
    if rng.random() < 0.2:
        opts += ["--trace-dir", str(where)]
    if rng.random() < 0.2:
        opts += ["--timeout-s", "60"]
    return opts


def sim_ok(check_code: int, got: int, text: str, opts: list[str]) -> bool:
    """check clean -> PASS, ERROR -> FAIL (JSON: the report's exit code); a --max-layers the
    taps do not fit is exit 2 naming the option, never the sim's own files."""
    if got == 2 and "--max-layers" in opts:
        return "simulate --max-layers" in text and "specplan-sim-" not in text
    if "--json" in opts:
        return got == (0 if check_code == 0 else 3)
    return (got == 0 and "PASS" in text) if check_code == 0 else (got == 3 and "FAIL" in text)


def world(spec: dict) -> int:
    t = spec["topology"]
    ranks = t["tp"] * t["pp"]
    return ranks * t["dp"] * t["cp"] if spec["engine"] == "vllm" else ranks


def run(args: list[str]):
    res = CliRunner().invoke(main, [str(a) for a in args])
    crashed = res.exception is not None and not isinstance(res.exception, SystemExit)
    return (1 if crashed else res.exit_code), res.output, res.exception


def _reason(out: str) -> str:
    """An exit 2's message without the file and the numbers: its class."""
    import re

    line = out.strip().splitlines()[-1] if out.strip() else "(nothing printed)"
    return re.sub(r"\d+", "N", line.split(": ", 1)[-1])[:110]


def main_(n: int, simulated: int, seed: int = 21) -> int:
    rng = random.Random(seed)
    codes: dict[str, Counter] = {c: Counter() for c in ("explain", "check", "compile", "export", "simulate")}
    agreement, bad, refused, options = Counter(), [], Counter(), Counter()
    tmp = Path(tempfile.mkdtemp(prefix="spec-sweep-"))
    for i in range(n):
        spec = draw(rng, i)
        path = tmp / f"s{i}.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        seen = {}
        for cmd, args in (("explain", ["explain", path]), ("check", ["check", path, "--format", "json"]),
                          ("compile", ["compile", path, "-o", tmp / f"o{i}"]), ("export", ["export", path])):
            code, out, exc = run(args)
            codes[cmd][code] += 1
            seen[cmd] = code
            if cmd == "check" and code == 2:
                refused[_reason(out)] += 1
            if code == 1:
                bad.append((cmd, path.read_text(), repr(exc)[:300]))
        if seen["check"] in (0, 3) and seen["compile"] != (0 if seen["check"] == 0 else 3):
            bad.append(("check/compile", path.read_text(), f"check {seen['check']} compile {seen['compile']}"))
        print(i + 1, {k: dict(v) for k, v in codes.items()}, dict(agreement), flush=True, file=sys.stderr)
    quota = {"clean": simulated - simulated // 3, "ERROR": simulated // 3}
    i = n
    while sum(quota.values()) > 0:
        spec = draw(rng, i, cpu=True)
        i += 1
        path = tmp / f"s{i}.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        c, out, _ = run(["check", path, "--format", "json"])
        kind = {0: "clean", 3: "ERROR"}.get(c)
        launch = c == 3 and any("refuses to launch" in f["message"] for f in json.loads(out)["findings"])
        if kind is None or (quota[kind] == 0 and not launch):
            continue
        quota[kind] -= not launch  # a launch refusal fails without a round: counted apart
        opts = sim_options(rng, spec, tmp / f"t{i}")
        for k in range(0, len(opts)):
            if opts[k].startswith("--") and opts[k] not in ("--rounds",):
                options[opts[k]] += 1
        got, text, exc = run(["simulate", path, *opts] + (["--allow-errors"] if c == 3 else []))
        codes["simulate"][got] += 1
        ok = sim_ok(c, got, text, opts)
        kind += " (a launch refusal)" if launch else ""
        agreement[f"check {kind} -> simulate {'agrees' if ok else 'DISAGREES'}"] += 1
        if not ok:
            bad.append(("simulate " + " ".join(opts), path.read_text(), text[-1500:] + repr(exc)[:300]))
        print("simulated", dict(agreement), flush=True, file=sys.stderr)
    print(f"{n} drawn specs (seed {seed}); exit codes per command:")
    for cmd, c in codes.items():
        print(f"  {cmd:8s} {sum(c.values()):4d} runs  {dict(sorted(c.items()))}")
    print("check exit 2, by reason:")
    for reason, k in refused.most_common():
        print(f"  {k:4d}  {reason}")
    print("check vs simulate:", dict(sorted(agreement.items())))
    print("simulate options drawn (runs with each):", dict(sorted(options.items())))
    print("exit 1 or disagreement:", len(bad))
    for b in bad[:20]:
        print("---", b[0], "\n", b[1], b[2])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main_(int(sys.argv[1]) if len(sys.argv) > 1 else 300,
                   int(sys.argv[2]) if len(sys.argv) > 2 else 20,
                   int(sys.argv[3]) if len(sys.argv) > 3 else 21))
