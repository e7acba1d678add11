"""The runtime an engine imports: bind a plan, converge its boundaries, probe, trace.

    rt = specplan.runtime.bind("build/x/plan.json")   # torch.distributed from torchrun env
    out = rt.converge("dspark_draft", {"draft_tokens": drafts}, round=r, live_rows=bs)

The only package besides sim/ and lower's torch.fx half that imports torch.
"""

from specplan.runtime.errors import (CollectiveTimeout, DesyncError, FingerprintMismatch,
                                     GroupMismatch, ProbeMismatch, RuntimeDivergence,
                                     WireMismatch, WorldSizeMismatch)
from specplan.runtime.runtime import Accepted, Runtime, bind

__all__ = ["Accepted", "CollectiveTimeout", "DesyncError", "FingerprintMismatch", "GroupMismatch",
           "ProbeMismatch", "Runtime", "RuntimeDivergence", "WireMismatch", "WorldSizeMismatch", "bind"]
