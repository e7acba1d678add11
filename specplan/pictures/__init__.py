"""Pictures of a spec for `specplan explain --picture`: the rank grid and the round graph,
as SVG (written here, no graphviz and no browser), Mermaid or DOT text, or PNG rendered from
the SVG by an optional library (cairosvg, else vl-convert-python). Torch-free."""

from __future__ import annotations

from typing import TYPE_CHECKING

from specplan.io.files import write_atomic as _write_file

if TYPE_CHECKING:
    from specplan.plan import Plan

KINDS = ("ranks", "round")
FORMATS = ("svg", "png", "mermaid", "dot")
PNG_LIBRARIES = "pip install cairosvg (or vl-convert-python)"


class NoRenderer(Exception):
    """--format png without a library that renders SVG."""


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
    draw = {"svg": round_pic.render_svg, "mermaid": round_text.render_mermaid,
            "dot": round_text.render_dot}[fmt]
    return draw(pic)


def write_picture(spec_path: str, kind: str, fmt: str, data: dict, planning, plan: Plan,
                  family: str | None, out: str | None) -> str | None:
    """Validate --family, render, write `out` atomically (or stdout); returns the path written."""
    from specplan.errors import Diagnostic, SpecError

    if family is not None and family not in data["groups"]:
        choices = ", ".join(data["groups"])
        raise SpecError([Diagnostic(spec_path, None, None, "", f"--family {family!r} is not a group "
                                    f"family of this mesh: expected one of {choices}")])
    text = render_picture(kind, "svg" if fmt == "png" else fmt, data, planning, plan, family)
    return emit(out, text, fmt)


def emit(out: str | None, text: str, fmt: str) -> str | None:
    """Write the picture (`text`: svg, mermaid or dot; png is rendered from the svg) to `out`
    atomically and return the path, or to stdout without `out` (returns None)."""
    import sys

    body = to_png(text) if fmt == "png" else text
    if out is not None:
        write_atomic(out, body)
        return out
    if isinstance(body, bytes):
        sys.stdout.flush()
        sys.stdout.buffer.write(body)
        sys.stdout.buffer.flush()
    else:
        sys.stdout.write(body if body.endswith("\n") else body + "\n")
    return None


def to_png(svg: str) -> bytes:
    """The SVG rendered to PNG by cairosvg, else vl-convert-python; NoRenderer when neither
    is installed (specplan depends on neither)."""
    try:
        import cairosvg
    except (ImportError, OSError):  # OSError: the package is there but libcairo is not
        cairosvg = None
    if cairosvg is not None:
        return cairosvg.svg2png(bytestring=svg.encode("utf-8"))
    try:
        import vl_convert
    except ImportError:
        raise NoRenderer(f"--format png needs an SVG renderer, and none is installed: "
                         f"{PNG_LIBRARIES}; or write --format svg") from None
    return bytes(vl_convert.svg_to_png(svg))


def write_atomic(path: str, text: str | bytes) -> None:
    """Write beside the target, then rename: a reader never sees half a picture."""
    _write_file(path, text, what="the picture")


__all__ = ["FORMATS", "KINDS", "NoRenderer", "emit", "render_picture", "to_png", "write_atomic",
           "write_picture"]
