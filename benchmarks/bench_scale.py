"""How the cost of check, compile, explain and explain --json grows with the ranks, 1K to 1M.

The shape is a large vLLM cluster: tp 8 x pp 8 x dp N with EAGLE3 (1,024 to 1,048,576
ranks), and a deployment of two instances of half the ranks each (prefill tp 8 x pp 8 x dp
N/128, decode tp 8 x dp N/16). Every run is the real CLI in a fresh process, interpreter start
included, as a user sees it; time is wall seconds and the child's CPU seconds (user + system,
from wait4: on a shared machine wall time mostly measures the neighbours, so the targets are
judged on CPU seconds), memory the child's peak RSS, each the median of --repeat runs. With
--before DIR (another checkout, e.g. main) each point is also run on that code, alternating
with this one, so both columns see the same neighbours.

Targets (issue 26): check and compile at 1,048,576 ranks within 2x of 4,096 ranks, in time
and peak memory; explain --json at 1,048,576 within 20x of 65,536 in time, under 400 MiB.
Prints a table and, when matplotlib is installed, writes a log-log plot of time and peak
memory against ranks (--png, default docs/scale.png).

    .venv/bin/python benchmarks/bench_scale.py [--before ../main] [--repeat 3] [--sizes 1024,1048576]

(--before and --after take a directory holding the specplan package, e.g. `git archive main
specplan | tar -x -C /tmp/before`, so a long run does not measure edits made meanwhile.)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
SIZES = [1024, 4096, 16384, 65536, 262144, 1048576]
COMMANDS = ("check", "compile", "explain", "explain --json")
DEPLOYMENT_COMMANDS = ("check", "explain --json")  # its compile is two compiles; tables one instance's
PLOTTED = ("check", "compile", "explain", "explain --json", "deployment check", "deployment explain --json")
MODEL = "{num_layers: 80, hidden_size: 8192, vocab_size: 128256, attention: gqa, num_kv_heads: 8}"


def spec(ranks: int) -> str:
    return f"""name: scale-{ranks}
