"""Collectives per decode round: SGLang's converges beside specplan's fused plan.

For every method under policy `all` on one representative topology (sglang TP4, no PP, no
DP-attention, max_batch 64), this prints the broadcasts SGLang 0.5.23 issues per decode
round to keep its TP ranks in agreement, next to the converge boundaries (one collective
each) in specplan's plan, and, where specplan cannot fuse two boundaries, the dependency
that keeps them apart (plan.json `unfused`).

    .venv/bin/python benchmarks/bench_fusion.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from specplan import compile
from specplan.schema import load_spec

import shared  # noqa: F401  (puts the repository root on sys.path for tests.golden)
from tests.golden.plans.make_specs import METHODS as GOLDEN_METHODS

GAMMA = 7  # DSpark gamma and DFlash block size - 1
# The golden matrix's methods at one depth: 3 steps, ngram its 4, the block methods gamma.
STEPS = {"mtp": 3, "standalone": 3, "dspark": GAMMA}
METHODS = {name.replace("-", " "): {**sp, **({"num_steps": STEPS[name]} if name in STEPS else {})}
           for name, sp in GOLDEN_METHODS.items()}

# SGLang 0.5.23, decode round, CUDA, SGLANG_SPEC_TP_SYNC=all (its default), counted from
# /work/shared/reference/decisions.md:
# - none: the generic sampler's token sync is off by default (§0.3): 0.
# - EAGLE family (eagle, eagle3, mtp, standalone) and ngram: `eagle_sample` broadcasts
#   predict, accept_index and num_correct_drafts only on sampling paths (CUDA greedy: none),
#   three separate broadcasts (§0.2, §2); drafts and tree topology are never converged (§10.1).
# - DFlash: greedy syncs target_predict at DFLASH_ACCEPT_GREEDY (1); sampling syncs accept_len
#   and bonus at DFLASH_ACCEPT_SAMPLE, one SpecTpSync.sync call each (2) (§3, §0.1).
# - DSpark: DSPARK_DRAFT once per Markov step (gamma), DSPARK_PLAN (1), then
#   build_accept_outs syncs correct_len, bonus, cap_trim_lens one by one (3): gamma + 4 on
#   either path (§4).
SGLANG = {
    ("none", "greedy"): 0, ("none", "sampling"): 0,
    **{(m, "greedy"): 0 for m in ("eagle chain", "eagle tree", "eagle3", "mtp", "standalone", "ngram")},
    **{(m, "sampling"): 3 for m in ("eagle chain", "eagle tree", "eagle3", "mtp", "standalone", "ngram")},
    ("dflash", "greedy"): 1, ("dflash", "sampling"): 2,
    ("dspark", "greedy"): GAMMA + 4, ("dspark", "sampling"): GAMMA + 4,
}


def spec_text(label: str, sampling: str) -> str:
    sp = dict(METHODS[label])
    if sp["method"] != "none":
        sp["sampling"] = sampling
    inner = ", ".join(f"{k}: {v}" for k, v in sp.items())
    return f"""name: fusion
engine: sglang
topology: {{tp: 4}}
model: {{num_layers: 32, hidden_size: 4096, vocab_size: 128256}}
speculative: {{{inner}}}
sync: {{policy: all}}
runtime: {{max_batch: 64}}
"""


def planned(text: str) -> dict:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "spec.yaml"
        path.write_text(text)
        return compile(load_spec(path))


def short(node: str) -> str:
    return node.split(":", 1)[1].split("@")[0].replace("decode.", "")


def main() -> None:
    print(f"{'method':<12} {'sampling':<9} {'sglang':>6} {'specplan':>8} {'decode sites (boundaries)':<56} unfused because")
    for label in METHODS:
        for sampling in ("greedy", "sampling"):
            out = planned(spec_text(label, sampling))
            decode = [b for b in out["boundaries"] if b["round"] == "decode"]
            sites = " | ".join("+".join(b["sites"]) for b in decode)
            why = "; ".join(f"{u['after']}->{u['before']}: " + " > ".join(short(n) for n in u["dependency"])
                            for u in out["unfused"])
            print(f"{label:<12} {sampling:<9} {SGLANG[(label, sampling)]:>6} {len(decode):>8} {sites:<56} {why or '-'}")


if __name__ == "__main__":
    main()
