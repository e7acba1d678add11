"""`specplan import -f manifest.yaml`: a LeaderWorkerSet (lws.py writes them) read back as one
line per node, node 0 the leader template's and every other node the worker template's with
LWS_WORKER_INDEX set, then checked and read as per-node lines are (nodes_import.py).

Checked against the CRD's structure as far as specplan reads it (kubernetes-sigs/lws
api/leaderworkerset/v1): apiVersion leaderworkerset.x-k8s.io/v1, kind LeaderWorkerSet,
spec.leaderWorkerTemplate with a workerTemplate (required), a leaderTemplate (optional: the
worker template when absent) and size (optional, default 1, at least 1); a SPECPLAN_PLAN that
is a file of a volume mounted from a ConfigMap.
"""

from __future__ import annotations

import posixpath
import re
import shlex

from specplan.ecosystem.flags import DRAFT_PLACEHOLDER, MODEL_PLACEHOLDER
from specplan.ecosystem.launch_import import ImportProblem
from specplan.ecosystem.lws import API_VERSION, KIND
from specplan.ecosystem.nodes_import import PLAN, Nodes, Read, read_words_of

TEMPLATE = "spec.leaderWorkerTemplate"
SHELLS = {("sh", "-c"), ("/bin/sh", "-c"), ("bash", "-c"), ("/bin/bash", "-c")}


def is_lws(text: str) -> bool:
    return re.search(rf"^kind:\s*['\"]?{KIND}['\"]?\s*$", text, re.M) is not None


def read_lws(engine: str, text: str, where: str,
             version: str | None = None) -> tuple[dict[str, str], list[str], int]:
    """(env, argv, nodes) of the leader's line, once every node's line agrees."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ImportProblem(f"{where}: not YAML: {str(exc).splitlines()[0]}") from None
    lwt = _structure(data, where)
    size = lwt.get("size", 1)
    worker = lwt["workerTemplate"]
    leader = lwt.get("leaderTemplate") or worker
    paths = (f"{TEMPLATE}.leaderTemplate" if "leaderTemplate" in lwt else
             f"{TEMPLATE}.workerTemplate", f"{TEMPLATE}.workerTemplate")
    reads = [_node(engine, leader if node == 0 else worker, paths[node > 0], node, size, where,
                   version) for node in range(size)]
    return Nodes(engine, reads, where, unit=f"pods ({TEMPLATE}.size {size})").head_line()


def _structure(data, where: str) -> dict:
    def need(ok: bool, path: str, expected: str, found) -> None:
        if not ok:
            raise ImportProblem(f"{where}: {path}: expected {expected}, found {found!r}")

    need(isinstance(data, dict), "the manifest", "a LeaderWorkerSet object", type(data).__name__)
    need(data.get("apiVersion") == API_VERSION, "apiVersion", API_VERSION, data.get("apiVersion"))
    need(data.get("kind") == KIND, "kind", KIND, data.get("kind"))
    spec = data.get("spec")
    need(isinstance(spec, dict), "spec", "an object", spec)
    lwt = spec.get("leaderWorkerTemplate")
    need(isinstance(lwt, dict), TEMPLATE, "an object (required)", lwt)
    size = lwt.get("size", 1)
    need(type(size) is int and size >= 1, f"{TEMPLATE}.size", "an integer of at least 1", size)
    need(isinstance(lwt.get("workerTemplate"), dict), f"{TEMPLATE}.workerTemplate",
         "a pod template (required)", lwt.get("workerTemplate"))
    if "leaderTemplate" in lwt:
        need(isinstance(lwt["leaderTemplate"], dict), f"{TEMPLATE}.leaderTemplate",
             "a pod template", lwt["leaderTemplate"])
    return lwt


def _node(engine: str, template: dict, path: str, node: int, size: int, where: str,
          version: str | None) -> Read:
    pod = template.get("spec")
    pod = pod if isinstance(pod, dict) else {}
    containers = pod.get("containers")
    if not isinstance(containers, list) or not containers:
        raise ImportProblem(f"{where}: {path}.spec.containers: expected a list of containers, "
                            f"found {containers!r}")
    container, words = _launching(containers, path, where)
    words = [_substituted(w, node, size) for w in words]
    at = path if path.endswith("leaderTemplate") or size == 1 else f"{path} (node {node})"
    read = read_words_of(engine, Read(" " + at, path), words, where, version)  # "FILE: at: ..."
    read.env = {**_env(container), **read.env}
    if PLAN in read.env:
        _mounted(read.env[PLAN], container, pod, path, where)
    return read


def _launching(containers: list, path: str, where: str) -> tuple[dict, list[str]]:
    """The container that launches the engine (or `ray start`), and its words."""
    for i, c in enumerate(containers):
        if not isinstance(c, dict):
            continue
        command, args = c.get("command") or [], c.get("args") or []
        if not all(isinstance(w, str) for w in [*command, *args]):
            raise ImportProblem(f"{where}: {path}.spec.containers[{i}]: command and args: "
                                "expected strings")
        words = [*command, *args]
        if tuple(words[:2]) in SHELLS and len(words) == 3:
            try:
                words = shlex.split(words[2], comments=True)
            except ValueError as exc:
                raise ImportProblem(f"{where}: {path}.spec.containers[{i}].args: "
                                    f"{str(exc).lower()}") from None
        if words:
            return c, words
    raise ImportProblem(f"{where}: {path}.spec.containers: expected a container with a "
                        "command, found none")


def _substituted(word: str, node: int, size: int) -> str:
    """Kubernetes' `$(NAME)` as LWS sets it on this node; specplan's path placeholders as the
    shell variables import knows."""
    word = word.replace("$(LWS_WORKER_INDEX)", str(node)).replace("$(LWS_GROUP_SIZE)", str(size))
    for name in (MODEL_PLACEHOLDER, DRAFT_PLACEHOLDER):
        word = word.replace(f"$({name})", f"${name}")
    return word


def _env(container: dict) -> dict[str, str]:
    return {e["name"]: str(e["value"]) for e in container.get("env") or []
            if isinstance(e, dict) and isinstance(e.get("name"), str) and "value" in e}


def _mounted(plan: str, container: dict, pod: dict, path: str, where: str) -> None:
    """SPECPLAN_PLAN names a file of a volume mounted from a ConfigMap."""
    config_maps = {v.get("name") for v in pod.get("volumes") or []
                   if isinstance(v, dict) and isinstance(v.get("configMap"), dict)}
    for m in container.get("volumeMounts") or []:
        if not isinstance(m, dict) or m.get("name") not in config_maps:
            continue
        mount = str(m.get("mountPath", "")).rstrip("/")
        if posixpath.dirname(plan) == mount:
            return
    raise ImportProblem(f"{where}: {path}: {PLAN} {plan}: expected a file of a volume mounted "
                        "from a ConfigMap, found none")
