"""Reading the report's SVG figures back, for the tests: their size on screen, every text's
rendered font size, and anything they would fetch.

An SVG in the report shows at its own size (width in pt, 1 pt = 4/3 CSS px) unless it is
wider than the report's column, which scales it down; a text's size on screen at 100%
zoom is its font size in the SVG's user units times the px per user unit times that
scale. ``MIN_TEXT_PX`` is the floor the figures promise (issue 16: ~6 px labels were
unreadable).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from batchscale.analysis.figures.plot_base import PAGE_WIDTH_PX

MIN_TEXT_PX = 10.0
SVG = "{http://www.w3.org/2000/svg}"
XLINK_HREF = "{http://www.w3.org/1999/xlink}href"


def parse(svg: bytes) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg", root.tag
    return root


def size_px(svg: bytes) -> tuple[float, float]:
    """The figure's own size in CSS px (its width and height attributes are in pt)."""
    root = parse(svg)
    return tuple(float(root.get(k).removesuffix("pt")) * 4 / 3 for k in ("width", "height"))


def _font_px(element: ET.Element, inherited: float | None) -> float | None:
    style = element.get("style", "") + ";font-size:" + element.get("font-size", "")
    sizes = re.findall(r"font-size:\s*([0-9.]+)(px|pt)?", style)
    if not sizes:
        return inherited
    value, unit = sizes[0]
    return float(value) * (4 / 3 if unit == "pt" else 1.0)


def _scale(transform: str | None) -> float:
    """The scale a transform applies (matplotlib writes rotate, translate and scale)."""
    factor = 1.0
    for args in re.findall(r"scale\(([^)]*)\)", transform or ""):
        numbers = [float(v) for v in re.split(r"[\s,]+", args.strip()) if v]
        factor *= min(abs(v) for v in numbers)
    return factor


def texts(svg: bytes, page_width_px: float = PAGE_WIDTH_PX) -> list[tuple[str, float]]:
    """(text, px on screen at 100% zoom in the report's column) for every text and tspan
    that holds characters."""
    root = parse(svg)
    width_px, _ = size_px(svg)
    view = [float(v) for v in root.get("viewBox").split()]
    unit_px = width_px / view[2] * min(1.0, page_width_px / width_px)
    out = []

    def walk(element, font, scale):
        font = _font_px(element, font) if element.tag in (f"{SVG}text", f"{SVG}tspan") else font
        scale *= _scale(element.get("transform"))
        if element.tag in (f"{SVG}text", f"{SVG}tspan") and (element.text or "").strip():
            assert font is not None, f"text without a font size: {element.text!r}"
            out.append((element.text.strip(), font * scale * unit_px))
        for child in element:
            walk(child, font, scale)

    walk(root, None, 1.0)
    return out


def too_small(svg: bytes, floor: float = MIN_TEXT_PX) -> list[tuple[str, float]]:
    """Texts under ``floor`` px; fails on a figure with no text at all."""
    found = texts(svg)
    assert found, "a figure with no text: nothing to measure"
    return [(text, round(px, 2)) for text, px in found if px < floor - 1e-9]


def outside(svg: bytes) -> list[str]:
    """Texts anchored outside the figure (cut off where the figure ends)."""
    root = parse(svg)
    _, _, width, height = (float(v) for v in root.get("viewBox").split())
    return [t.text for t in root.iter(f"{SVG}text")
            if t.get("x") is not None and not (0 <= float(t.get("x")) <= width
                                                and 0 <= float(t.get("y")) <= height)]


def external_references(svg: bytes) -> list[str]:
    """Whatever the figure would load or run: links not to its own ids, url() not to its
    own ids, scripts, embedded images, foreign objects, CSS imports."""
    root = parse(svg)
    found = []
    for element in root.iter():
        tag = element.tag.removeprefix(SVG)
        if tag in ("script", "image", "foreignObject", "a", "iframe"):
            found.append(f"<{tag}>")
        for name, value in element.attrib.items():
            if name in (XLINK_HREF, "href") and not value.startswith("#"):
                found.append(f"{name}={value}")
            found += [f"url({u})" for u in re.findall(r"url\(([^)]*)\)", value)
                      if not u.strip("'\" ").startswith("#")]
        if tag == "style" and "@import" in (element.text or ""):
            found.append("@import")
    text = svg.decode()
    found += [m for m in re.findall(r"https?://[^\s\"'<>]+", text)
              if not m.startswith(("http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"))]
    return found
