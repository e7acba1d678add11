"""`specplan export --format lws`: a spec's per-node lines (nodes.py) as a Kubernetes
LeaderWorkerSet (leaderworkerset.x-k8s.io/v1; kubernetes-sigs/lws api/leaderworkerset/v1
leaderworkerset_types.go): one group of `size` = nodes pods, the leader template node 0, the
worker template every other node, the plan mounted from a ConfigMap and named by SPECPLAN_PLAN.

LWS sets LWS_LEADER_ADDRESS, LWS_GROUP_SIZE and LWS_WORKER_INDEX (0 on the leader) in every
container; Kubernetes expands `$(NAME)` in a container's command and args from its
environment, so the worker template's line names its node as `$(LWS_WORKER_INDEX)` and the
head as `$(LWS_LEADER_ADDRESS)`. `specplan import -f` reads the manifest back (lws_import.py).
"""

from __future__ import annotations

import re
import shlex

from specplan.ecosystem.export import Launch
from specplan.ecosystem.flags import DRAFT_PLACEHOLDER, MODEL_PLACEHOLDER
from specplan.ecosystem.nodes import NodeLine, NodeOptions, executor_of, node_lines, table

API_VERSION = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
LEADER, INDEX = "$(LWS_LEADER_ADDRESS)", "$(LWS_WORKER_INDEX)"
MOUNT, VOLUME = "/etc/specplan", "specplan-plan"
# topology.device -> the resource a node's accelerators are requested as
ACCELERATORS = {"cuda": "nvidia.com/gpu", "rocm": "amd.com/gpu"}


def name_of(spec_name: str) -> str:
    """A DNS-1123 name: lowercase letters, digits and '-'."""
    return re.sub(r"[^a-z0-9-]+", "-", spec_name.lower()).strip("-")[:52] or "specplan"


def render_lws(spec, launch: Launch, lines: list[NodeLine], options: NodeOptions) -> str:
    """The manifest, with export's header and notes as comments."""
    import yaml

    manifest = lws_manifest(spec, launch, options)
    executor = executor_of(launch.engine, options)
    name = manifest["metadata"]["name"]
    out = [f"# specplan export: {launch.title}: a LeaderWorkerSet of {len(lines)} nodes "
           f"(executor {executor})"]
    out += [f"# note: {n}" for n in launch.notes]
    out += [f"# the leader: {line.note}" for line in lines[:1] if line.note]
    if launch.plan_path:
        out.append(f"# the plan: `{launch.plan_how}`, then `kubectl create configmap "
                   f"{name}-plan --from-file=plan.json={launch.plan_path}`")
    out.append("# the image must have specplan installed (pip install specplan) for the "
               "plugin to load")
    unset = [p for p in (MODEL_PLACEHOLDER, DRAFT_PLACEHOLDER) if f"$({p})" in str(manifest)]
    if unset:
        out.append(f"# {', '.join(unset)}: add to each container's env (or write the path in "
                   "its place)")
    return "\n".join(out) + "\n" + yaml.safe_dump(manifest, sort_keys=False, width=1 << 16)


def lws_manifest(spec, launch: Launch, options: NodeOptions) -> dict:
    """The LeaderWorkerSet as data."""
    from specplan.engines import convention

    nnodes = spec.topology.nodes
    opts = NodeOptions(executor=options.executor, head=LEADER, fmt="lws")
    path = f"{MOUNT}/plan.json" if launch.plan_path else None
    here = Launch(launch.engine, launch.title, launch.env, launch.args, launch.notes,
                  launch.faithful, path, launch.plan_how)
    lines = [_placeholders(line) for line in node_lines(here, nnodes, spec.topology.dp, opts)]
    name = name_of(spec.name)
    engine = convention(launch.engine, spec.engine_version)
    gpus = engine.world_size(spec.topology) * engine.num_worlds(spec.topology) // nnodes
    pod = _Pod(name, engine.version, launch.engine, gpus, spec.topology.device, path)
    template: dict = {"size": nnodes, "restartPolicy": "RecreateGroupOnPodRestart"}
    if nnodes > 1:
        template["leaderTemplate"] = pod.template("leader", lines[0])
        template["workerTemplate"] = pod.template("worker", _generic(lines[1], launch.engine))
    else:
        template["workerTemplate"] = pod.template("leader", lines[0])
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name},
            "spec": {"replicas": 1, "leaderWorkerTemplate": template}}


def _placeholders(line: NodeLine) -> NodeLine:
    """A path the spec does not know: `$(MODEL_PATH)`, which Kubernetes expands from the
    container's environment (the operator adds it there, or writes the path)."""
    line.words = [f"$({w})" if w in (MODEL_PLACEHOLDER, DRAFT_PLACEHOLDER) else w
                  for w in line.words]
    return line


def _generic(line: NodeLine, engine: str) -> NodeLine:
    """Node 1's line for every worker: its node rank is the pod's LWS_WORKER_INDEX."""
    from specplan.engines import convention

    options = convention(engine).flag_table().options
    words = list(line.words)
    for i, word in enumerate(words[:-1]):
        flag = options.get(word.partition("=")[0])
        if flag is not None and flag.dest == "node_rank":
            words[i + 1] = INDEX
    return NodeLine(line.node, line.env, words, line.ray, "every other node")


class _Pod:
    def __init__(self, name: str, version: str, engine: str, gpus: int, device: str,
                 plan: str | None):
        self.name, self.engine, self.gpus, self.device, self.plan = name, engine, gpus, device, plan
        self.image = table(engine).image.format(version=version)

    def template(self, role: str, line: NodeLine) -> dict:
        container: dict = {"name": role, "image": self.image, **_command(line, self.engine),
                           "env": [{"name": k, "value": v} for k, v in line.env]}
        if role == "leader":
            container["ports"] = [{"containerPort": table(self.engine).api_port}]
        if self.device in ACCELERATORS:
            container["resources"] = {"limits": {ACCELERATORS[self.device]: str(self.gpus)}}
        spec: dict = {"containers": [container]}
        if self.plan:
            container["volumeMounts"] = [{"name": VOLUME, "mountPath": MOUNT, "readOnly": True}]
            spec["volumes"] = [{"name": VOLUME, "configMap": {"name": f"{self.name}-plan"}}]
        return {"metadata": {"labels": {"role": role}}, "spec": spec}


def _command(line: NodeLine, engine: str) -> dict:
    """The engine's own words as command and args; a Ray node's `ray start` (and the head's
    launch after it) through `sh -c` (Kubernetes expands `$(NAME)` before the shell reads it)."""
    from specplan.engines import convention

    if not line.ray:
        program = len(shlex.split(convention(engine).launch.program))
        return {"command": line.words[:program], "args": line.words[program:]}
    text = shlex.join(line.ray)
    if line.words:
        text += " && " + shlex.join(line.words)
    return {"command": ["sh", "-c"], "args": [text]}
