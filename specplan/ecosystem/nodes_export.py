"""`specplan export --nodes` and `--format lws`: a spec's launch, one line per node (nodes.py)
or a LeaderWorkerSet (lws.py)."""

from __future__ import annotations

from specplan.ecosystem.nodes import NodeOptions, executor_of, node_lines, render_nodes


def export_nodes(spec, engine: str | None, version: str | None, options: NodeOptions,
                 plan_path: str | None = None, plan_how: str | None = None) -> str:
    """`specplan export --nodes` (and --format lws): `spec`'s launch, one line per node."""
    from specplan.ecosystem.export import _kept, export

    launch = export(spec, engine, version, plan_path)
    if plan_how and launch.plan_path:
        launch.plan_how = plan_how
    executor_of(launch.engine, options)
    kept = _kept(spec) if launch.faithful is not None else []
    if launch.faithful is not None:  # its own spelling, with the arguments it keeps as written
        launch.notes[:0] = ["the spec's line in specplan's spelling, one per node, with the "
                            "arguments it does not plan kept as written"]
    lines = node_lines(launch, spec.topology.nodes, spec.topology.dp, options, kept)
    if options.fmt == "lws":
        from specplan.ecosystem.lws import render_lws

        return render_lws(spec, launch, lines, options)
    return render_nodes(launch, lines, options)
