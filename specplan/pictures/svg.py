"""A tiny SVG writer: shapes, multi-line text and arrows, emitted in a fixed order.

No layout engine and no network: callers place every shape themselves, so the same input
always writes the same bytes (pictures are committed to docs/ and compared in tests).
"""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
CHAR_W = 6.4  # average glyph width at FONT_SIZE, for sizing boxes to their labels
FONT_SIZE = 11
LINE_H = 14

# Replica colours (fill) and group outline colours (stroke): fixed, colour-blind friendly.
PALETTE = ("#8ecae6", "#ffb703", "#90be6d", "#f4a3c0", "#bdb2ff", "#d4a373", "#a0c4ff",
           "#ffd6a5", "#caffbf", "#fdffb6", "#9bf6ff", "#ffc6ff")
STROKES = ("#1d3557", "#d62828", "#2a9d8f", "#6a4c93", "#e76f51", "#264653", "#b5179e",
           "#3a86ff")


def text_width(text: str, size: int = FONT_SIZE) -> float:
    return len(text) * CHAR_W * size / FONT_SIZE


def _num(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


class Canvas:
    """Collects SVG elements; `render` wraps them in a document sized to fit."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.parts: list[str] = []
        self.width = 0.0
        self.height = 0.0
        self._markers: set[str] = set()  # arrow-head colours in use

    def _grow(self, x: float, y: float) -> None:
        self.width = max(self.width, x)
        self.height = max(self.height, y)

    def rect(self, x: float, y: float, w: float, h: float, *, fill: str = "none",
             stroke: str = "#333", rx: float = 0, dash: str | None = None, width: float = 1,
             tooltip: str | None = None, cls: str | None = None) -> None:
        self._grow(x + w, y + h)
        attrs = (f'x="{_num(x)}" y="{_num(y)}" width="{_num(w)}" height="{_num(h)}" rx="{_num(rx)}" '
                 f'fill="{fill}" stroke="{stroke}" stroke-width="{_num(width)}"')
        if dash:
            attrs += f' stroke-dasharray="{dash}"'
        if cls:
            attrs += f' class="{cls}"'
        self._shape("rect", attrs, tooltip)

    def polygon(self, points: list[tuple[float, float]], *, fill: str, stroke: str = "#333",
                width: float = 1, tooltip: str | None = None, cls: str | None = None) -> None:
        for x, y in points:
            self._grow(x, y)
        pts = " ".join(f"{_num(x)},{_num(y)}" for x, y in points)
        attrs = f'points="{pts}" fill="{fill}" stroke="{stroke}" stroke-width="{_num(width)}"'
        if cls:
            attrs += f' class="{cls}"'
        self._shape("polygon", attrs, tooltip)

    def ellipse(self, cx: float, cy: float, rx: float, ry: float, *, fill: str, stroke: str = "#333",
                width: float = 1, tooltip: str | None = None, cls: str | None = None) -> None:
        self._grow(cx + rx, cy + ry)
        attrs = (f'cx="{_num(cx)}" cy="{_num(cy)}" rx="{_num(rx)}" ry="{_num(ry)}" fill="{fill}" '
                 f'stroke="{stroke}" stroke-width="{_num(width)}"')
        if cls:
            attrs += f' class="{cls}"'
        self._shape("ellipse", attrs, tooltip)

    def _shape(self, tag: str, attrs: str, tooltip: str | None) -> None:
        if tooltip:
            self.parts.append(f"<{tag} {attrs}><title>{escape(tooltip)}</title></{tag}>")
        else:
            self.parts.append(f"<{tag} {attrs}/>")

    def text(self, x: float, y: float, lines: list[str] | str, *, size: int = FONT_SIZE,
             anchor: str = "middle", bold: bool = False, color: str = "#111",
             cls: str | None = None) -> None:
        """Lines of text; y is the baseline of the first line."""
        lines = [lines] if isinstance(lines, str) else lines
        widest = max((text_width(s, size) for s in lines), default=0)
        self._grow(x + (widest if anchor == "start" else widest / 2), y + LINE_H * len(lines))
        weight = ' font-weight="bold"' if bold else ""
        klass = f' class="{cls}"' if cls else ""
        spans = "".join(f'<tspan x="{_num(x)}" dy="{0 if i == 0 else LINE_H}">{escape(s)}</tspan>'
                        for i, s in enumerate(lines))
        self.parts.append(f'<text x="{_num(x)}" y="{_num(y)}" font-size="{size}" '
                          f'text-anchor="{anchor}" fill="{color}"{weight}{klass}>{spans}</text>')

    def line(self, points: list[tuple[float, float]], *, color: str = "#555", width: float = 1,
             dash: str | None = None, arrow: bool = True, label: str | None = None,
             label_dy: float = -4, label_left: bool = False, tooltip: str | None = None, cls: str | None = None) -> None:
        """A polyline, with an arrow head at its end and an optional label at its middle."""
        for x, y in points:
            self._grow(x, y)
        d = "M " + " L ".join(f"{_num(x)} {_num(y)}" for x, y in points)
        attrs = f'd="{d}" fill="none" stroke="{color}" stroke-width="{_num(width)}"'
        if dash:
            attrs += f' stroke-dasharray="{dash}"'
        if arrow:
            attrs += f' marker-end="url(#arrow-{color.lstrip("#")})"'
            self._markers.add(color)
        if cls:
            attrs += f' class="{cls}"'
        self._shape("path", attrs, tooltip)
        if label:
            (x0, y0), (x1, y1) = points[len(points) // 2 - 1], points[len(points) // 2]
            dx = -5 if label_left else 5
            self.text((x0 + x1) / 2 + dx, (y0 + y1) / 2 + label_dy, label, size=10, color=color,
                      anchor="end" if label_left else "start", cls="edge-label")

    def render(self, margin: float = 16) -> str:
        w, h = self.width + margin, self.height + margin
        defs = "".join(
            f'<marker id="arrow-{c.lstrip("#")}" viewBox="0 0 10 10" refX="9" refY="5" '
            f'markerUnits="userSpaceOnUse" markerWidth="9" markerHeight="9" orient="auto-start-reverse">'
            f'<path d="M 0 0 L 10 5 L 0 10 z" fill="{c}"/></marker>' for c in sorted(self._markers))
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{_num(w)}" height="{_num(h)}" '
                f'viewBox="0 0 {_num(w)} {_num(h)}" font-family={quoteattr(FONT)}>')
        body = "\n".join(self.parts)
        return (f'<?xml version="1.0" encoding="UTF-8"?>\n{head}\n<title>{escape(self.title)}</title>\n'
                f'<defs>{defs}</defs>\n<rect x="0" y="0" width="{_num(w)}" height="{_num(h)}" '
                f'fill="#ffffff"/>\n{body}\n</svg>\n')
