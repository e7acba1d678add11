"""The plan's one reader and writer, JSON <-> frozen dataclasses (specplan/ir/codec.py, below
the passes so that the draft and the plan share their leaf objects, ir/records.py)."""

from specplan.ir.codec import ABSENT, Absent, JsonObject, Min, Problem, decode, encode, given, opt

__all__ = ["ABSENT", "Absent", "JsonObject", "Min", "Problem", "decode", "encode", "given", "opt"]
