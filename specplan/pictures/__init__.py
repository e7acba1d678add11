"""Pictures of a spec for `specplan explain --picture`: the rank grid and the round graph,
as SVG (written here, no graphviz and no browser), Mermaid or DOT text. Torch-free."""

from __future__ import annotations

from typing import TYPE_CHECKING

from specplan.files import write_atomic as _write_file

if TYPE_CHECKING:
    from specplan.plan import Plan

KINDS = ("ranks", "round")
FORMATS = ("svg", "mermaid", "dot")


def render_picture(kind: str, fmt: str, data: dict, planning, plan: Plan,
                   family: str | None = None) -> str:
    """The picture's text. `data` is explain_data's dict, `planning` the planner's result."""
    if kind == "ranks":
        from specplan.pictures import ranks

        family = family or ranks.default_family(data)
        render = {"svg": ranks.render_svg, "mermaid": ranks.render_mermaid, "dot": ranks.render_dot}[fmt]
        return render(data, family)
    from specplan.pictures import round as round_pic
    from specplan.pictures import round_text

    pic = round_pic.RoundPicture(planning.graph, plan)
    render = {"svg": round_pic.render_svg, "mermaid": round_text.render_mermaid,
              "dot": round_text.render_dot}[fmt]
    return render(pic)


def write_picture(spec_path: str, kind: str, fmt: str, data: dict, planning, plan: Plan,
                  family: str | None, out: str) -> str:
    """Validate --family, render, write `out` atomically; returns the path written."""
    from specplan.errors import Diagnostic, SpecError

    if family is not None and family not in data["groups"]:
        choices = ", ".join(data["groups"])
        raise SpecError([Diagnostic(spec_path, None, None, "", f"--family {family!r} is not a group "
                                    f"family of this mesh: expected one of {choices}")])
    write_atomic(out, render_picture(kind, fmt, data, planning, plan, family))
    return out


def write_atomic(path: str, text: str) -> None:
    """Write beside the target, then rename: a reader never sees half a picture."""
    _write_file(path, text, what="the picture")


__all__ = ["FORMATS", "KINDS", "render_picture", "write_atomic", "write_picture"]
