"""Issue 21's hostile sweep: every category of hostile file and option through the real CLI
(in process), with the exit codes seen per category; any exit 1 (an internal error) is listed.

    PYTHONPATH=. python tools/hostile_sweep.py [SEED]

Categories: paths (devices, FIFOs, over-long names, folders, missing), files (binary, non-UTF-8,
empty, oversized), yaml (depth, alias chains and bombs, tags, duplicate keys), sizes (every
count key x hostile values), diff (malformed trace lines, --threshold), import (sizes, configs,
model configs, scripts), plans (re-fingerprinted edits of every plan.json leaf), keys (every
top-level section null or of the wrong kind, engine_args of unknown flags, stray words, open
quotes, shell and YAML tags, through check, explain and export), simulate (every option at its
edges: --max-layers below the taps, --requests leaving replicas idle under sampling, seeds,
rounds, --json, --trace-dir, --timeout-s, --inject, --chunked-prefill). Address space
is capped at 6 GiB, so an unbounded read fails here instead of swapping.
"""
import json, os, random, resource, shutil, sys, tempfile
from collections import Counter, defaultdict
from pathlib import Path
from click.testing import CliRunner
resource.setrlimit(resource.RLIMIT_AS, (6 * 2**30, 6 * 2**30))
from specplan.cli import main
from specplan.plan.artifact import fingerprint

T = Path(tempfile.mkdtemp(prefix="sweep-"))
SPEC = Path("specs/llama-3.2-1b-eagle3-pp2.yaml").read_text()
codes = defaultdict(Counter)
ones = []
SEED = int(sys.argv[1]) if len(sys.argv) > 1 else 21
random.seed(SEED)

def run(cat, *args):
    res = CliRunner().invoke(main, [str(a) for a in args])
    bad = res.exception is not None and not isinstance(res.exception, SystemExit)
    code = 1 if bad else res.exit_code
    codes[cat][code] += 1
    if code == 1:
        ones.append((cat, args, repr(res.exception)[:200]))

def w(name, body):
    p = T / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(body if isinstance(body, bytes) else body.encode())
    return p

# paths
for cmd in ("check", "explain", "compile", "export", "simulate"):
    for path in ["/dev/zero", "/dev/null", "/dev/urandom", T / ("a" * 256 + ".yaml"), T / ("a" * 300) / "x.yaml",
                 T / "missing.yaml", T, "/proc/self/status", "/etc/shadow"]:
        run("paths", cmd, path)
os.mkfifo(T / "fifo.yaml")
run("paths", "check", T / "fifo.yaml")
for body in (b"\xff\xfe", b"\x00" * 10, b"", b"#only\n", b"[1, 2]", b"name: x\n" * 10, SPEC.encode() + b"#" + b"x" * (1 << 20)):
    for cmd in ("check", "explain"):
        run("files", cmd, w(f"f{random.random()}.yaml", body))
# yaml structure
nest = lambda inner, d: "[" * d + inner + "]" * d
for depth in (5, 20, 31, 32, 33, 100, 5000):
    run("yaml", "check", w(f"d{depth}.yaml", SPEC + "x: " + nest("1", depth) + "\n"))
for links, width in ((5, 30), (20, 30), (40, 1), (100, 1)):
    chain = "a0: &a0 " + nest("1", width) + "\n" + "".join(f"a{i}: &a{i} {nest(f'*a{i-1}', width)}\n" for i in range(1, links))
    run("yaml", "check", w(f"c{links}-{width}.yaml", SPEC + chain))
for fan in (2, 5, 10):
    bomb = "a: &a [x]\n" + "".join(f"{c}: &{c} [{', '.join([f'*{p}'] * fan)}]\n" for p, c in zip("abcdefghij", "bcdefghijk"))
    run("yaml", "check", w(f"b{fan}.yaml", SPEC + bomb))
for extra in ("!!python/object:os.system {}", "&x [*x]", "<<: {a: 1}", "!!binary aGk=", "2024-01-01", "{? [1]: 2}"):
    run("yaml", "check", w(f"t{random.random()}.yaml", SPEC + f"extra: {extra}\n"))
