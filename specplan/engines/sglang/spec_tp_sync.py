"""SGLANG_SPEC_TP_SYNC both ways: a plan's converged sites <-> the variable's value.

The value is comma-separated presets (all, rng, init, off/none), site slugs and numbers, each
negatable with a leading "-", read left to right (SGLang 0.5.23 spec_tp_sync.py). Only the
sites of the spec's method matter: a dspark spec ignores the dflash slugs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specplan.methods.base import Method

# SGLang SpecTpSyncSite slugs and numbers (spec_tp_sync.py), presets, and the retired
# handles that now select dspark-draft.
SGLANG_SITES = {"dspark-mem": 1, "dspark-plan": 7, "dspark-accept-greedy": 8,
                "dspark-accept-sample": 9, "dspark-accept-graph": 10, "dspark-target": 11,
                "dspark-draft": 17, "dflash-mem": 12, "dflash-selector": 13,
                "dflash-accept-sample": 14, "dflash-accept-greedy": 15, "dflash-target": 16}
SGLANG_PRESETS = {
    "all": frozenset(SGLANG_SITES),
    "off": frozenset(),
    "none": frozenset(),
    "init": frozenset({"dspark-mem", "dflash-mem"}),
    "rng": frozenset({"dspark-mem", "dflash-mem", "dspark-accept-sample", "dspark-target",
                      "dflash-selector", "dflash-accept-sample", "dflash-target"}),
}
SGLANG_RETIRED = ("dspark-draft-greedy", "dspark-draft-sample", "dspark-draft-multinomial",
                  "dspark-graph-sample", "dspark-graph-greedy", "2", "3", "4", "5", "6")

# specplan site -> the SGLang slugs that carry its decisions. A slug listed twice travels
# with its twin: DSPARK_ACCEPT_GRAPH is the in-graph form of the greedy accept, and
# DFLASH_SELECTOR the selector form of the sampled accept (methods/dspark.py, dflash.py).
SITE_SLUGS = {
    "dspark_mem": ("dspark-mem",), "dspark_plan": ("dspark-plan",),
    "dspark_accept_greedy": ("dspark-accept-greedy", "dspark-accept-graph"),
    "dspark_accept_sample": ("dspark-accept-sample",), "dspark_target": ("dspark-target",),
    "dspark_draft": ("dspark-draft",), "dflash_mem": ("dflash-mem",),
    "dflash_accept_sample": ("dflash-accept-sample", "dflash-selector"),
    "dflash_accept_greedy": ("dflash-accept-greedy",), "dflash_target": ("dflash-target",),
}

_BY_NUMBER = {str(n): slug for slug, n in SGLANG_SITES.items()}
_PRESET_ORDER = ("all", "rng", "init", "off")


def slugs_of(sites: dict[str, bool], only_on: bool = True) -> frozenset[str]:
    """The SGLang slugs of a plan's {site: converge}: those it turns on, or with
    only_on=False every slug the plan has (sites SGLang lacks are dropped)."""
    return frozenset(slug for site, on in sites.items() if on or not only_on
                     for slug in SITE_SLUGS.get(site, ()))


def value_for(care: frozenset[str], on: frozenset[str]) -> str:
    """The shortest SGLANG_SPEC_TP_SYNC value that turns on exactly `on` among the slugs the
    plan has (`care`; the others never fire for this spec): a preset when one matches, else
    "all,-a,-b" or an explicit list, whichever is shorter."""
    for preset in _PRESET_ORDER:
        if SGLANG_PRESETS[preset] & care == on:
            return preset
    minus = "all," + ",".join(f"-{s}" for s in sorted(care - on))
    plus = ",".join(sorted(on))
    return minus if len(minus) < len(plus) else plus


def parse(value: str) -> frozenset[str]:
    """The slugs `value` turns on; ValueError naming an unknown token and the valid ones."""
    on: frozenset[str] = frozenset()
    for token in value.replace(" ", "").replace("_", "-").lower().split(","):
        if not token:
            continue
        negate = token.startswith("-")
        picked = _resolve(token[1:] if negate else token)
        on = on - picked if negate else on | picked
    return on


def _resolve(token: str) -> frozenset[str]:
    if token in SGLANG_PRESETS:
        return SGLANG_PRESETS[token]
    if token in SGLANG_RETIRED:
        return frozenset({"dspark-draft"})
    slug = token if token in SGLANG_SITES else _BY_NUMBER.get(token)
    if slug is None:
        raise ValueError(f"SGLANG_SPEC_TP_SYNC: unknown token {token!r}; presets: "
                         f"{', '.join(sorted(SGLANG_PRESETS))}; sites: {', '.join(SGLANG_SITES)}")
    return frozenset({slug})


def site_states(method_sites: list[str], on: frozenset[str]) -> dict[str, bool]:
    """For each specplan site that SGLang has, whether `on` converges it (its first slug)."""
    return {site: SITE_SLUGS[site][0] in on for site in method_sites if site in SITE_SLUGS}


def has_sites(method: Method) -> bool:
    """Whether SGLang has SpecTpSync sites for `method` (a methods/ Method): DSpark's and
    DFlash's; the EAGLE family and n-gram converge only inside eagle_sample."""
    return any(s.name in SITE_SLUGS for s in method.sites)
