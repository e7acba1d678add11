"""The vocabulary a speculative method is written in: phases, decisions, sites.

A method is data, not code: the planner reads these records to build the round graph.
Shapes are tuples of symbol expressions over `bs`, `num_steps`, `topk`,
`num_draft_tokens`, `vocab`, `hidden`; `eval_dim` turns one into a number.

Conventions the method files follow:
- Phase names are unique within `prefill` and within `decode`; a phase named in both (EAGLE's
  `draft_extend`) produces its decisions in both, and `Decision.phase` names it once. Start-up
  decisions (free memory) carry phase "startup", which is in neither tuple.
- A value SGLang converges at two path-specific sites (DSpark's correct_len, bonus and
  cap_trim_lens at DSPARK_ACCEPT_GREEDY and DSPARK_ACCEPT_SAMPLE) is two decisions, named
  `<value>_greedy` and `<value>_sample` after their sites, so names stay unique in a method.
- A value one site converges on both paths (EAGLE's predict / accept_index /
  num_correct_drafts) is one decision with path "any" and the nature of its worst path (rng);
  its doc says what the greedy path is (float).
- `Decision.tree_only` marks values that only vary when topk > 1 (the EAGLE tree topology):
  a chain (topk == 1) fills them with constants, so a chain round need not converge them.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, Mapping, TypeVar

Nature = Literal["deterministic", "float", "rng", "host"]
Dtype = Literal["bool", "int32", "int64", "float32"]
# Which sampling path produces a decision: the greedy path, the sampling path, or both.
Path = Literal["greedy", "sampling", "any"]
# Who reads a converged decision: every PP stage of the replica, or only the last.
Readers = Literal["all_stages", "last_stage", "first_stage"]
SiteKind = Literal["broadcast", "min"]
# What a method's decode round is: one target token (none); a drafter's tree or chain verified at
# once and accepted along a path (the EAGLE family, n-gram: eagle_sample); a drafted block
# verified as a chain and finalized by counts (DFlash, DSpark: finalize_accept).
Round = Literal["plain", "draft_verify", "block"]
# What an accept site carries, in its decisions' order: "path" (predict, accept_index,
# num_correct_drafts); "count_bonus" (accepted drafts, bonus[, cap trim]); "target_predict" (the
# target's own predictions, accepted greedily on every rank).
AcceptLayout = Literal["path", "count_bonus", "target_predict"]

# Bytes per element of every dtype a plan names: decisions' dtypes and model.dtype (activations
# and taps). The one table; nbytes is the one element-count helper.
DTYPE_BYTES: Mapping[str, int] = {"bool": 1, "int32": 4, "int64": 8, "float32": 4,
                                  "bf16": 2, "fp16": 2, "fp8": 1, "fp32": 4}
SYMBOLS = ("bs", "num_steps", "topk", "num_draft_tokens", "vocab", "hidden")


@dataclass(frozen=True)
class Decision:
    """A control value a round produces, which every rank serving the request must share."""

    name: str
    shape: tuple[str, ...]
    dtype: Dtype
    nature: Nature
    phase: str
    site: str | None = None  # where it converges; None only for deterministic decisions
    path: Path = "any"
    readers: Readers = "all_stages"
    derives: tuple[str, ...] = ()  # what each rank materializes locally from it
    doc: str = ""
    tree_only: bool = False  # constant when topk == 1 (chain); varies only for trees


@dataclass(frozen=True)
class Site:
    """One named place where decisions converge (SGLang's SpecTpSyncSite, or `<method>_<phase>`).

    `presets` are the SGLANG_SPEC_TP_SYNC presets that include the site besides `all`
    ("init", "rng"); whether an engine converges there by default is its row's
    (engines/<engine>/methods.py `default_sites`).
    """

    name: str
    phase: str
    decisions: tuple[str, ...]
    presets: frozenset[str] = frozenset()
    kind: SiteKind = "broadcast"
    startup: bool = False  # taken once at start-up (free memory), not per round
    doc: str = ""
    accept: AcceptLayout | None = None  # accept sites: what their decisions are, in order


@dataclass(frozen=True)
class Phase:
    """One step of a round, in order. `compute` names the distributed work it runs, if any."""

    name: str
    decisions: tuple[str, ...] = ()
    compute: str | None = None  # "draft_forward" | "target_verify" | "target_prefill" | ...
    tokens_per_request: str = "0"  # rows each request feeds the compute (symbol expression)
    forwards: str = "0"  # how many forwards of `compute` per round (symbol expression)
    stage: Literal["all", "last"] = "all"  # which PP stages run it


_R = TypeVar("_R", Decision, Site)  # what a method looks up by name


def _named(records: Iterable[_R], name: str, missing: str) -> _R:
    """The one of `records` (decisions, sites) called `name`; else KeyError(`missing` 'name')."""
    for record in records:
        if record.name == name:
            return record
    raise KeyError(f"{missing} {name!r}")


@dataclass(frozen=True)
class Method:
    """A speculative method as a template of the round graph."""

    name: str
    prefill: tuple[Phase, ...]
    decode: tuple[Phase, ...]
    decisions: tuple[Decision, ...]
    sites: tuple[Site, ...]
    needs_taps: bool = False
    tree: bool = False  # topk > 1 allowed
    # The verify tree is a trie of num_draft_tokens nodes of any shape (SGLang's n-gram BFS
    # over its corpus: topk only caps a node's children, num_steps is not a depth), not
    # num_steps levels of topk, so num_draft_tokens is bounded by itself alone.
    trie: bool = False
    drafter: Literal["none", "head", "model", "lookup"] = "head"
    round: Round = "draft_verify"
    draft_root: bool = False  # the draft site's tokens begin with the root (DFlash's block)
    # The drafter is the target checkpoint's own multi-token-prediction layers (a config's
    # num_nextn_predict_layers), not a separate draft checkpoint (MTP).
    own_layers: bool = False
    # The method a line naming this one runs instead when it names no draft checkpoint and the
    # target carries its own MTP layers (SGLang resolves EAGLE and NEXTN alike: EAGLE's is mtp).
    without_draft: str | None = None
    title: str = ""  # how the method is written in prose and engine comments ("DFlash")
    doc: str = ""
    # Other shapes of the method, by name, where an engine runs it so (a chain n-gram where the
    # method drafts a trie): an engine's row names the one it runs (engines/<engine>/methods.py
    # `variant`; Convention.method). Each engine's own name and notes are its row's.
    variants: Mapping[str, "Method"] = field(default_factory=dict)

    def decision(self, name: str) -> Decision:
        return _named(self.decisions, name, f"{self.name} has no decision")

    def site(self, name: str) -> Site:
        return _named(self.sites, name, f"{self.name} has no site")

    @property
    def speculates(self) -> bool:
        """Whether the method drafts at all (method none: plain decoding)."""
        return self.drafter != "none"

    @property
    def draft_model(self) -> bool:
        """Whether a draft network runs, with KV layers of its own (a head or a model); n-gram
        looks its drafts up and none drafts nothing."""
        return self.drafter in ("head", "model")

    @property
    def needs_draft_checkpoint(self) -> bool:
        """Whether the drafter is a checkpoint of its own that a launch line names (SGLang
        --speculative-draft-model-path, vLLM speculative_config.model)."""
        return self.draft_model and not self.own_layers

    def block_size(self, num_steps: int) -> int:
        """A block method's block for `num_steps` drafts: the drafts, and the root when the
        block holds it (DFlash: num_steps + 1; DSpark's gamma: num_steps)."""
        assert self.round == "block", f"{self.name} drafts no block"
        return num_steps + int(self.draft_root)

    def steps_of_block(self, block: int) -> int:
        """The num_steps of a block of `block` tokens (block_size's inverse)."""
        assert self.round == "block", f"{self.name} drafts no block"
        return block - int(self.draft_root)

    @property
    def extends_drafts(self) -> bool:
        """Whether the drafter proposes the next round's first level after the accept (the
        EAGLE family's draft extend site)."""
        return any(s.phase == "draft_extend" for s in self.sites)

    @property
    def plans_verify(self) -> bool:
        """Whether a converged verify plan (DSpark's budget and lengths) precedes the verify."""
        return any(s.phase == "plan_verify" for s in self.sites)

    def accept_site(self, sampled: bool) -> Site:
        """The accept site a round fires: the one site, or the one of the round's path."""
        sites = [s for s in self.sites if s.phase == "accept"]
        if len(sites) == 1:
            return sites[0]
        path = "sampling" if sampled else "greedy"
        for s in sites:
            if self.decision(s.decisions[0]).path == path:
                return s
        raise KeyError(f"{self.name} has no accept site for the {path} path")


_ALLOWED = (ast.Expression, ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.FloorDiv,
            ast.Constant, ast.Name, ast.Load)


def eval_dim(expr: str, symbols: Mapping[str, int]) -> int:
    """Evaluate a shape expression such as "num_steps + 1" or "bs * num_draft_tokens"."""
    tree = ast.parse(expr, mode="eval")
    for node in ast.walk(tree):
        assert isinstance(node, _ALLOWED), f"unsupported shape expression {expr!r}"
    return int(eval(compile(tree, "<dim>", "eval"), {"__builtins__": {}}, dict(symbols)))


def nbytes(dims: Iterable[int], dtype: str) -> int:
    """Bytes of a field of concrete `dims` and `dtype`."""
    return math.prod(dims) * DTYPE_BYTES[dtype]
