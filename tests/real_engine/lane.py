"""The real-engine lane's helpers: its environment, plans compiled for the tiny models, and
bounded vLLM runs that leave no process behind.

Every vLLM run is a subprocess of the lane's Python in its own session (process group): on a
timeout the whole group is killed, and after every run the group is checked empty (vLLM's
engine core and workers start inside it). Runs see the environment an operator sets:
SPECPLAN_PLAN for the plugin (never SPECPLAN_ALLOW_UNTESTED_ENGINE), VLLM_USE_V2_MODEL_RUNNER=1,
VLLM_CPU_KVCACHE_SPACE and VLLM_CPU_OMP_THREADS_BIND (one core per rank), plus the test-only
sitecustomize (examples/vllm-cpu/site/) that lets vLLM's Triton kernels run in Triton's interpreter.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.helpers import cli

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ENV_SCRIPT = ROOT / "tools" / "vllm_cpu_env.sh"
# The example users run (examples/vllm-cpu/): its tiny models, its Triton shim (site/) and run.sh.
EXAMPLE = ROOT / "examples" / "vllm-cpu"
MODELS_SCRIPT = EXAMPLE / "tiny_models.py"
PROMPTS = [[1, 17, 300, 42, 99], [1, 5, 6, 7]]
MAX_TOKENS = 8
NUM_STEPS = 3
# One engine start and generation: about 1 to 2 minutes alone on 2 cores; up to 7 (TP 2) on
# this lane's machine shared with other jobs (load 13 on 2 cores). A bound, not a figure.
RUN_TIMEOUT_S = 900


@dataclass
class Run:
    """One finished engine process: exit code, output, and what run_llm.py reported."""

    rc: int
    lines: list  # (seconds since start, line), stdout and stderr of every process of the run
    wall_s: float
    result: dict | None

    @property
    def out(self) -> str:
        return "\n".join(line for _, line in self.lines)

    @property
    def tokens(self):
        return None if self.result is None else self.result["tokens"]

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.out.splitlines()[-n:])


def build_env() -> Path:
    """The lane's Python (tools/vllm_cpu_env.sh builds the environment once, keyed by itself)."""
    proc = subprocess.run(["bash", str(ENV_SCRIPT)], capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"{ENV_SCRIPT} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return Path(proc.stdout.strip().splitlines()[-1]) / "bin" / "python"


def cores(n: int) -> str:
    """VLLM_CPU_OMP_THREADS_BIND for n local ranks: one core each ("0|1"), shared if too few."""
    allowed = sorted(os.sched_getaffinity(0))
    return "|".join(str(allowed[i % len(allowed)]) for i in range(n))


def engine_env(ranks: int, plan: Path | None = None, extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPECPLAN_", "VLLM_"))}
    # site/: the example's Triton shim; fault/: the tests' own vLLM plugin (inert unless
    # SPECPLAN_TEST_FAULT_RANK is set); ROOT: this checkout's specplan, whichever checkout
    # the shared environment was last installed from.
    path = os.pathsep.join(str(p) for p in (EXAMPLE / "site", HERE / "fault", ROOT))
    env.update({"PYTHONPATH": path, "SPECPLAN_TEST_TRITON_CPU": "1",
                "VLLM_USE_V2_MODEL_RUNNER": "1", "VLLM_CPU_KVCACHE_SPACE": "1",
                "VLLM_CPU_OMP_THREADS_BIND": cores(ranks),
                # Forked engine core and workers skip re-importing vLLM (most of a start on a CPU).
                "VLLM_WORKER_MULTIPROC_METHOD": "fork", "VLLM_NO_USAGE_STATS": "1",
                "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
    if plan is not None:
        env["SPECPLAN_PLAN"] = str(plan)
    env.update(extra or {})
    return env


def engine_args(models: Path, *, tp: int = 1, pp: int = 1, method: str | None = "draft_model",
                **extra) -> dict:
    """vllm.LLM keyword arguments for the tiny target; `method` None: no speculation."""
    args = {"model": str(models / "target"), "skip_tokenizer_init": True, "enforce_eager": True,
            "dtype": "float32", "max_model_len": 128, "max_num_seqs": 4, "seed": 0,
            "disable_log_stats": False, "tensor_parallel_size": tp, "pipeline_parallel_size": pp}
    if tp * pp > 1:
        args["distributed_executor_backend"] = "mp"
    if method is not None:
        draft = models / ("eagle3" if method == "eagle3" else "draft")
        args["speculative_config"] = {"method": method, "model": str(draft),
                                      "num_speculative_tokens": NUM_STEPS}
    args.update(extra)
    return args


def run_group(cmd: list[str], env: dict, timeout: float, cwd: Path | None = None) -> tuple[int, list, float]:
    """Run cmd in its own session; kill the session on timeout; leave no process behind.
    Returns (exit code, -9 on timeout; [(seconds since start, line)]; seconds until every
    process of the session had ended, or was killed)."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: list = []

    def read():
        for line in proc.stdout:
            lines.append((time.monotonic() - t0, line.rstrip("\n")))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        rc = -9
    # The engine's own processes get a moment to leave after the main one; then they are killed.
    settle = time.monotonic() + (15 if rc != -9 else 0)
    while group_alive(proc.pid) and time.monotonic() < settle:
        time.sleep(0.2)
    wall = time.monotonic() - t0
    kill_group(proc.pid)
    reader.join(timeout=10)
    return rc, lines, wall


def kill_group(pgid: int, grace_s: float = 5.0) -> None:
    """SIGTERM then SIGKILL the process group; return once it is empty."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            if not group_alive(pgid):
                return
            time.sleep(0.1)
    assert not group_alive(pgid), f"process group {pgid} survived SIGKILL"


def group_alive(pgid: int) -> bool:
    """Whether a live (not zombie) process of the group remains (read from /proc)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended while we looked
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def generate(python: Path, args: dict, *, ranks: int, plan: Path | None = None, extra: dict | None = None,
             prompts=PROMPTS, max_tokens: int = MAX_TOKENS, timeout: float = RUN_TIMEOUT_S) -> Run:
    """One offline generation (run_llm.py) in the lane's Python; never raises on engine failure."""
    payload = json.dumps({"engine": args, "prompts": prompts, "max_tokens": max_tokens})
    rc, lines, wall = run_group([str(python), str(HERE / "run_llm.py"), payload],
                                engine_env(ranks, plan, extra), timeout)
    found = [ln for _, ln in lines if ln.startswith("RESULT ")]
    result = json.loads(found[-1][len("RESULT "):]) if found else None
    return Run(rc, lines, wall, result)


def spec(name: str, *, tp: int = 1, pp: int = 1, method: str = "standalone", trace_dir: Path | None = None,
         **extra) -> dict:
    """A spec for the tiny target (examples/vllm-cpu/tiny_models.py), engine vllm, greedy."""
    body = {"name": name, "engine": "vllm", "topology": {"tp": tp, "pp": pp},
            "model": {"num_layers": 4, "hidden_size": 256, "vocab_size": 1024},
            "speculative": {"method": method}, "runtime": {"max_batch": 4}}
    if method != "none":
        body["speculative"].update({"num_steps": NUM_STEPS, "sampling": "greedy"})
    if method == "eagle3":
        body["speculative"]["aux_layers"] = [1, 2, 3]
    if trace_dir is not None:
        body["runtime"]["trace_dir"] = str(trace_dir)
    for key, value in extra.items():
        body.setdefault(key, {}).update(value)
    return body


def specplan_cli(*argv: str, timeout: float = 300):
    """This checkout's `specplan` command, as a subprocess of the test's own Python."""
    return cli(*argv, process=True, env={"PYTHONPATH": str(ROOT)}, timeout=timeout)


def compile_plan(body: dict, out: Path) -> Path:
    """`specplan compile` a spec; returns its plan.json."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{body['name']}.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    proc = specplan_cli("compile", str(path), "-o", str(out / "plan"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out / "plan" / "plan.json"


def engine_error(lines: list[str]) -> str:
    """vLLM's own error in a failed run's output: the last line naming an Error (else the last)."""
    errors = [ln.strip() for ln in lines if ("Error" in ln or "error:" in ln)
              and "See stack trace" not in ln and "See root cause" not in ln]  # pointers, not causes
    return errors[-1] if errors else (lines[-1].strip() if lines else "no output")


def skip_unless_served(tokens, lines: list[str], what: str) -> None:
    """A run without the plugin that did not complete: vLLM's CPU build cannot run `what`;
    the test skips with vLLM's own error."""
    if not tokens:
        pytest.skip(f"vLLM's CPU build does not run {what} without the plugin: {engine_error(lines)}")


def assert_identical(tokens, base_tokens, lines: list[str], trace: Path, ranks: int) -> None:
    """The run with the plugin completed with the tokens of the run without it, every rank
    bound the plan (wrote its trace) and `specplan diff` reads the traces without divergence.
    A refusal fails, naming the plugin's line."""
    said = [ln.strip() for ln in lines if "specplan: " in ln]
    assert tokens is not None, "the run with the plugin did not complete:\n" + "\n".join(
        said[:10] or lines[-40:])
    assert tokens == base_tokens, "the plugin changed tokens"
    files = sorted(p.name for p in trace.glob("rank*.jsonl"))
    assert files == [f"rank{r}.jsonl" for r in range(ranks)], f"traces {files}"
    if ranks > 1:
        diff = specplan_cli("diff", str(trace))
        assert diff.returncode == 0, diff.stdout + diff.stderr
