"""The SGLang rules that changed between releases, measured on each release's own wheel
(issue 37): specplan refuses a spec at `engine_version` V exactly when release V's function does.

- PP + speculative decoding: 0.5.20 check_server_args (arg_groups/validation_hook.py) asserts
  speculative_algorithm is None under pp_size > 1 off NPU; 0.5.21 on run EAGLE / NEXTN
  (check_pipeline_parallel_compat). engines/sglang/__init__.py PP_SPEC_FROM.
- CP: handle_context_parallelism (arg_groups/parallel_hook.py) counts every DP replica
  (dp_size) in 0.5.20 and 0.5.21, DP-attention's only (attn_dp_size) from 0.5.22.
  engines/sglang/__init__.py CP_COUNTS_ATTN_DP_FROM.
The newest release runs under `engines`; the older ones also under `versions` (their wheels
are downloaded on first use, tests/engines/wheels.py).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from real_code import function, sglang_cp_hook, statements

from specplan.engines import convention
from specplan.engines.releases import RELEASES, newest
from specplan.schema.model import Spec

pytestmark = pytest.mark.engines
RELEASE = [pytest.param(v, marks=() if v == newest("sglang") else pytest.mark.versions, id=v)
           for v in RELEASES["sglang"]]
MODEL = {"num_layers": 8, "hidden_size": 64, "vocab_size": 512}


def _spec(version: str, topology: dict, method: str = "eagle") -> Spec:
    return Spec.model_validate({"name": "r", "engine": "sglang", "engine_version": version,
                                "topology": topology, "model": MODEL,
                                "speculative": {"method": method, "num_steps": 2}})


def _refuses(call) -> bool:
    try:
        call()
    except (AssertionError, ValueError):
        return True
    return False


# -- PP + speculative decoding ------------------------------------------------------------

def _pp_check(version: str, pp_spec_env: bool):
    """The `if cfg.pp_size > 1:` block of the release's check_server_args, as written, with
    check_pipeline_parallel_compat (0.5.21 on) compiled from the same file; SGLANG_ENABLE_PP_SPEC
    as `pp_spec_env` (what specplan's export sets)."""
    path = "sglang/srt/arg_groups/validation_hook.py"
    envs = SimpleNamespace(SGLANG_ENABLE_PP_SPEC=SimpleNamespace(get=lambda: pp_spec_env))
    scope = {"get_platform": lambda: SimpleNamespace(is_npu=False), "envs": envs,
             "attn_dp_enabled_of": lambda cfg: False}
    try:
        scope["check_pipeline_parallel_compat"] = function("sglang", path, "check_pipeline_parallel_compat",
                                                           dict(scope), version)
    except LookupError:  # 0.5.20: the rule is inline in check_server_args
        pass
    block = statements("sglang", path, "check_server_args",
                       lambda s: s.startswith("if cfg.pp_size > 1"), version)
    return lambda cfg: block({**scope, "cfg": cfg})


def _exported_env(spec: Spec) -> tuple[str | None, set[str]]:
    """specplan's refusal of the spec (None: it runs) and the variables export sets (none when
    export refuses it, for the same reason)."""
    from specplan.ecosystem.export import Refusal, export

    why = convention("sglang", spec.engine_version).launch_refusal(spec)
    try:
        return why, {name for name, _, _ in export(spec).env}
    except Refusal as exc:
        assert why is not None and why in str(exc)
        return why, set()


def _pp_cfg(algorithm: str | None, mode: str) -> SimpleNamespace:
    """The server args check_pipeline_parallel_compat reads, for a line export writes."""
    return SimpleNamespace(pp_size=2, disable_overlap_schedule=True, speculative_algorithm=algorithm,
                           enable_multi_layer_eagle=False, disaggregation_mode=mode,
                           speculative_adaptive=False, min_free_slots_delay=None,
                           enable_dp_attention=False)


@pytest.mark.parametrize("version", RELEASE)
@pytest.mark.parametrize("method,algorithm", [("eagle", "EAGLE"), ("mtp", "EAGLE"), ("none", None)])
def test_pp_speculative_decoding_per_release(version, method, algorithm):
    """The release refuses the launch export writes (with its SGLANG_ENABLE_PP_SPEC, never on
    0.5.20, which has no such variable) exactly when specplan refuses the spec."""
    spec = _spec(version, {"tp": 2, "pp": 2}, method)
    why, env = _exported_env(spec)
    assert ("SGLANG_ENABLE_PP_SPEC" in env) == (version != "0.5.20" and method != "none")
    cfg = _pp_cfg(algorithm, "null")
    engine = _refuses(lambda: _pp_check(version, "SGLANG_ENABLE_PP_SPEC" in env)(cfg))
    assert (why is not None) == engine, (version, method, why)
    if why:
        assert why.startswith(f"SGLang {version} runs no speculative decoding under pipeline parallel")
        assert "check_server_args" in why


@pytest.mark.parametrize("version", RELEASE)
@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_pp_eagle_on_a_pd_instance_per_release(version, role):
    """A PD instance: the release accepts the line export writes (a prefill node without
    SGLANG_ENABLE_PP_SPEC) exactly when specplan does not refuse the spec (a decode node)."""
    spec = Spec.model_validate({**_spec(version, {"tp": 2, "pp": 2}).model_dump(exclude_unset=True),
                                "disaggregation": {"role": role}})
    why, env = _exported_env(spec)
    assert "SGLANG_ENABLE_PP_SPEC" not in env
    cfg = _pp_cfg("EAGLE", role)
    engine = _refuses(lambda: _pp_check(version, False)(cfg))
    with_env = _refuses(lambda: _pp_check(version, True)(cfg))
    assert (why is not None) == (engine and with_env), (version, role, why)


# -- CP with plain DP replicas -----------------------------------------------------------

def _cp_check(version: str, monkeypatch):
    return sglang_cp_hook(monkeypatch.setitem, version)


CP_CASES = [{"tp": 2, "dp": 2, "cp": 2}, {"tp": 4, "dp": 2, "cp": 4}, {"tp": 4, "dp": 2, "cp": 2},
            {"tp": 4, "dp": 2, "cp": 2, "dp_attention": True}, {"tp": 8, "dp": 2, "cp": 8},
            {"tp": 4, "dp": 4, "cp": 2}]


@pytest.mark.parametrize("version", RELEASE)
@pytest.mark.parametrize("t", CP_CASES, ids=lambda t: "-".join(f"{k}{int(v)}" for k, v in t.items()))
def test_context_parallel_counts_dp_per_release(version, t, monkeypatch):
    args = SimpleNamespace(
        model_path="instance://x", enable_prefill_cp=False, cp_strategy=None, tp_size=t["tp"],
        attn_cp_size=t["cp"], attn_dp_size=t["dp"] if t.get("dp_attention") else 1, moe_dp_size=1,
        ep_size=1, pp_size=1, enable_aiter_allreduce_fusion=False, dp_size=t["dp"],
        enable_dp_attention=bool(t.get("dp_attention")))
    engine = _refuses(lambda: _cp_check(version, monkeypatch)(args))
    spec = _spec(version, t, "none")
    ours = [v for v in convention("sglang", version).violations(spec) if v.path == ("topology", "cp")]
    assert bool(ours) == engine, (version, t, ours)


def test_the_issues_topologies_split_the_releases():
    """tp 2 dp 2 cp 2 and tp 4 dp 2 cp 4: refused by 0.5.20 and 0.5.21, accepted from 0.5.22."""
    for t in CP_CASES[:2]:
        refused = [v for v in RELEASES["sglang"]
                   if any(x.path == ("topology", "cp") for x in convention("sglang", v).violations(_spec(v, t, "none")))]
        assert refused == ["0.5.20", "0.5.21"], t
