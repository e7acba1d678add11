"""The topology spec as frozen pydantic models; every field documented where it is declared.

Later issues add the keys DESIGN.md §9 assigns them. Values are strict: a size is an
integer (never a bool, float or string) and every model rejects unknown keys.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from specplan.engines.choices import (AuxRouting, BehaviourMode, Numbering, PayloadWidth,
                                      RelayMode, SyncGroup)
from specplan.engines.releases import RELEASES
from specplan.methods import METHODS
from specplan.schema.yaml_source import YamlSource

# Limits (documented in the JSON Schema and README): far past any deployment, low enough that
# every size stays an exact machine integer and the planner never allocates by a typo.
MAX_RANKS = 1_048_576  # any one axis, and the whole world (schema/limits.py)
MAX_LAYERS = 65_536
MAX_WIDTH = 1_048_576  # hidden size
MAX_VOCAB = 16_777_216
MAX_EXPERTS = 65_536
MAX_STEPS = 64  # topk: past every engine's draft graphs
# Draft tokens a request verifies per round past its root: a chain's num_steps, a tree's
# num_draft_tokens - 1. Neither engine bounds them (vLLM's SpeculativeConfig only asks
# num_speculative_tokens > 0; SGLang's n-gram trie only draft_token_num > 0), and real n-gram
# lines ask for 300; specplan's bound keeps every payload a plan sizes finite.
MAX_DRAFTS = 4_096
MAX_BATCH = 65_536
MAX_DRAFT_LAYERS = 1_024  # a drafter deeper than this is a second target; each layer is planned
MAX_HEADS = 65_536  # KV heads
MAX_PAGE = 1_048_576  # tokens per KV page
MAX_TIMEOUT_S = 86_400.0  # a day: past it a collective is hung, not slow
MAX_DRAFT_TOKENS = 1 + MAX_DRAFTS  # the widest verify: root + MAX_DRAFTS
MAX_NAME = 128  # a name becomes folder and file names

Size = Annotated[int, Field(ge=1)]
Axis = Annotated[int, Field(ge=1, le=MAX_RANKS)]
Layers = Annotated[int, Field(ge=1, le=MAX_LAYERS)]
Engine = Literal["sglang", "vllm"]
Device = Literal["cuda", "rocm", "npu", "cpu"]
MethodName = Literal["none", "eagle", "eagle3", "mtp", "standalone", "ngram", "dflash", "dspark"]
Sampling = Literal["greedy", "sampling", "mixed"]
Policy = Literal["safe", "all", "rng", "init", "off"]
Dtype = Literal["bf16", "fp16", "fp8", "fp32"]
OnOff = Literal["on", "off"]
Backend = Literal["nccl", "hccl", "zbal", "gloo"]
DEVICE_BACKENDS: dict[str, str] = {"cuda": "nccl", "rocm": "nccl", "npu": "hccl", "cpu": "gloo"}  # the default
Role = Literal["prefill", "decode"]
Connector = Literal["mooncake", "nixl", "nixl_push", "ascend"]
Attention = Literal["mha", "gqa", "mla"]
KvCacheDtype = Literal["auto", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2"]

# What the methods say of themselves (methods/): which read taps, which may draft a tree.
TAP_METHODS = tuple(name for name, m in METHODS.items() if m.needs_taps)
TREE_METHODS = tuple(name for name, m in METHODS.items() if m.tree)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Topology(_Model):
    """How the ranks are laid out."""

    tp: Axis = Field(description="Tensor parallel size of one pipeline stage.")
    pp: Axis = Field(1, description="Pipeline stages.")
    dp: Axis = Field(1, description="Data parallel size.")
    dp_attention: bool = Field(False, description="sglang: DP inside the TP block (attn_dp = dp).")
    cp: Axis = Field(1, description="sglang: attention context parallel inside the TP block; "
                                    "vllm: prefill context parallel (multiplies the world size).")
    dcp: Axis = Field(1, description="Decode context parallel, inside the (attention) TP group.")
    ep: Axis = Field(1, description="sglang: moe_ep inside the TP block; vllm: 1, or dp*cp*tp "
                                    "(expert parallel on).")
    moe_dp: Axis = Field(1, description="sglang only: MoE data parallel inside the TP block.")
    nodes: Axis = Field(1, description="Machines; GPUs per node = ranks / nodes.")
    dp_lm_head: bool = Field(False, description="sglang: with dp_attention, the LM head is "
                             "vocab-parallel over attn_tp inside each replica instead of over tp "
                             "(--enable-dp-lm-head).")
    device: Device = Field("cuda", description="Accelerator kind: cuda | rocm | npu | cpu.")
    backend: Backend | None = Field(
        None, description="Collective backend: nccl | hccl | zbal | gloo (default by device: "
                          "cuda, rocm -> nccl; npu -> hccl; cpu -> gloo).")


class Moe(_Model):
    """A mixture-of-experts model."""

    num_experts: Annotated[int, Field(ge=1, le=MAX_EXPERTS)] = Field(
        description="Routed experts per MoE layer.")
    top_k: Annotated[int, Field(ge=1, le=MAX_EXPERTS)] = Field(
        description="Experts each token is routed to (at most num_experts).")
    a2a: Literal["none", "deepep"] = Field(
        "none", description="All-to-all backend for expert dispatch: none | deepep.")
    eplb: bool = Field(False, description="Expert-parallel load balancer: experts move between "
                       "ranks at rebalance steps, every rank at the same step (--enable-eplb).")


class ModelCfg(_Model):
    """The target model's shape."""

    num_layers: Layers = Field(description="Target decoder layers.")
    hidden_size: Annotated[int, Field(ge=1, le=MAX_WIDTH)] = Field(
        description="Hidden width of the target model.")
    vocab_size: Annotated[int, Field(ge=1, le=MAX_VOCAB)] = Field(description="Vocabulary size.")
    pp_partition: Annotated[list[Layers], Field(max_length=MAX_RANKS)] | None = Field(
        None, description="Layers per pipeline stage (one entry per stage); else the engine's rule.")
    moe: Moe | None = Field(None, description="Set for a mixture-of-experts model.")
    dtype: Dtype = Field("bf16", description="Activation and tap dtype: bf16 | fp16 | fp8 | fp32.")
    path: str | None = Field(
        None, description="Target checkpoint: a local folder or a hub name (SGLang --model-path, "
                          "vllm serve MODEL); used by `specplan export` and `import`.")
    num_kv_heads: Annotated[int, Field(ge=1, le=MAX_HEADS)] | None = Field(
        None, description="KV heads of the target's attention (default: 1 with attention mla, "
                          "else 8); decides which KV heads each rank holds and pulls.")
    attention: Attention | None = Field(
        None, description="Attention kind: mha | gqa | mla (default gqa); mla keeps one latent KV "
                          "replicated on every attention-TP rank.")
    kv_cache_dtype: KvCacheDtype | None = Field(
        None, description="KV cache dtype: auto (= model.dtype) | bf16 | fp16 | fp8_e4m3 | "
                          "fp8_e5m2 (default auto).")
    page_size: Annotated[int, Field(ge=1, le=MAX_PAGE)] | None = Field(
        None, description="Tokens per KV page (default: the engine's, SGLang --page-size 1, "
                          "vLLM --block-size 16).")


