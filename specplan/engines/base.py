"""What every engine convention answers, and the rules the two engines share.

A convention is one object per engine (sglang/convention.py, vllm/convention.py) holding
everything that differs between them: the rank layout as named axes and the group families it
makes, the PP split, the DP agreement, the MoE rows, the topologies it refuses (each message
citing the engine function that refuses it), the warnings it earns and the behaviour profile
`behaviour: engine` models. Passes, checks, explain and the sim ask `convention(spec.engine)`;
nothing outside specplan/engines/ tests an engine's name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Generic, Literal, TypeVar

# Choices, RelayMode, Spec, Topology and MoeRows are read from here too (their homes: choices.py,
# reads.py).
from specplan.engines.choices import Choices as Choices, RelayMode as RelayMode
from specplan.engines.gates import GateUse
from specplan.engines.handoff import Axes, Rules
from specplan.engines.launch import LaunchTable
from specplan.engines.method_row import MethodRow, MethodRows
from specplan.engines.reads import MoeRows as MoeRows, Spec as Spec, Topology as Topology

if TYPE_CHECKING:
    from specplan.engines.flag_table import FlagTable
    from specplan.mesh.family import Family
    from specplan.methods.base import Method
    from specplan.methods.base import Site

# engines/ sits below schema/ and plan/ (docs/architecture.md, Layers): the loader asks every
# spec its engine's rules, and the plan's builder asks the engine for its collectives. So a
# convention reads a spec, its topology and the plan's MoE rows through the protocols of
# engines/reads.py, which mypy checks schema's Spec and the plan's MoeRows against.

# Accelerators per machine, when `topology.nodes` is written: an 8-GPU HGX / MI300X board,
# an Atlas 800T A3 (16 NPUs). Engines bind local rank r to device r, so a node with fewer
# devices than local ranks fails at load. CPU ranks are processes: no limit.
DEVICES_PER_NODE = {"cuda": 8, "rocm": 8, "npu": 16}


@dataclass(frozen=True)
class Violation:
    """A topology the engine refuses: the spec key at fault and why."""

    path: tuple[str | int, ...]
    message: str


@dataclass(frozen=True)
class DpAgreement:
    """The per-round token-count exchange of DP ranks whose collectives span replicas."""

    family: str
    group_size: int
    op: Literal["all_gather", "all_reduce_sum"]
    ints_per_rank: int


@dataclass(frozen=True)
class MoeLayout:
    """Where MoE rows go: the family tokens are dispatched over, and whether attention-TP
    ranks split the rows before dispatch (and regather them after)."""

    dispatch_family: str
    row_split: bool


@dataclass(frozen=True)
class LayerCollective:
    """One collective every MoE layer of the target issues per forward, moving rows between
    the attention layout and the experts' (`explain`'s per-layer column counts these)."""

    op: str  # all_gather | reduce_scatter | all_to_all
    family: str
    what: str


class NoDefault(ValueError):
    """The engine has no default for what a launch line leaves out; the message says why
    (<engine>/defaults.py)."""


class Convention(ABC):
    name: ClassVar[str]
    remainder_stages: ClassVar[str]  # where split_layers puts remainder layers, in words
    # How the engine's plugin carries last-stage decisions to earlier stages, and so the
    # relay specplan's own plan (`behaviour: specplan`) runs there under PP: `broadcast`
    # when the earlier stages can join the last stage's converge, or the engine's own
    # stage-to-stage transport (`ring`) when they cannot.
    pipeline_relay: ClassVar[RelayMode] = "broadcast"
    # <engine>/methods.py: one row per speculative method (engines/method_row.py)
    methods: ClassVar[MethodRows]

    # -- launch lines and disaggregation (PD): data of the engine's package ----------------
    launch: ClassVar[LaunchTable]  # <engine>/launch.py: what import reads and export writes
    page_size: ClassVar[int]  # tokens per KV page when model.page_size is unset
    kv_axes: ClassVar[Axes]  # the mesh coordinates its KV connectors call dp, attention-TP, CP
    connectors: ClassVar[tuple[str, ...]]  # the KV connectors specplan plans for it
    default_connector: ClassVar[str]
    # specplan site -> the engine's own names of it, for the sites the engine converges through
    # its own switch (over its whole TP group; verify/fixes.py phrases fixes so)
    switchable_sites: ClassVar[Mapping[str, tuple[str, ...]]] = {}

    def __init__(self, version: str | None = None) -> None:
        from specplan.engines.releases import check

        self.version = check(self.name, version)

    @property
    def title(self) -> str:
        """The engine and the release whose code this models ('SGLang 0.5.23')."""
        from specplan.engines.releases import title

        return title(self.name, self.version)

    @property
    def newest(self) -> bool:
        from specplan.engines.releases import newest

        return self.version == newest(self.name)

    # -- speculative methods: the engine's rows (<engine>/methods.py) ----------------------

    def row(self, method: str) -> MethodRow:
        """How the engine runs specplan's `method`; KeyError for one it does not run."""
        return self.methods[method]

    def runs(self, method: str) -> bool:
        return self.methods.get(method) is not None

    def method(self, name: str) -> Method:
        """specplan's method `name` as the engine runs it (its row's variant, if any)."""
        return self.methods.method(name)

    def method_names(self) -> dict[str, str]:
        """specplan's method -> the engine's name for it, for every method the engine names."""
        return self.methods.names()

    def method_named(self, engine_name: str) -> str | None:
        """specplan's method for the engine's name `engine_name`, or None."""
        return self.methods.named(engine_name)

    @property
    def taps_from_draft_config(self) -> frozenset[str]:
        """Methods whose taps the engine reads from the draft's own config
        (`eagle_aux_hidden_state_layer_ids`), so that import must read them there too."""
        return frozenset(m for m, r in self.methods.rows.items() if r.taps_from_draft_config)

    # -- layout ---------------------------------------------------------------------------

    @abstractmethod
    def world_size(self, t: Topology) -> int:
        """Ranks of one world."""

    def num_worlds(self, t: Topology) -> int:
        """Independent worlds the launch starts (each its own torch.distributed world)."""
        return 1

    @abstractmethod
    def widths(self, t: Topology) -> dict[str, int]:
        """axis -> size, as the spec sets it (only the keys the engine reads)."""

    @abstractmethod
    def derived(self, t: Topology) -> dict[str, int]:
        """The widths the engine derives (attn_tp, moe_tp, pcp, ...)."""

    @abstractmethod
    def families(self, t: Topology, is_moe: bool, eplb: bool = False) -> tuple[Family, ...]:
        """Every group family in the order the engine creates them (`eplb`: the model's MoE
        runs the expert-parallel load balancer)."""

    def extra_coords(self, t: Topology) -> dict[str, list[int]]:
        """Coordinates of axes that have no family of their own."""
        return {}

    @abstractmethod
    def split_layers(self, num_layers: int, pp: int) -> list[int]:
        """Layers per stage when the spec gives no pp_partition."""

    @abstractmethod
    def attention_tp(self, t: Topology) -> int:
        """The tensor width of one replica's attention."""

    @abstractmethod
    def num_replicas(self, t: Topology) -> int:
        """Replicas: rank sets that serve different requests."""

    # -- planning ---------------------------------------------------------------------------

    @abstractmethod
    def sync_family(self, group: str) -> str:
        """The family the engine's own group `group` (sync.group attn_tp | tp) names."""

    def startup_family(self, group: str) -> str:
        """The family a start-up MIN site agrees over in the engine's own plan: its sync
        group, unless the engine takes the start-up readings from more ranks."""
        return self.sync_family(group)

    def engine_held(self, site: Site) -> str | None:
        """Why the engine itself agrees `site` whatever specplan's sync policy says (a
        collective of its own that no plan turns off), or None: the policy decides."""
        return None

    @abstractmethod
    def dp_agreement(self, spec: Spec) -> DpAgreement | None:
        """The token-count exchange when replicas share collectives, else None."""

    @abstractmethod
    def moe_layout(self, spec: Spec) -> MoeLayout:
        """Families of a MoE model's expert traffic."""

    def moe_layer_collectives(self, derived: Mapping[str, int], widths: Mapping[str, int],
                              moe: MoeRows) -> tuple[LayerCollective, ...]:
        """The row movement around the experts of one MoE layer, from the plan's widths and
        its MoE rows (a2a backend, row split); none by default."""
        return ()

    @abstractmethod
    def behaviour(self, spec: Spec, method: Method) -> Choices:
        """What the engine does by default for the method (`behaviour: engine`)."""

    # -- rules ------------------------------------------------------------------------------

    @abstractmethod
    def violations(self, spec: Spec) -> list[Violation]:
        """Every reason the engine refuses the spec's topology (load time)."""

    def world_warning(self, world_size: int, num_worlds: int) -> str | None:
        """What a launch of independent worlds costs, when it starts more than one (explain
        and check print it as a WARN; check reads the sizes from plan.json)."""
        return None

    def gates(self, spec: Spec, choices: Choices) -> tuple[GateUse, ...]:
        """The gates the engine's code takes for this spec (engines/gates.py; the rows live in
        engines/<engine>/gates.py), each with the group `choices` agrees it over; none by
        default."""
        return ()

    @abstractmethod
    def max_draft_tokens(self, topk: int, num_steps: int) -> tuple[int, str]:
        """The widest verify, root included, a draft tree of `topk` branches over `num_steps`
        draft steps may ask for (num_steps >= 1), and that bound as messages write it."""

    @abstractmethod
    def launch_refusal(self, spec: Spec) -> str | None:
        """Why the engine cannot launch the spec's method here, or None when it can."""

    @abstractmethod
    def handoff(self, connector: str) -> Rules:
        """The KV handoff rules of `connector` when this engine is the decode side
        (<engine>/handoff.py): its connector resolves where KV comes from."""

    def flag_table(self) -> FlagTable:
        """Every launch flag this release's parser accepts (flags/, flag_table.py)."""
        from specplan.engines.flag_table import flag_table

        return flag_table(self.name, self.version)

    # -- shared rules -----------------------------------------------------------------------

    def node_violations(self, spec: Spec, nodes_divide: int, function: str) -> list[Violation]:
        """`nodes` must divide the ranks the engine spreads over nodes; when `nodes` is
        written, no node may hold more ranks than a machine has devices."""
        t = spec.topology
        if nodes_divide % t.nodes:
            return [Violation(("topology", "nodes"), f"nodes={t.nodes} does not divide the "
                              f"{nodes_divide} ranks ({self.title} {function})")]
        per_node = self.world_size(t) * self.num_worlds(t) // t.nodes
        limit = DEVICES_PER_NODE.get(t.device)
        if "nodes" not in t.model_fields_set or limit is None or per_node <= limit:
            return []
        return [Violation(("topology", "nodes"), f"nodes={t.nodes} puts {per_node} ranks on each "
                          f"node, more than a {t.device} node has ({limit} devices): each rank "
                          f"binds local device = local rank at load (expected nodes >= "
                          f"{-(-per_node * t.nodes // limit)})")]

    def moe_violations(self, spec: Spec, ep: int) -> list[Violation]:
        """Expert parallel needs a MoE model."""
        if ep > 1 and spec.model.moe is None:
            return [Violation(("topology", "ep"), f"ep={ep} needs a mixture-of-experts model "
                              "(model.moe)")]
        return []


V = TypeVar("V")


class PerEngine(Generic[V]):
    """One value per engine, for code an engine's package cannot hold: it lives in a layer
    above engines/ (ecosystem's launch-line readers and writers). Each value names its engine
    where it is defined, `@READERS.of(SGLang)`, as SGLang's HookRegistry declares a hook's
    target at the hook; `table[convention]` finds it."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._values: dict[type[Convention], V] = {}

    def of(self, engine: type[Convention]) -> Callable[[V], V]:
        """Decorator: the value below serves `engine` (a Convention class)."""
        def register(value: V) -> V:
            assert engine not in self._values, f"two {self.what}s for {engine.name}"
            self._values[engine] = value
            return value
        return register

    def __getitem__(self, conv: Convention) -> V:
        for cls in type(conv).__mro__:
            if cls in self._values:
                return self._values[cls]
        raise KeyError(f"no {self.what} for {conv.name}")
