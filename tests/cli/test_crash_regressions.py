"""Issue 13's crashes on valid specs, each reproduced through the CLI and kept fixed.

- explain (tables, --json, --rank, pictures) with pp > 1 and payload_width: dynamic
  (TypeError: a collective's bytes is None);
- compile of DSpark / DFlash with sampling: mixed (AssertionError "two accept sites" after
  plan.json was written) and compile leaving a half-written folder;
- simulate of a mixed DSpark / DFlash plan and of an EAGLE chain with num_draft_tokens <
  num_steps + 1 (a shape error on one rank, a timeout on the other);
- rank errors printed as rich markup ("[/...pair.cc:553]" raised MarkupError);
- simulate of a spec check rejects (it ran and passed).
"""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace

import pytest

from specplan.commands.common import console
from tests.helpers import cli

ROOT = Path(__file__).resolve().parents[2]
PP2 = (ROOT / "specs" / "llama-3.2-1b-eagle3-pp2.yaml").read_text()
SMALL = """name: {name}
engine: {engine}
topology: {{tp: 2, pp: {pp}, device: cpu}}
model: {{num_layers: 8, hidden_size: 64, vocab_size: 512}}
speculative: {{{speculative}}}
sync: {{policy: all}}
runtime: {{max_batch: 8, timeout_s: 20}}
"""
GLOO_ERROR = "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed"


def write(tmp: Path, text: str, name: str = "spec.yaml") -> str:
    (tmp / name).write_text(text)
    return str(tmp / name)


def small(tmp: Path, method: str, sampling: str, pp: int = 1, engine: str = "sglang", **extra) -> str:
    spec = f"method: {method}, num_steps: 3, sampling: {sampling}" + "".join(
        f", {k}: {v}" for k, v in extra.items())
    return write(tmp, SMALL.format(name=f"{method}-{sampling}", engine=engine, pp=pp, speculative=spec))


def test_explain_pp2_with_a_dynamic_payload_width(tmp_path):
    spec = write(tmp_path, PP2 + "pipeline:\n  payload_width: dynamic\n")
    assert "at run-time width" in cli("explain", spec, code=0).output
    cli("explain", spec, "--json", code=0)
    cli("explain", spec, "--rank", "1", code=0)
    for kind, fmt in (("round", "svg"), ("round", "mermaid"), ("round", "dot"), ("ranks", "svg")):
        cli("explain", spec, "--picture", kind, "--format", fmt, "-o", str(tmp_path / f"x.{fmt}"), code=0)


@pytest.mark.parametrize("method", ["dspark", "dflash"])
@pytest.mark.parametrize("pp", [1, 2])
def test_compile_a_mixed_batch(tmp_path, method, pp):
    spec = small(tmp_path, method, "mixed", pp=pp, engine="vllm")
    out = cli("compile", spec, "-o", str(tmp_path / "out"), code=0).output
    assert "(runtime module)" in out
    module = next((tmp_path / "out").glob("runtime_*.py")).read_text()
    assert "accept_site=None" in module and "finalize(rt, accept_site," in module


def test_compile_publishes_every_file_or_none(tmp_path, monkeypatch):
    import specplan.lower.fx_module as fx

    def broken(plan, out_dir):
        (Path(out_dir) / "runtime_half.py").write_text("# half")
        raise RuntimeError("the runtime module failed half way")

    monkeypatch.setattr(fx, "write_runtime_module", broken)
    spec = small(tmp_path, "dspark", "greedy")
    res = cli("compile", spec, "-o", str(tmp_path / "out"))
    assert isinstance(res.exception, RuntimeError)
    assert not (tmp_path / "out").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.yaml"]  # no staging left


