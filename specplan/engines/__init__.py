"""One convention object per engine: everything that differs between SGLang and vLLM.

`convention(spec.engine)` is the one place an engine is selected; the rest of specplan asks
the object (base.Convention lists the questions) and never compares engine names.
"""

from __future__ import annotations

from specplan.engines.base import Convention, DpAgreement, MoeLayout, Violation
from specplan.engines.sglang import SGLang
from specplan.engines.vllm import VLLM

ENGINES: dict[str, Convention] = {"sglang": SGLang(), "vllm": VLLM()}


def convention(engine: str) -> Convention:
    return ENGINES[engine]


__all__ = ["ENGINES", "Convention", "DpAgreement", "MoeLayout", "Violation", "convention"]
