"""Pure rank math per engine convention: families, coordinates, replicas, stages."""

from specplan.mesh.family import Family
from specplan.mesh.mesh import Mesh, Replica
from specplan.mesh.pipeline import Stage

__all__ = ["Family", "Mesh", "Replica", "Stage"]
