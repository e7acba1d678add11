"""`specplan export --format lws`: a Kubernetes LeaderWorkerSet checked field by field against
the CRD's structure (kubernetes-sigs/lws api/leaderworkerset/v1: apiVersion
leaderworkerset.x-k8s.io/v1, spec.leaderWorkerTemplate.{size, leaderTemplate, workerTemplate},
the LWS_* variables LWS sets in every container) and read back by `specplan import` to the
spec the one-line export imports to; manifests whose pods disagree are refused (exit 2)."""

from __future__ import annotations

import shlex

import pytest
import yaml

from tests.ecosystem.conftest import REPO

FLASH = REPO / "specs" / "deepseek-v4-flash-mtp-tp2-pp2.yaml"  # vllm, tp 2 x pp 2, 2 nodes
NAME = "deepseek-v4-flash-mtp-tp2-pp2"
TEMPLATE = ("spec", "leaderWorkerTemplate")


def _manifest(cli, *options) -> tuple[str, dict]:
    text = cli("export", FLASH, "--format", "lws", *options, code=0).stdout
    return text, yaml.safe_load(text)


def _pod(manifest: dict, role: str) -> tuple[dict, dict]:
    template = manifest["spec"]["leaderWorkerTemplate"][f"{role}Template"]
    (container,) = template["spec"]["containers"]
    return template, container


def test_vllm_multiprocessing_manifest_field_by_field(cli):
    text, m = _manifest(cli)
    assert (m["apiVersion"], m["kind"], m["metadata"]) == (
        "leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", {"name": NAME})
    lwt = m["spec"]["leaderWorkerTemplate"]
    assert m["spec"]["replicas"] == 1
    assert set(lwt) == {"size", "restartPolicy", "leaderTemplate", "workerTemplate"}
    assert lwt["size"] == 2  # topology.nodes
    assert lwt["restartPolicy"] == "RecreateGroupOnPodRestart"  # one of the CRD's enum
    common = ["--model", "$(MODEL_PATH)", "--tensor-parallel-size", "2",
              "--pipeline-parallel-size", "2", "--dtype", "bfloat16", "--speculative-config",
              '{"method":"mtp","num_speculative_tokens":3}', "--nnodes", "2"]
    for role, node, tail in (("leader", "0", []), ("worker", "$(LWS_WORKER_INDEX)",
                                                   ["--headless"])):
        template, c = _pod(m, role)
        assert template["metadata"] == {"labels": {"role": role}}
        assert (c["name"], c["image"], c["command"]) == (role, "vllm/vllm-openai:v0.33.0",
                                                         ["vllm", "serve"])
        assert c["args"] == [*common, "--node-rank", node, "--master-addr",
                             "$(LWS_LEADER_ADDRESS)", *tail]
        assert c["env"] == [{"name": "SPECPLAN_PLAN", "value": "/etc/specplan/plan.json"},
                            {"name": "VLLM_USE_V2_MODEL_RUNNER", "value": "1"}]
        assert c["volumeMounts"] == [{"name": "specplan-plan", "mountPath": "/etc/specplan",
                                      "readOnly": True}]
        assert template["spec"]["volumes"] == [{"name": "specplan-plan",
                                                "configMap": {"name": f"{NAME}-plan"}}]
        assert c["resources"] == {"limits": {"nvidia.com/gpu": "2"}}  # 4 ranks on 2 nodes
        assert ("ports" in c) == (role == "leader")
    assert _pod(m, "leader")[1]["ports"] == [{"containerPort": 8000}]
    assert (f"kubectl create configmap {NAME}-plan --from-file=plan.json=build/{NAME}/plan.json"
            in text)


def test_vllm_ray_manifest(cli):
    text, m = _manifest(cli, "--executor", "ray")
    _, leader = _pod(m, "leader")
    _, worker = _pod(m, "worker")
    assert leader["command"] == worker["command"] == ["sh", "-c"]
    start, _, serve = leader["args"][0].partition(" && ")
    assert start == "ray start --head --port=6379"
    assert shlex.split(serve)[-2:] == ["--distributed-executor-backend", "ray"]
    assert worker["args"] == ["ray start '--address=$(LWS_LEADER_ADDRESS):6379' --block"]
    assert worker["env"] == [{"name": "SPECPLAN_PLAN", "value": "/etc/specplan/plan.json"}]
    assert "VLLM_RAY_EXTRA_ENV_VARS_TO_COPY" in text