def test_untrusted_text_prints_literally_in_every_printer():
    from specplan.sim.report import Verdict, render
    from specplan.verify.findings import Finding
    from specplan.verify.report import render_findings

    out = console()
    out.file = io.StringIO()
    plan = SimpleNamespace(name="p", fingerprint="0" * 64, world_size=2,
                           source=SimpleNamespace(spec_file="[s].yaml"),
                           speculative=SimpleNamespace(method="eagle", sampling="greedy"),
                           sync=SimpleNamespace(policy="safe"),
                           behaviour=SimpleNamespace(mode="specplan"), families=(), sites=())
    render_findings(plan, [Finding(severity="ERROR", site="[site]", group="tp", ranks=(0,),
                                   round="decode", line=3, message=GLOO_ERROR, fix="[/x]")], out)
    outcome = SimpleNamespace(prepared=SimpleNamespace(plan=plan, replicas=1, shrunk=["[/y]"]),
                              options=SimpleNamespace(rounds=1, requests=1, seed=0, inject=""),
                              results={}, trace_dir=None)
    render(outcome, Verdict(ok=False, problems=[f"rank 1: {GLOO_ERROR}"]), out)
    text = out.file.getvalue()
    assert GLOO_ERROR in text and "[/x]" in text and "[s].yaml:3" in text and "[/y]" in text


def test_simulate_refuses_a_spec_check_rejects():
    spec = str(ROOT / "tests" / "verify" / "specs" / "error-dynamic-width.yaml")
    res = cli("simulate", spec, "--rounds", "1", code=3)
    assert "4 ERROR" in res.output and "not simulated" in res.output and "--allow-errors" in res.output


@pytest.mark.parametrize("method, sampling, extra", [
    ("dspark", "mixed", {}), ("dflash", "mixed", {}),
    ("eagle", "greedy", {"topk": 1, "num_draft_tokens": 2}),
    ("eagle", "sampling", {"topk": 1, "num_draft_tokens": 3}),
], ids=["dspark-mixed", "dflash-mixed", "eagle-chain-short-greedy", "eagle-chain-short-sampling"])
def test_simulate_a_spec_that_crashed(tmp_path, method, sampling, extra):
    spec = small(tmp_path, method, sampling, **extra)
    res = cli("simulate", spec, "--rounds", "3", "--requests", "2", code=0)
    assert "PASS" in res.output


def test_explain_json_rank_is_that_ranks_view():
    spec = str(ROOT / "specs" / "llama-3.2-1b-eagle3-pp2.yaml")
    import json

    view = json.loads(cli("explain", spec, "--json", "--rank", "1", code=0).output)
    assert view["rank"] == 1 and view["row"]["pp"] == 1 and view["is_source"]
    assert view["groups"]["pp"] == {"group_rank": 1, "ranks": [0, 1]}
    assert view["stage"]["pp_rank"] == 1 and view["rounds"]["decode"]["collectives"] >= 1
    assert json.loads(cli("explain", spec, "--json", "--rank", "0", code=0).output)["groups"]["pp"]["group_rank"] == 0


def test_plan_errors_point_at_the_keys_own_line_and_column(tmp_path):
    spec = small(tmp_path, "dspark", "greedy", draft_tp=4)
    res = cli("explain", spec, code=2)
    col = Path(spec).read_text().splitlines()[4].index("draft_tp") + 1
    assert f"{spec}:5:{col}: speculative.draft_tp: draft_tp=4 must be 1" in res.output
    text = Path(spec).read_text().replace("sync: {policy: all}", "sync:\n  policy: all\n  sites: {nope: 'on'}")
    spec = write(tmp_path, text.replace(", draft_tp: 4", ""), "sites.yaml")
    assert f"{spec}:8:11: sync.sites.nope: unknown site 'nope'" in cli("explain", spec, code=2).output


def test_export_never_names_a_temporary_file(tmp_path):
    text = Path(small(tmp_path, "dspark", "greedy")).read_text()
    spec = write(tmp_path, text.replace("sync: {policy: all}", "sync: {policy: all, sites: {nope: 'on'}}"))
    res = cli("export", spec, "--engine", "vllm")
    assert res.exit_code == 2 and f"{spec} (as vLLM 0.33.0):" in res.output
    assert "/tmp/specplan-" not in res.output and ".yaml.tmp" not in res.output
