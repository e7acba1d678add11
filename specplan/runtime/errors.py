"""Errors the runtime raises when ranks stop agreeing: each names what, when and who.

Every class derives from `RuntimeDivergence`, so an engine can catch one type, log it and
stop the rank; the message always names the site (or decision), the round and the ranks.
"""

from __future__ import annotations


class RuntimeDivergence(RuntimeError):
    """Ranks no longer agree (plan, order, values) or a peer stopped answering."""


class WorldSizeMismatch(RuntimeDivergence):
    """The plan was compiled for another world size than the process group has."""


class FingerprintMismatch(RuntimeDivergence):
    """Two ranks bound different plans."""


class WireMismatch(RuntimeDivergence):
    """What this rank would send differs from what plan.json states (size or header layout)."""


class DesyncError(RuntimeDivergence):
    """A rank received a guard header other than the one it expected: ranks fell out of order."""


class BatchMismatch(RuntimeDivergence):
    """Ranks hold different batches in one converge or relay: the digest of (request,
    generation) per live row in the guard header differs. Names site, round, the first
    differing row and both ranks' (request, generation)."""


class CollectiveTimeout(RuntimeDivergence):
    """A collective did not complete in `runtime.timeout_s`, or a peer of its group died."""


class ProbeMismatch(RuntimeDivergence):
    """The agreement probe found a decision whose hash differs between ranks of one replica."""


class GateMismatch(RuntimeDivergence):
    """Ranks of one collective's group chose differently at a gate (a decision selecting the
    collectives a rank issues next): they would issue collectives of different shapes, or one
    waits on a collective its peer never issues. Names the gate, its group and the ranks."""


class GroupMismatch(RuntimeDivergence):
    """A process group the caller asked bind to adopt is not the plan's group for this rank."""
