"""Self-contained HTML and Markdown pieces shared by the study report and ``compare``.

Figures are embedded as base64 ``data:`` URIs and the style sheet is inline, so a page is
one file that opens from disk, a bucket or the Kubeflow UI with no server and no network.
"""

from __future__ import annotations

import base64
import html
import math
import re

import pandas as pd

STYLE = """body{font-family:system-ui,sans-serif;max-width:1150px;margin:2em auto;color:#222;
line-height:1.4;padding:0 1em}h1{font-size:1.6em}h2{margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:13px;margin:.5em 0}td,th{border:1px solid #ccc;
padding:3px 7px;text-align:right}th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}
figure{display:inline-block;margin:0 1em 1em 0;vertical-align:top}img{max-width:100%}
figcaption{font-size:13px;color:#555;max-width:700px}.warn{background:#fff4e0;border-left:4px
solid #e69500;padding:.4em .8em;margin:.3em 0}.note{color:#555;font-size:14px}
code{background:#f4f4f4;padding:0 3px}.answer{background:#eef6ee;border-left:4px solid #3a7d44;
padding:.5em 1em;margin:1em 0}.answer ul{margin:.3em 0;padding-left:1.2em}nav#contents ol{columns:2;
font-size:14px;margin:.3em 0}table.sortable th{cursor:pointer}th[aria-sort=ascending]::after{content:" ▲"}
th[aria-sort=descending]::after{content:" ▼"}.scroll{max-height:70vh;overflow:auto}
.scroll th{position:sticky;top:0}"""

SORT_SCRIPT = """document.querySelectorAll("table.sortable").forEach(function (t) {
  var heads = Array.prototype.slice.call(t.tHead.rows[0].cells);
  heads.forEach(function (th, i) {
    th.title = "click to sort";
    th.addEventListener("click", function () {
      var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
      heads.forEach(function (o) { o.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", dir > 0 ? "ascending" : "descending");
      var key = function (row) {
        var s = row.cells[i].textContent.trim(), n = Number(s);
        return s === "" || s === "\u2014" ? null : isNaN(n) ? s : n;
      };
      var body = t.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        if (x === null || y === null) { return (x === null) - (y === null); }
        if (typeof x !== typeof y) { return typeof x === "number" ? -1 : 1; }
        return (x < y ? -1 : x > y ? 1 : 0) * dir;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});"""
"""Click a header of a ``sortable`` table to sort by it (again: the other way): numbers
as numbers, text as text, blanks and dashes last. Inline, no library, no network."""


def fmt(value) -> str:
    """A table cell: 4 significant digits for floats, an em dash for missing values."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.0f}" if value.is_integer() and abs(value) < 1e15 else f"{value:.4g}"
    return str(value)


def esc(text) -> str:
    return html.escape(str(text))


_SVG_WIDTH = re.compile(rb'<svg[^>]*?\swidth="([0-9.]+)pt"')


def figure(image: bytes, caption: str, alt: str = "") -> str:
    """A figure (SVG, or PNG) with its caption, as an ``<img>`` with a base64 ``data:`` URI.

    Why an ``<img>`` and not inline ``<svg>``: an image is a document of its own, so a
    figure's ids and style sheet cannot clash with the page's or another figure's, and a
    browser fetches nothing an SVG image might name (no scripts, no external files). An
    SVG's box is as wide as the figure (1 pt = 4/3 px), so its caption wraps under it
    and two single-panel figures stand side by side.
    """
    if image[:8] == b"\x89PNG\r\n\x1a\n":
        mime, style = "image/png", ""
    elif b"<svg" in image[:1000]:
        width = _SVG_WIDTH.search(image[:2000])
        mime = "image/svg+xml"
        style = f' style="max-width:{float(width[1]) * 4 / 3:.0f}px"' if width else ""
    else:
        raise ValueError("a figure must be PNG or SVG bytes")
    data = base64.b64encode(image).decode()
    return (f'<figure{style}><img alt="{esc(alt or caption)}" src="data:{mime};base64,{data}">'
            f"<figcaption>{esc(caption)}</figcaption></figure>")


def table(frame: pd.DataFrame, columns: list[str] | None = None) -> str:
    columns = columns or list(frame.columns)
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{esc(fmt(v))}</td>" for v in row) + "</tr>"
                   for row in frame[columns].itertuples(index=False))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def heading(title: str, anchor: str) -> str:
    """An ``<h2>`` with an id, so the table of contents can link to it."""
    return f'<h2 id="{esc(anchor)}">{esc(title)}</h2>'


def contents(body: str) -> str:
    """The table of contents: a link to every ``<h2 id=...>`` of ``body``, in order."""
    links = "".join(f'<li><a href="#{anchor}">{title}</a></li>'
                    for anchor, title in re.findall(r'<h2 id="([^"]+)">(.*?)</h2>', body))
    return f'<nav id="contents"><strong>Contents</strong><ol>{links}</ol></nav>' if links else ""


def sortable_table(frame: pd.DataFrame, anchor: str, blank_missing: bool = True) -> str:
    """A table whose columns sort by a click on their header (``SORT_SCRIPT``), in a
    scrolling box with a sticky header; missing values blank (``blank_missing``)."""
    def cell(v):
        missing = v is None or (not isinstance(v, (str, bytes, dict, list)) and bool(pd.isna(v)))
        return "" if missing and blank_missing else esc(fmt(v))

    head = "".join(f"<th>{esc(c)}</th>" for c in frame.columns)
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in row) + "</tr>"
                   for row in frame.itertuples(index=False))
    return (f'<div class="scroll"><table class="sortable" id="{esc(anchor)}"><thead><tr>{head}'
            f"</tr></thead><tbody>{body}</tbody></table></div>")


def warnings(lines: list[str]) -> str:
    return "".join(f'<div class="warn">{esc(line)}</div>' for line in lines)


def page(title: str, body: str) -> str:
    """The whole page; the sorting script only when a table is sortable."""
    script = f"<script>{SORT_SCRIPT}</script>" if 'class="sortable"' in body else ""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{esc(title)}</title><style>{STYLE}</style></head>\n<body>{body}{script}"
            "</body></html>\n")


def markdown_table(frame: pd.DataFrame, columns: list[str] | None = None) -> list[str]:
    """A Markdown table; a ``|`` inside a cell (``|G|²``) is escaped, not a column's end."""
    columns = columns or list(frame.columns)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(fmt(v).replace("|", "\\|") for v in row) + " |"
              for row in frame[columns].itertuples(index=False)]
    return lines
