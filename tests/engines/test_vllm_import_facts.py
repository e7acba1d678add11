"""The vLLM facts `specplan import` states, read back from the wheel's own source (`-m engines`):
the connector names KVConnectorFactory registers (engines/vllm/launch.py REGISTERED_CONNECTORS)
and the MTP model types SpeculativeConfig detects (engines/vllm/methods.py MTP_MODEL_TYPES),
and the method detection's order of name checks (SpeculativeConfig.__post_init__)."""

from __future__ import annotations

import ast

import pytest
from real_code import source_of

from specplan.engines.vllm.methods import MTP_MODEL_TYPES, MTP_REWRITTEN
from specplan.engines.vllm.launch import REGISTERED_CONNECTORS

pytestmark = pytest.mark.engines


def test_registered_connectors_are_the_factorys():
    _, tree = source_of("vllm", "vllm/distributed/kv_transfer/kv_connector/factory.py")
    names = {call.args[0].value for call in ast.walk(tree) if isinstance(call, ast.Call)
             and getattr(call.func, "attr", None) == "register_connector"
             and call.args and isinstance(call.args[0], ast.Constant)}
    assert names == REGISTERED_CONNECTORS


def test_mtp_model_types_are_the_engines():
    path, tree = source_of("vllm", "vllm/config/speculative.py")
    node = next(n for n in tree.body if isinstance(n, ast.Assign)
                and getattr(n.targets[0], "id", None) == "MTPModelTypes")
    assert {e.value for e in node.value.slice.elts} == MTP_MODEL_TYPES
    text = path.read_text()
    for kind in MTP_REWRITTEN:  # each a branch of hf_config_override that sets an *_mtp type
        assert f'"{kind}"' in text[text.index("def hf_config_override"):text.index("def __post_init__")]


def test_detection_checks_the_names_in_specplans_order():
    path, _ = source_of("vllm", "vllm/config/speculative.py")
    text = path.read_text()
    start = text.index("# Automatically detect the method")
    order = [text.index(needle, start) for needle in ('"eagle-" in', '"eagle3" in', '"dflash" in',
                                                     '"dspark" in',
                                                     "MTPModelTypes")]
    assert order == sorted(order)


def test_quantization_methods_are_the_engines():
    from specplan.engines.vllm.launch import QUANTIZATION_METHODS

    _, tree = source_of("vllm", "vllm/model_executor/layers/quantization/__init__.py")
    node = next(n for n in tree.body if isinstance(n, ast.Assign)
                and getattr(n.targets[0], "id", None) == "QuantizationMethods")
    assert {e.value for e in node.value.slice.elts} == QUANTIZATION_METHODS