run("yaml", "check", w("dup.yaml", SPEC + "name: again\n"))
# sizes: every count key, hostile values
KEYS = [("topology", k) for k in ("tp", "pp", "dp", "cp", "dcp", "ep", "moe_dp", "nodes")] + \
       [("model", k) for k in ("num_layers", "hidden_size", "vocab_size", "num_kv_heads", "page_size")] + \
       [("speculative", k) for k in ("num_steps", "topk", "num_draft_tokens", "draft_tp", "draft_num_layers")] + \
       [("runtime", k) for k in ("max_batch", "timeout_s", "probe_every")]
VALUES = [0, -1, 2**31, 2**63, 2**64, 10**12, "10**5000", 1.5, "1e400", ".nan", ".inf", "true", "'3'", "[1]", "{a: 1}", "null"]
for section, key in KEYS:
    for v in VALUES:
        v = "1" + "0" * 5000 if v == "10**5000" else v
        text = SPEC.replace(f"{section}:\n", f"{section}:\n  {key}: {v}\n", 1) if f"{section}:\n" in SPEC else SPEC + f"{section}:\n  {key}: {v}\n"
        run("sizes", "check", w(f"s-{section}-{key}-{random.random()}.yaml", text))
for v in ("[" + ",".join(["1"] * 200000) + "]", "[2, 1099511627776]", "[-1]", "[16]", "[]"):
    run("sizes", "check", w(f"aux{random.random()}.yaml", SPEC.replace("  sampling: greedy", f"  sampling: greedy\n  aux_layers: {v}")))
# diff traces
good = {"round": 0, "site": "s", "decision": "accepted_len", "hash": 1, "request": 0, "accepted": 3, "fingerprint": "f" * 64}
def runs(name, line):
    d = T / name; d.mkdir()
    (d / "rank0.jsonl").write_bytes(line if isinstance(line, bytes) else (line + "\n").encode())
    (d / "rank1.jsonl").write_text(json.dumps(good) + "\n")
    return d
A = runs("A", json.dumps(good))
variants = [json.dumps(good)[:k] for k in range(1, len(json.dumps(good)), 7)]
for key in good:
    for v in (None, "x", 1e400, -1, [], {}, True, 2**70):
        variants.append(json.dumps({**good, key: v}).replace("Infinity", "1e400"))
    variants.append(json.dumps({k: v for k, v in good.items() if k != key}))
variants += ["[1]", "1", "null", '"x"', "{" * 100000, b"\xff", b"\x00", ""]
for i, v in enumerate(variants):
    d = runs(f"B{i}", v)
    run("diff", "diff", "--acceptance", A, d)
    run("diff", "diff", T / f"B{i}" / "rank0.jsonl", A / "rank0.jsonl")
for th in ("nan", "inf", "-1", "1e400", "abc", "101", "0"):
    run("diff", "diff", "--acceptance", A, A, "--threshold", th)
# import
base = ["--base", "specs/llama-3.2-1b-eagle3-pp2.yaml"]
VL = ["import", "--engine", "vllm", *base, "--", "vllm", "serve", "m"]
SG = ["import", "--engine", "sglang", *base, "--", "python", "-m", "sglang.launch_server", "--model-path", "m"]
for flag in ("--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size", "--nnodes",
             "--decode-context-parallel-size", "--max-num-seqs"):
    for v in ("0", "-1", "abc", "1e3", "99999999999999999999", ""):
        run("import", *VL, flag, v)
for flag in ("--tp-size", "--pp-size", "--dp-size", "--nnodes", "--ep-size", "--speculative-num-steps"):
    for v in ("0", "-1", "abc", "99999999999999999999"):
        run("import", *SG, flag, v)
for key, v in (("num_speculative_tokens", "abc"), ("num_speculative_tokens", "0"), ("method", "nope"),
               ("draft_tensor_parallel_size", "x"), ("model", "[1]")):
    run("import", *VL, "--speculative-config.method", "eagle3", f"--speculative-config.{key}", v)
for body in (b"tensor-parallel-size: \xff\n", "seed: 2024-01-01\n", "a: &a [1]\nb: *a\n", "[1, 2]", "x: [", "",
             "hf-overrides: {d: 2024-01-01}\n", "tensor-parallel-size: *nope\n"):
    run("import", *VL, "--config", w(f"cfg{random.random()}.yaml", body))
run("import", *VL, "--config", "/dev/zero")
for body in (b'{"a": "\xff"}', "[1]", '{"text_config": [1]}', "{", '{"num_hidden_layers": "x"}', "null", ""):
    run("import", "import", "--engine", "vllm", "--model-config", w(f"mc{random.random()}.json", body), "--", "vllm", "serve", "m")