def test_sglang_manifest(cli):
    _, m = _manifest(cli, "--engine", "sglang")
    _, leader = _pod(m, "leader")
    _, worker = _pod(m, "worker")
    assert leader["image"] == "lmsysorg/sglang:v0.5.23"
    assert leader["command"] == ["python", "-m", "sglang.launch_server"]
    assert leader["ports"] == [{"containerPort": 30000}]
    assert worker["args"][-6:] == ["--nnodes", "2", "--node-rank", "$(LWS_WORKER_INDEX)",
                                   "--dist-init-addr", "$(LWS_LEADER_ADDRESS):5000"]
    assert "SPECPLAN_PLAN" not in str(leader["env"])  # translated: no plan for SGLang


@pytest.mark.parametrize("options,engine", [((), "vllm"), (("--executor", "ray"), "vllm"),
                                            (("--engine", "sglang"), "sglang")])
def test_round_trip(cli, tmp_path, options, engine):
    (tmp_path / "lws.yaml").write_text(_manifest(cli, *options)[0])
    one = cli("export", FLASH, *options[:2] if options[:1] == ("--engine",) else (), code=0)
    (tmp_path / "one.sh").write_text(one.stdout)
    back = cli("import", "--engine", engine, "-f", tmp_path / "lws.yaml", "--base", FLASH)
    ref = cli("import", "--engine", engine, "-f", tmp_path / "one.sh", "--base", FLASH)
    assert back.returncode == 0 and ref.returncode == 0, back.stderr + ref.stderr
    assert back.stdout == ref.stdout and "nodes: 2" in back.stdout


def _edit(m: dict, path: tuple, value) -> dict:
    node = m
    for key in path[:-1]:
        node = node[key]
    if value is None:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return m


WORKER = (*TEMPLATE, "workerTemplate", "spec", "containers", 0)


@pytest.mark.parametrize("path,value,message", [
    (("apiVersion",), "leaderworkerset.x-k8s.io/v2",
     "apiVersion: expected leaderworkerset.x-k8s.io/v1, found 'leaderworkerset.x-k8s.io/v2'"),
    ((*TEMPLATE, "workerTemplate"), None,
     "spec.leaderWorkerTemplate.workerTemplate: expected a pod template (required), found None"),
    ((*TEMPLATE, "size"), 0, "spec.leaderWorkerTemplate.size: expected an integer of at least 1"),
    ((*TEMPLATE, "size"), 3, "node count: --nnodes 2, found 3 pods (spec.leaderWorkerTemplate"
                             ".size 3)"),
    ((*WORKER, "args", 3), "4", "spec.leaderWorkerTemplate.workerTemplate (node 1): node 1: "
                                "--tensor-parallel-size: expected 2 (as spec.leaderWorkerTemplate"
                                ".leaderTemplate, node 0), found 4"),
    ((*WORKER, "env", 0, "value"), "/tmp/plan.json",
     "spec.leaderWorkerTemplate.workerTemplate: SPECPLAN_PLAN /tmp/plan.json: expected a file of "
     "a volume mounted from a ConfigMap"),
    ((*WORKER, "args", -1), "--api-server-count=1",
     "--headless: expected present, found absent"),
])
def test_disagreeing_manifests_are_refused(cli, tmp_path, path, value, message):
    m = _edit(_manifest(cli)[1], path, value)
    (tmp_path / "lws.yaml").write_text(yaml.safe_dump(m, sort_keys=False))
    run = cli("import", "--engine", "vllm", "-f", tmp_path / "lws.yaml", "--base", FLASH)
    assert run.returncode == 2 and not run.stdout, run.output
    assert f"specplan import: {tmp_path / 'lws.yaml'}: " in run.stderr
    assert message in run.stderr, run.stderr
