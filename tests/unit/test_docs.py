"""The README is a front page and every link in the documentation leads somewhere.

README.md stays short (at most 200 lines: what batchscale answers, set-up, the quickstart
output explained, the commands, links); everything else lives in docs/. A link that points
at a moved or renamed file, or at a heading that was reworded, is a dead end for the
reader, so every relative link in the Markdown pages is resolved here: the file (or
folder) must exist and a ``#anchor`` must name a heading of the target page, by GitHub's
slug rules. http(s) links are not fetched (no network in this tier).
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 200
README_TEST_COMMAND = ".venv/bin/python -m pytest"

# The pages whose links are checked: the front page, docs/, and the READMEs beside code.
PAGES = ("README.md", "docs/*.md", "benchmarks/README.md", "manifests/README.md", "images/*/README.md")

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _prose_lines(text: str):
    """(line number, line) outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text (before de-duplication): the rendered text
    lowercased, punctuation dropped except hyphens and underscores, spaces to hyphens."""
    text = _INLINE_CODE.sub(lambda m: m.group(2), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link's text only
    text = re.sub(r"<[^>]+>", "", text)                       # inline HTML tags
    text = re.sub(r"(\*+|(?<!\w)_+|_+(?!\w))", "", text)      # emphasis markers
    kept = "".join(ch for ch in text.lower()
                   if ch in "-_ " or ch.isalnum() or unicodedata.category(ch).startswith("M"))
    return kept.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading's anchor in a Markdown page; a repeated slug gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    out = set()
    for _, line in _prose_lines(text):
        match = _HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def links(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every inline or reference link outside code."""
    found = []
    for number, line in _prose_lines(text):
        prose = _INLINE_CODE.sub("", line)
        found += [(number, m.group(1)) for m in _LINK.finditer(prose)]
        if (ref := _REFERENCE.match(prose)) is not None:
            found.append((number, ref.group(1)))
    return found


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """One line per link of ``page`` that does not resolve: a missing file or folder, a
    target outside ``root``, or an ``#anchor`` that names no heading of its page."""
    problems = []
    text = page.read_text(encoding="utf-8")
    where = page.relative_to(root)
    for number, target in links(text):
        if _SCHEME.match(target) or target.startswith("//"):
            continue  # http(s), mailto: not fetched
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if root.resolve() not in resolved.parents and resolved != root.resolve():
            problems.append(f"{where}:{number}: {target} leaves the repository")
            continue
        if not resolved.exists():
            problems.append(f"{where}:{number}: {target}: no file {path}")
            continue
        if anchor:
            if resolved.is_dir() or resolved.suffix != ".md":
                problems.append(f"{where}:{number}: {target}: an anchor into a non-Markdown target")
            elif anchor not in anchors(resolved.read_text(encoding="utf-8")):
                problems.append(f"{where}:{number}: {target}: no heading #{anchor} in {path or where}")
    return problems


def _pages(root: Path = ROOT) -> list[Path]:
    return sorted({p for pattern in PAGES for p in root.glob(pattern) if p.is_file()})


def test_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines; keep it a front page (at most {README_MAX_LINES}) "
        "and move detail to docs/")


def test_readme_test_command_is_what_ci_runs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert f"\n{README_TEST_COMMAND}\n" in readme, "the README gives the test command on a line of its own"
    assert README_TEST_COMMAND in (line.strip() for line in ci), ".ci/run must run the README's test command"


def test_the_scripts_the_readme_runs_exist():
    """A command the README gives (``.venv/bin/python benchmarks/same_results.py a b``,
    how to check that two runs on one machine agree) names a file of the repository."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    scripts = re.findall(r"\.venv/bin/python ([\w./-]+\.py)\b", readme)
    assert "benchmarks/same_results.py" in scripts
    assert [s for s in scripts if not (ROOT / s).is_file()] == []


def test_docs_exist_and_are_linked_from_the_readme():
    docs = sorted((ROOT / "docs").glob("*.md"))
    assert docs, "docs/ holds the reference pages"
    readme_targets = {t.partition("#")[0] for _, t in links((ROOT / "README.md").read_text(encoding="utf-8"))}
    unlinked = [d.name for d in docs if f"docs/{d.name}" not in readme_targets]
    assert not unlinked, f"docs pages the README does not link: {unlinked}"


def test_every_link_resolves():
    pages = _pages()
    assert ROOT / "README.md" in pages and len(pages) > 5
    problems = [p for page in pages for p in broken_links(page)]
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_github_slugs():
    assert slug("Run on GKE") == "run-on-gke"
    assert slug("What a study is: `name`, goals & S_min (B*)") == "what-a-study-is-name-goals--s_min-b"
    assert slug("The [store](store.md) layout") == "the-store-layout"
    assert slug("Steps — to result, *fast*") == "steps--to-result-fast"
    assert anchors("# A\n## A\n```\n# A\n```\n### A!\n") == {"a", "a-1", "a-2"}


def test_the_checker_reports_a_broken_link_and_anchor(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text("# Page\n\n## Usage\n\n## Usage\n", encoding="utf-8")
    readme = tmp_path / "README.md"
    readme.write_text(
        "# Front\n\n"
        "[ok](docs/page.md) [ok](docs/page.md#usage-1) [ok](#front) [web](https://example.com/x)\n"
        "[gone](docs/missing.md) and [bad anchor](docs/page.md#usage-2)\n"
        "`[in code](nowhere.md)`\n\n```\n[fenced](nowhere.md)\n```\n"
        "[self](#no-such-heading)\n\n[ref]: ../outside.md\n",
        encoding="utf-8")
    problems = broken_links(readme, root=tmp_path)
    assert len(problems) == 4, problems
    assert "README.md:4: docs/missing.md: no file" in problems[0]
    assert "#usage-2" in problems[1] and "no heading" in problems[1]
    assert "#no-such-heading" in problems[2]
    assert "leaves the repository" in problems[3]


def test_readmes_sample_notes_never_contradict_its_sample_table():
    """README's quickstart output is pasted from a real run; its notes must say only what
    its table shows (the checker of tests/unit/test_regimes.py, written from the notes'
    words). The note pasted before 2026-11-26 claimed larger batches would still save steps
    above a table where 4,000 took more steps than 2,048."""
    from tests.unit.test_regimes import contradictions

    text = (ROOT / "README.md").read_text()
    rows = re.findall(r"^ +(\d+) +(\d+) +\d+ ", text, flags=re.M)  # batch size, steps, ...
    sizes, steps = [int(b) for b, _ in rows], [int(s) for _, s in rows]
    assert len(sizes) >= 5 and sizes == sorted(sizes)
    s_min = float(re.search(r"S_min ([\d.]+) \[", text)[1])
    notes = re.findall(r"^note: (.+)$", text, flags=re.M)
    assert notes, "README shows no note line"
    assert [bad for note in notes for bad in contradictions(note, sizes, steps, s_min)] == []