for body in ("vllm serve 'm\n", "vllm serve m \\", 'vllm serve "m', "export X=(\n", "vllm serve m $(", b"\xff"):
    run("import", "import", "--engine", "vllm", *base, "-f", w(f"sc{random.random()}.sh", body))
# plan.json edits, fingerprint recomputed
out = T / "out"
run("plans", "compile", "specs/qwen3-32b-eagle3-dp2-pp2-cp2.yaml", "-o", out)
plan = json.loads((out / "plan.json").read_text())
def leaves(obj, path=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from leaves(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:3]):
            yield from leaves(v, path + (i,))
    else:
        yield path
paths = [p for p in leaves(plan) if p[0] not in ("fingerprint",)]
random.shuffle(paths)
for p in paths[:150]:
    for v in (-1, 0, 3, 2**40, None, "x"):
        edited = json.loads(json.dumps(plan))
        node = edited
        for k in p[:-1]:
            node = node[k]
        node[p[-1]] = v
        try:
            edited["fingerprint"] = fingerprint(edited)
        except Exception:
            pass
        f = T / "plans" / f"{len(list(codes['plans'].elements()))}.json"
        f.parent.mkdir(exist_ok=True)
        f.write_text(json.dumps(edited))
        run("plans", "check", f)
# keys: every section null or of another kind; engine_args the parser refuses
SMALL = ("name: k\nengine: {e}\ntopology: {{tp: 2}}\nmodel: {{num_layers: 4, hidden_size: 64, "
         "vocab_size: 512}}\n")
for e in ("sglang", "vllm"):
    for key in ("disaggregation", "speculative", "sync", "pipeline", "runtime", "engine_args",
                "engine_version", "behaviour", "instances", "connector"):
        for v in ("null", "[]", "{}", "1", "x", "{role: null}", "[null]"):
            path = w(f"k-{e}-{key}-{random.random()}.yaml", SMALL.format(e=e) + f"{key}: {v}\n")
            for cmd in ("check", "explain", "export"):
                run("keys", cmd, path)
    for args in ('["--x"]', '["--tp-size 2", "a b"]', '["--tensor-parallel-size 2", "a b"]', '["\'x"]',
                 '["$(touch /tmp/pwned)"]', '["--model-path", "!!python/object:os.system"]', '[1, 2]',
                 '["--help"]', '["--version"]', '["-h"]', '["--tp-size=abc"]', '["X=1"]'):
        path = w(f"ea-{e}-{random.random()}.yaml", SMALL.format(e=e) + f"engine_args: {args}\n")
        for cmd in ("check", "explain", "export", "compile"):
            run("keys", cmd, path, *(["-o", T / "ea-out"] if cmd == "compile" else []))
# simulate: every option at its edges (small specs, a few rounds)
SIM = ("name: sim\nengine: sglang\ntopology: {{tp: 2, dp: 2, dp_attention: true}}\nmodel: {{num_layers: "
       "16, hidden_size: 64, vocab_size: 512}}\nspeculative: {{method: {m}, num_steps: 3, sampling: {s}}}\n")
for m, s in (("dspark", "mixed"), ("mtp", "sampling"), ("eagle3", "greedy")):
    path = w(f"sim-{m}.yaml", SIM.format(m=m, s=s))
    for opts in (["--max-layers", "1"], ["--max-layers", "2"], ["--max-layers", "3"], ["--requests", "1"],
                 ["--seed", str(2**63 - 1), "--requests", "1"], ["--json", "--requests", "1", "--max-layers", "4"],
                 ["--trace-dir", T / f"tr-{m}", "--requests", "3"], ["--timeout-s", "1e400"],
                 ["--inject", "noise", "--requests", "1"], ["--chunked-prefill", "2", "--requests", "1"],
                 ["--max-layers", "0"], ["--requests", "0"], ["--rounds", "0"]):
        run("simulate", "simulate", path, "--rounds", "2", *opts)
shutil.rmtree(T, ignore_errors=True)
total = 0
for cat, c in codes.items():
    n = sum(c.values()); total += n
    print(f"{cat:8s} {n:5d} inputs  exit codes {dict(sorted(c.items()))}")
print("seed", SEED, "total", total, "exit 1:", len(ones))
for o in ones[:30]:
    print("EXIT1", o)
sys.exit(1 if ones else 0)
