"""Disaggregated deployments: a prefill and a decode instance, and the KV handoff between.

load       deployment file / spec with a peer / two specs -> InstancePair (errors file:line:col)
geometry   one instance's attention-TP, CP, PP coordinates, layers, heads and draft KV
rules      each engine's handoff rules, one strategy per (engine, connector)
handoff    the KV handoff plan: one entry per decode rank
"""

from specplan.deploy.load import InstancePair, is_deployment, load_pair, load_target

__all__ = ["InstancePair", "is_deployment", "load_pair", "load_target"]
