"""The cross-instance check against connectors specplan's rules do not ship: the seed's fork.

Seed 004: the pull connector inherited decode-side PP when the refusal came out; its handshake
never exchanged pp_size, so every decode stage resolved its handles at prefill stage 0, and it
counted consumers over TP only. Modelled as a rules strategy, the check names both faults.
"""

from __future__ import annotations

import json
from pathlib import Path

from specplan.deploy import handoff
from specplan.engines.handoff import Pull
from specplan.engines.vllm.handoff import VllmNixlPull
from specplan.deploy.cross_checks import check_deployment
from tests.deploy.pairs import deployment
from tests.helpers import cli

ROOT = Path(__file__).resolve().parents[2]


class ForkPull(VllmNixlPull):
    def refusals(self, p, d):
        return []  # the fork dropped vLLM's refusal of decode PP

    def pull(self, p, d, tp, stage):
        base = super().pull(p, d, tp, stage)
        return Pull(base.tp_ranks, (0,), (0,), len(base.tp_ranks), base.consumers)


def test_fork_pull_connector_under_decode_pp(monkeypatch):
    monkeypatch.setattr(handoff, "rules_for", lambda engine, connector: ForkPull())
    dep = deployment("vllm", {"tp": 2, "pp": 2}, {"tp": 2, "pp": 2}, "nixl", layers=12)
    found = {f.kind: f.message for f in check_deployment(handoff.plan_handoff(dep))}
    assert found["consumers"] == ("prefill rank (tp 0, cp 0, stage 0) frees a block after 1 "
                                  "consumer notification(s) while 2 decode ranks read it "
                                  "(2 prefill ranks like it)")
    assert found["layer-names"] == ("decode stage 1 holds layers [6, 12) but the handoff writes "
                                    "[0, 6) into it")


def test_compile_of_a_deployment_with_errors_writes_nothing(tmp_path):
    case = ROOT / "tests/deploy/cases/error-pull-pp"
    dep = tmp_path / "dep.yaml"
    dep.write_text(f"instances:\n  prefill: {case / 'prefill.yaml'}\n  decode: {case / 'decode.yaml'}\n")
    run = cli("compile", dep, "-o", tmp_path / "out", process=True)
    assert run.returncode == 3, run.stderr
    assert "no plan written" in run.stderr and "pull-pp" in run.stdout
    assert not (tmp_path / "out").exists()
    check = cli("check", dep, "--json", process=True)
    assert check.returncode == 3
    assert [f["kind"] for f in json.loads(check.stdout)["findings"]] == ["pull-pp"]