engine: vllm
topology: {{tp: 8, pp: 8, dp: {ranks // 64}}}
model: {MODEL}
speculative: {{method: eagle3, num_steps: 3}}
"""


def deployment(ranks: int) -> str:
    return f"""name: scale-pd-{ranks}
engine: vllm
model: {MODEL}
speculative: {{method: eagle3, num_steps: 3}}
instances:
  prefill: {{name: p, topology: {{tp: 8, pp: 8, dp: {ranks // 128}}}}}
  decode: {{name: d, topology: {{tp: 8, dp: {ranks // 16}}}}}
"""


def run_once(root: Path, command: str, path: Path, tmp: Path, timeout: float) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak MiB) of one CLI run on the code under `root`."""
    words = command.split()
    args = [words[0], str(path), *words[1:]]
    if words[0] == "compile":
        args += ["-o", str(tmp / "out")]
    env = dict(os.environ, PYTHONPATH=str(root))
    with open(tmp / "stdout", "wb") as out:
        start = time.perf_counter()
        # cwd: `python -m` puts the working directory first on sys.path, ahead of PYTHONPATH
        proc = subprocess.Popen([sys.executable, "-m", "specplan.cli", *args], stdout=out,
                                stderr=subprocess.PIPE, env=env, cwd=tmp)
        try:
            _, status, usage = os.wait4(proc.pid, 0) if timeout <= 0 else _wait(proc, timeout)
        finally:
            err = proc.stderr.read().decode()
            proc.stderr.close()
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 3):  # 3: the command found something, which still measures it
        raise SystemExit(f"{root}: specplan {' '.join(args)}: exit {code}\n{err}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def _wait(proc: subprocess.Popen, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            return pid, status, usage
        time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"specplan ran past {timeout:.0f} s")


def measure(roots: dict[str, Path], sizes: list[int], repeat: int, timeout: float, commands: set[str],
            done=None) -> dict:
    """{(label, command, ranks): (median CPU s, median peak MiB, median wall s)}, the roots
    alternating run by run."""
    results = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for ranks in sizes:
            paths = {"": tmp / f"spec-{ranks}.yaml", "deployment ": tmp / f"pd-{ranks}.yaml"}
            paths[""].write_text(spec(ranks))
            paths["deployment "].write_text(deployment(ranks))
            for kind, path in paths.items():
                for command in DEPLOYMENT_COMMANDS if kind else COMMANDS:
                    if kind + command not in commands:
                        continue
                    runs = {label: [] for label in roots}
                    for _ in range(repeat):
                        for label, root in roots.items():
                            runs[label].append(run_once(root, command, path, tmp, timeout))
                    for label, got in runs.items():
                        key = (label, kind + command, ranks)
                        results[key] = (statistics.median(c for _, c, _ in got),
                                        statistics.median(m for _, _, m in got),
                                        statistics.median(w for w, _, _ in got))
                        cpu, mib, wall = results[key]
                        print(f"  {label:<6} {kind + command:<26} {ranks:>8} ranks {cpu:7.2f} CPU s "
                              f"{wall:7.2f} wall s {mib:7.0f} MiB", flush=True)
            if done is not None:  # a long run leaves its picture so far
                done(results)
    return results


def table(results: dict, roots: dict[str, Path], sizes: list[int]) -> str:
    labels = list(roots)
    head = "| command | ranks | " + " | ".join(f"{lb} CPU s | {lb} wall s | {lb} MiB" for lb in labels) + " |"
    rule = "|---|---:|" + "---:|---:|---:|" * len(labels)
    rows = [head, rule]
    commands = sorted({c for _, c, _ in results}, key=lambda c: (c.startswith("deployment"), c))
    for command in commands:
        for ranks in sizes:
            got = [results.get((lb, command, ranks)) for lb in labels]
            if not any(got):
                continue
            cells = ["{0:.2f} | {2:.2f} | {1:.0f}".format(*g) if g else "- | - | -" for g in got]
            rows.append(f"| {command} | {ranks:,} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def verdicts(results: dict, label: str, sizes: list[int]) -> list[str]:
    """The issue's targets, for the sizes measured."""
    out = []

    def ratio(command: str, big: int, small: int, which: int) -> float | None:
        a, b = results.get((label, command, big)), results.get((label, command, small))
        return a[which] / b[which] if a and b else None

    for command in ("check", "compile"):
        t, m = ratio(command, 1048576, 4096, 0), ratio(command, 1048576, 4096, 1)
        if t is not None:
            ok = t <= 2 and m <= 2
            out.append(f"{label} {command}: 1M / 4K ranks = {t:.2f}x CPU time, {m:.2f}x memory "
                       f"(target <= 2x): {'meets' if ok else 'MISSES'}")
    t = ratio("explain --json", 1048576, 65536, 0)
    if t is not None:
        peak = results[(label, "explain --json", 1048576)][1]
        ok = t <= 20 and peak < 400
        out.append(f"{label} explain --json: 1M / 64K ranks = {t:.2f}x CPU time, peak {peak:.0f} MiB at 1M "
                   f"(target <= 20x, < 400 MiB): {'meets' if ok else 'MISSES'}")
    return out


def plot(results: dict, roots: dict[str, Path], sizes: list[int], png: Path) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ModuleNotFoundError:
        return "no plot: matplotlib is not installed (pip install matplotlib)"
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for which, ax, unit in ((0, axes[0], "CPU seconds (median)"), (1, axes[1], "peak memory, MiB (RSS)")):
        for i, command in enumerate(PLOTTED):
            for label, style in zip(roots, ("-", "--")):
                points = [(n, results[(label, command, n)][which]) for n in sizes
                          if (label, command, n) in results]
                if points:
                    ax.plot(*zip(*points), style, marker="o", markersize=3, color=f"C{i}",
                            label=f"{command}" + (f" ({label})" if label != "after" else ""))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("ranks")
        ax.set_ylabel(unit)
        ax.grid(True, which="both", alpha=0.3)
    axes[1].legend(fontsize=7, loc="upper left")
    fig.suptitle("specplan on vLLM tp 8 x pp 8 x dp N, EAGLE3 (dashed: before)" if len(roots) > 1
                 else "specplan on vLLM tp 8 x pp 8 x dp N, EAGLE3")
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=90)
    return f"wrote {png}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, default=None, help="another checkout, measured side by side")
    ap.add_argument("--after", type=Path, default=HERE, help="the checkout measured (default: this one)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="comma-separated rank counts")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per run")
    ap.add_argument("--png", type=Path, default=HERE / "docs" / "scale.png")
    ap.add_argument("--commands", default=None, help="comma-separated, e.g. 'check,deployment check'")
    ap.add_argument("--save", type=Path, default=None, help="write the medians to this JSON file")
    ap.add_argument("--load", type=Path, nargs="*", default=[], help="add medians saved by --save")
    args = ap.parse_args()
    order = [int(s) for s in args.sizes.split(",")]  # measured in this order (the key sizes first)
    sizes = sorted(order)
    roots = {"after": args.after.resolve()} | ({"before": args.before.resolve()} if args.before else {})
    every = {*COMMANDS, *(f"deployment {c}" for c in DEPLOYMENT_COMMANDS)}
    commands = set(args.commands.split(",")) if args.commands else every
    earlier = {tuple(k): tuple(v) for f in args.load for k, v in json.loads(f.read_text())}

    def done(got: dict) -> None:
        merged = earlier | got
        plot(merged, roots, sorted({n for _, _, n in merged}), args.png)
        if args.save:
            args.save.write_text(json.dumps([[list(k), list(v)] for k, v in merged.items()]))

    results = earlier | measure(roots, order, args.repeat, args.timeout, commands, done)
    sizes = sorted({n for _, _, n in results})
    print()
    print(table(results, roots, sizes))
    print()
    for label in roots:
        print("\n".join(verdicts(results, label, sizes)))
    print("(targets judged on CPU seconds; wall seconds on a shared machine measure the neighbours)")
    print(plot(results, roots, sizes, args.png))


if __name__ == "__main__":
    main()
