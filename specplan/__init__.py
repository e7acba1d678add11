"""specplan: plan, prove and run rank agreement for speculative decoding on many GPUs."""

from specplan.version import __version__


def __getattr__(name: str):
    # `import specplan` stays light: the API (and pydantic, the planner) load on first use.
    if name == "compile":  # specplan.compile(spec) -> Plan: every pass, then the Plan
        from specplan.plan.build import compile

        return compile
    if name in ("load", "Deployment", "Report", "Pair", "Refused", "Said", "InputRefused",
                "spec_schema", "import_line", "enforce", "diff"):
        from specplan import api

        return getattr(api, name)
    raise AttributeError(f"module 'specplan' has no attribute {name!r}")


__all__ = ["Deployment", "InputRefused", "Pair", "Refused", "Report", "Said", "compile", "diff",
           "enforce", "import_line", "load", "spec_schema", "__version__"]
