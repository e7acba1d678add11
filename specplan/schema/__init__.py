"""YAML -> Spec: the schema, the located YAML reader and the cross-field checks."""

from specplan.schema.load import load_spec
from specplan.schema.model import Spec

__all__ = ["Spec", "load_spec"]