class Speculative(_Model):
    """The speculative-decoding method and its widths."""

    method: MethodName = Field("none", description="none | eagle | eagle3 | mtp | standalone | "
                                                   "ngram | dflash | dspark.")
    num_steps: Annotated[int, Field(ge=0, le=MAX_DRAFTS)] = Field(
        0, description="Draft steps (DSpark gamma; DFlash block size - 1; vLLM ngram "
                       "num_speculative_tokens; SGLang ngram num_draft_tokens // topk).")
    topk: Annotated[int, Field(ge=1, le=MAX_STEPS)] = Field(1, description="Branching of the draft tree; > 1 means a tree.")
    num_draft_tokens: Annotated[int, Field(ge=1, le=MAX_DRAFT_TOKENS)] | None = Field(
        None, description="Verify width including the root (default num_steps + 1; "
                          "2 .. the engine's draft tree: SGLang 1 + topk + (num_steps - 1) * "
                          "topk^2, vLLM 1 + topk * num_steps; SGLang ngram: the trie's nodes, "
                          "any from 2).")
    sampling: Sampling = Field("greedy", description="greedy | sampling | mixed.")
    aux_layers: Annotated[list[Annotated[int, Field(ge=0, le=MAX_LAYERS)]],
                          Field(max_length=MAX_LAYERS + 1)] | None = Field(
        None, description="Tap ids for eagle3 / dflash / dspark (default 2, L//2, L-3): "
                          "tap L is the residual stream entering layer L.")
    draft_tp: Axis | None = Field(
        None, description="Tensor width of the drafter (default: the target's attention TP).")
    draft_path: str | None = Field(
        None, description="Draft checkpoint: a folder or hub name (SGLang "
                          "--speculative-draft-model-path, vLLM speculative_config.model).")
    draft_num_layers: Annotated[int, Field(ge=1, le=MAX_DRAFT_LAYERS)] | None = Field(
        None, description="Decoder layers of the drafter, each with its own KV (default 1; "
                          "none for ngram); named after the target's layers.")

    @property
    def verify_width(self) -> int:
        """Tokens verified per request per round, root included."""
        if not METHODS[self.method].speculates:
            return 1
        return self.num_draft_tokens or self.num_steps + 1

    def taps(self, num_layers: int) -> tuple[int, ...]:
        """The tap ids the drafter reads, ascending; () for methods without taps."""
        if self.method not in TAP_METHODS:
            return ()
        if self.aux_layers is None:
            return tuple(sorted({2, num_layers // 2, num_layers - 3}))
        return tuple(sorted(self.aux_layers))


class Sync(_Model):
    """Which decisions converge."""

    policy: Policy = Field("safe", description="safe | all | rng | init | off.")
    sites: dict[str, OnOff] = Field(
        default_factory=dict, description="Per-site override of the policy: {site: on | off}.")
    group: SyncGroup = Field("replica", description="The group decisions converge over: replica "
                             "(every rank serving the request) | attn_tp | tp.")
    idle_ranks: Literal["dummy", "skip"] = Field(
        "dummy", description="Under DP-attention, what an idle DP rank does in a round: dummy "
                             "(runs every forward and collective) | skip.")


class Pipeline(_Model):
    """How decisions and taps cross pipeline stages."""

    relay: RelayMode = Field("broadcast", description="How last-stage decisions reach earlier "
                             "stages: broadcast (one collective over the replica) | column (vLLM: "
                             "per TP index down its PP column) | ring (SGLang: stage to stage). "
                             "Unset, SGLang plans with pp > 1 relay ring: SGLang's earlier stages "
                             "cannot join a converge on the last stage.")
    aux_routing: AuxRouting = Field("chain", description="How taps reach the drafter: chain "
                                    "(inside each stage handoff) | direct (straight to the last stage).")
    relay_drafts: bool = Field(True, description="Drafts reach earlier stages before they are embedded.")
    payload_width: PayloadWidth = Field(
        "pinned", description="Width of stage-to-stage decision payloads: pinned (fixed at compile "
                              "time) | agreed (both ends derive it from the same inputs, as vLLM "
                              "0.33) | dynamic (the sender's actual width).")
    draft_layer_ids: Numbering = Field(
        "global", description="Draft-layer ids: global (after the target's total layers) | "
                              "stage_local (after the last stage's own layer count).")
    tap_ids: Numbering = Field(
        "global", description="Tap ids: global | stage_local (each stage numbers taps from its own "
                              "first layer and takes tap 0).")
    sample_discount: Literal["bound", "drafts"] = Field(
        "bound", description="Which rows the sampled-token broadcast to earlier stages covers: a "
                             "row stays in it unless max(computed - discount, prompt_len) + 1 >= "
                             "max_seq_len, where computed may be inflated by the previous round's "
                             "drafts. bound (discount = the most drafts a round verifies, num_steps "
                             "for a chain: never less than the inflation) | drafts (this round's draft count: the seed's bug, a "
                             "request given drafts and then none drops out early).")


class Disaggregation(_Model):
    """This spec is one instance of a prefill / decode deployment."""

    role: Role = Field(description="What this instance runs: prefill | decode.")
    peer: str | None = Field(
        None, description="The other instance's spec, relative to this file.")
    connector: Connector | None = Field(
        None, description="KV transfer: mooncake | nixl | nixl_push (vLLM only) | ascend (SGLang, on "
                          "NPUs) (default: "
                          "SGLang mooncake, vLLM nixl).")


class Runtime(_Model):
    """Runtime capacities."""

    max_batch: Annotated[int, Field(ge=1, le=MAX_BATCH)] = Field(256, description="Most requests one rank serves in a round.")
    timeout_s: Annotated[float, Field(gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False)] = Field(
        300, description="Seconds a collective may take before the runtime raises an error "
                         "naming its site, round and group (instead of hanging).")
    trace_dir: str | None = Field(
        None, description="When set, every converge appends one JSON line per rank to "
                          "<trace_dir>/rank<R>.jsonl, for `specplan diff`.")
    probe_every: Annotated[int, Field(ge=0, le=2**31 - 1)] = Field(
        0, description="Rounds between agreement probes (a hash of every decision, all-gathered "
                       "over each replica); 0 = off.")
    async_scheduling: bool | None = Field(
        None, description="The host schedules round r + 1 before round r's decisions reach it, "
                          "so they are consumed in round r + 1 on the device (SGLang's overlap "
                          "scheduler, off with --disable-overlap-schedule; vLLM "
                          "--async-scheduling); unset: not modelled.")
    batch_identity: bool = Field(
        True, description="Every converge and relay carries a 64-bit digest of its rows' "
                          "(request, generation) in the guard header; a rank holding another "
                          "batch raises BatchMismatch naming the row. false = not checked.")


class Spec(_Model):
    """A topology spec: layout, model, speculative method, sync policy."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$", max_length=MAX_NAME,
                      description=f"Spec name: [a-z0-9][a-z0-9_.-]*, at most {MAX_NAME} characters.")
    engine: Engine = Field("sglang", description="Layout and sync conventions: sglang | vllm.")
    engine_version: str | None = Field(
        None, max_length=MAX_NAME, description="The engine's release whose flags, layout, rules "
        "and defaults apply (default: the newest): " + "; ".join(
            f"{e} {', '.join(vs)}" for e, vs in RELEASES.items()) + ".")
    behaviour: BehaviourMode = Field(
        "specplan", description="specplan (the plan specplan would run) | engine (what the engine "
                                "does by default for the method, at engine_version).")
    topology: Topology
    model: ModelCfg
    speculative: Speculative = Field(default_factory=Speculative)
    sync: Sync = Field(default_factory=Sync)
    pipeline: Pipeline = Field(default_factory=Pipeline)
    runtime: Runtime = Field(default_factory=Runtime)
    disaggregation: Disaggregation | None = Field(
        None, description="Set when this spec is one instance of a prefill / decode deployment.")
    engine_args: list[str] | None = Field(
        None, description="The launch line as `specplan import` read it, one argument per item, "
                          "in order: `specplan export` to the same engine prints it back as "
                          "written (flags specplan plans are re-read and must agree with the "
                          "keys above; the others are kept, not planned).")

    _source: YamlSource | None = PrivateAttr(default=None)

    def yaml_source(self) -> YamlSource:
        """The YAML document this spec was read from (a spec built in code has none)."""
        if self._source is None:
            raise ValueError(f"spec {self.name!r} was not read from YAML")
        return self._source

    def line_of(self, *path: str | int) -> tuple[str, int | None]:
        """(file, line) where `path` was written, for pointing findings at the YAML."""
        src = self._source
        if src is None:
            return ("<spec>", None)
        loc = src.loc(tuple(path))
        return (src.file_of(tuple(path)), loc[0] if loc else None)

    def where(self, *path: str | int) -> tuple[str, int | None, int | None]:
        """(file, line, col) of the key `path` names (its nearest written parent's when the
        YAML leaves it out), for diagnostics that point at the offending key itself."""
        src = self._source
        if src is None:
            return ("<spec>", None, None)
        loc = src.loc(tuple(path), key=True)
        return (src.file_of(tuple(path)), *loc) if loc else (src.file_of(tuple(path)), None, None)
