"""A report section defined once, rendered to HTML, Markdown and the console.

Why: every section of report.html had a twin in summary.md written by hand (and a third
shape on the console), so a new section touched several files and the twins drifted. Now
a section is one ``Section``: an id, a title and content blocks (``Paragraph``,
``Notes``, ``Warnings``, ``Bullets``, ``Table``, ``SortableTable``, ``Figures``,
``Subheading``, ``Highlights``); how each block looks in each medium is written once,
here. A section function takes the typed analysis and returns a ``Section`` or ``None``
(nothing to show). A block or a section may be limited to some media (``media``): the
figures are embedded in report.html only, summary.md names them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from batchscale.analysis.pages import html as h
from batchscale.analysis.pages.console_tables import fit_table

HTML, MARKDOWN, CONSOLE = "html", "markdown", "console"
ALL = (HTML, MARKDOWN, CONSOLE)
PAGES = (HTML, MARKDOWN)  # report.html and summary.md, not the console


@dataclass(frozen=True)
class Code:
    """Inline code inside a list item (a file name, a location)."""

    text: str


@dataclass(frozen=True)
class Paragraph:
    """A paragraph; ``note``: set in the smaller grey type of report.html's notes."""

    text: str
    note: bool = False
    media: tuple[str, ...] = ALL


@dataclass(frozen=True)
class Notes:
    """Caveats, one a line: notes on the page, a bulleted list in Markdown."""

    lines: Sequence[str]
    media: tuple[str, ...] = ALL


@dataclass(frozen=True)
class Warnings:
    """What a reader must not miss: the page's warning boxes, bold in Markdown: a bulleted
    list, or (``paragraph``) a bold paragraph each, for a section's one headline."""

    lines: Sequence[str]
    media: tuple[str, ...] = ALL
    paragraph: bool = False


@dataclass(frozen=True)
class Bullets:
    """A bulleted list; each item a sequence of text and ``Code`` segments."""

    items: Sequence[Sequence[str | Code]]
    media: tuple[str, ...] = ALL


@dataclass(frozen=True)
class Table:
    """A table of ``frame`` (``columns``: those shown, in order; default all).
    ``leave_out_first``: the columns a console narrower than the table leaves out first
    (``console_tables.fit_table``)."""

    frame: pd.DataFrame
    columns: Sequence[str] | None = None
    media: tuple[str, ...] = ALL
    leave_out_first: Sequence[str] = ()


@dataclass(frozen=True)
class SortableTable:
    """A long table: on the page sortable by a click and folded away past ``open_up_to``
    rows; elsewhere one line naming the CSV file that holds the same rows."""

    frame: pd.DataFrame
    anchor: str
    file: str
    open_up_to: int
    media: tuple[str, ...] = ALL


@dataclass(frozen=True)
class Figures:
    """Figures as (name, SVG or PNG, caption): embedded on the page, named elsewhere
    (``page``: the file that embeds them)."""

    items: Sequence[tuple[str, bytes, str]]
    page: str = "report.html"
    media: tuple[str, ...] = ALL


@dataclass(frozen=True)
class Subheading:
    text: str
    media: tuple[str, ...] = ALL


@dataclass(frozen=True)
class Highlights:
    """The answer box: a heading and (label, text) items, above everything else."""

    heading: str
    items: Sequence[tuple[str, str]]
    media: tuple[str, ...] = ALL


Block = Paragraph | Notes | Warnings | Bullets | Table | SortableTable | Figures | Subheading | Highlights


@dataclass(frozen=True)
class Section:
    """One section: ``id`` (the page's anchor; the contents link to it), ``title`` (None:
    a section without a heading), its ``blocks`` in order, the ``media`` it appears in and
    those that show its heading (``heading_media``)."""

    id: str | None
    title: str | None
    blocks: Sequence[Block]
    media: tuple[str, ...] = ALL
    heading_media: tuple[str, ...] = ALL


def _shown(item, medium: str) -> bool:
    return item is not None and medium in item.media


def _segments_html(item: Sequence[str | Code]) -> str:
    return "".join(f"<code>{h.esc(s.text)}</code>" if isinstance(s, Code) else h.esc(s) for s in item)


def _segments_text(item: Sequence[str | Code], code: str = "`") -> str:
    return "".join(f"{code}{s.text}{code}" if isinstance(s, Code) else s for s in item)


def _block_html(block: Block) -> list[str]:
    if isinstance(block, Paragraph):
        return [f'<p class="note">{h.esc(block.text)}</p>' if block.note
                else f"<p>{h.esc(block.text)}</p>"]
    if isinstance(block, Notes):
        return [f'<p class="note">{h.esc(n)}</p>' for n in block.lines]
    if isinstance(block, Warnings):
        return [h.warnings(list(block.lines))] if block.lines else []
    if isinstance(block, Bullets):
        return ["<ul>", *(f"<li>{_segments_html(i)}</li>" for i in block.items), "</ul>"]
    if isinstance(block, Table):
        return [h.table(block.frame, list(block.columns) if block.columns else None)]
    if isinstance(block, SortableTable):
        count = len(block.frame)
        opened = " open" if count <= block.open_up_to else ""
        return [f"<details{opened}><summary>the {count} trials</summary>"
                f"{h.sortable_table(block.frame, block.anchor)}</details>"]
    if isinstance(block, Figures):
        return [h.figure(image, caption, alt=name) for name, image, caption in block.items]
    if isinstance(block, Subheading):
        return [f"<h3>{h.esc(block.text)}</h3>"]
    items = "".join(f"<li><strong>{h.esc(label)}</strong>: {h.esc(text)}</li>"
                    for label, text in block.items)
    return [f'<div class="answer" id="answer"><p>{h.esc(block.heading)}:</p><ul>{items}</ul></div>']


def _block_markdown(block: Block) -> list[str]:
    if isinstance(block, Paragraph):
        return [block.text, ""]
    if isinstance(block, Notes):
        return [*(f"- {n}" for n in block.lines), *([""] if block.lines else [])]
    if isinstance(block, Warnings):
        if block.paragraph:
            return [line for n in block.lines for line in (f"**{n}**", "")]
        return [*(f"- **{n}**" for n in block.lines), *([""] if block.lines else [])]
    if isinstance(block, Bullets):
        return [*(f"- {_segments_text(i)}" for i in block.items), ""]
    if isinstance(block, Table):
        return [*h.markdown_table(block.frame, list(block.columns) if block.columns else None), ""]
    if isinstance(block, SortableTable):
        return [f"Every trial ({len(block.frame)}): {block.file} (a sortable table in report.html).", ""]
    if isinstance(block, Figures):
        names = ", ".join(name for name, _i, _c in block.items)
        return [f"Figures: {names} (embedded in {block.page}).", ""]
    if isinstance(block, Subheading):
        return [f"### {block.text}", ""]
    return [f"**{block.heading}:**", "", *(f"- **{label}**: {text}" for label, text in block.items), ""]


def console_table(frame: pd.DataFrame, columns: Sequence[str] | None = None,
                  width: int | None = None, leave_out_first: Sequence[str] = (),
                  more: str = "") -> list[str]:
    """A plain-text table, right-aligned, cells as on the page (``html.fmt``), fitted to
    ``width`` characters (None: every column, one header line; ``console_tables``)."""
    columns = list(columns or frame.columns)
    rows = [[h.fmt(v) for v in r] for r in frame[columns].itertuples(index=False)]
    return fit_table(columns, rows, width, leave_out_first, more)


def _block_console(block: Block, width: int | None = None, more: str = "") -> list[str]:
    if isinstance(block, Paragraph):
        return [block.text]
    if isinstance(block, (Notes, Warnings)):
        return [f"note: {n}" for n in block.lines]
    if isinstance(block, Bullets):
        return [f"  {_segments_text(i, '')}" for i in block.items]
    if isinstance(block, Table):
        return console_table(block.frame, block.columns, width, block.leave_out_first, more)
    if isinstance(block, SortableTable):
        return [f"every trial ({len(block.frame)}): {block.file}"]
    if isinstance(block, Figures):
        return ["figures: " + ", ".join(name for name, _i, _c in block.items)]
    if isinstance(block, Subheading):
        return [block.text]
    return [f"{block.heading}:", *(f"  {label}: {text}" for label, text in block.items)]


def render_html(section: Section | None) -> list[str]:
    """The section's pieces of report.html (nothing for None or a section not shown there)."""
    if not _shown(section, HTML):
        return []
    head = ([h.heading(section.title, section.id) if section.id else f"<h2>{h.esc(section.title)}</h2>"]
            if section.title and HTML in section.heading_media else [])
    return [*head, *(p for b in section.blocks if _shown(b, HTML) for p in _block_html(b))]


def render_markdown(section: Section | None) -> list[str]:
    """The section's lines of summary.md, each block followed by a blank line."""
    if not _shown(section, MARKDOWN):
        return []
    head = [f"## {section.title}", ""] if section.title and MARKDOWN in section.heading_media else []
    return [*head, *(line for b in section.blocks if _shown(b, MARKDOWN) for line in _block_markdown(b))]


def render_console(section: Section | None, width: int | None = None, more: str = "") -> list[str]:
    """The section's lines for the terminal (its title, if any, on the first); its tables
    fitted to ``width`` characters (None: no limit), ``more`` appended to the line naming
    the columns a table left out (how to see them)."""
    if not _shown(section, CONSOLE):
        return []
    head = [section.title] if section.title and CONSOLE in section.heading_media else []
    return [*head, *(line for b in section.blocks if _shown(b, CONSOLE)
                     for line in _block_console(b, width, more))]
