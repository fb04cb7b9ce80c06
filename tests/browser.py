"""A real headless Chromium for tests of the HTML report (Debian's ``chromium`` in CI).

``run_probe`` opens a page from disk with no network (every host resolves nowhere), runs
``probe`` (JavaScript) once the page has loaded, and returns the JSON the probe left in
the body's ``data-probe`` attribute, read from ``--dump-dom``: positions, texts, what a
click did, whatever the test asks the real browser.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.system_tools import program


def chromium() -> str:
    """The browser's path; without one the test skips, or fails in CI (tests/system_tools.py)."""
    return program("chromium", "chromium-browser", what="headless Chromium (`chromium` on PATH)",
                   how="apt-get install chromium (Debian's package)")


def dump_dom(page: Path, profile: Path) -> str:
    """The DOM of ``page`` after it loaded, as Chromium serialises it."""
    out = subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", "--host-resolver-rules=MAP * ~NOTFOUND",
         "--window-size=1280,1000", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def run_probe(html: str, probe: str, folder: Path) -> dict:
    """Run ``probe`` (a JavaScript expression giving a JSON-able value) in ``html`` after
    its load event; the page is written to ``folder``."""
    script = ("<script>window.addEventListener('load', function () { document.body.setAttribute("
              f"'data-probe', JSON.stringify(({probe}))); }});</script></body>")
    page = folder / "probe.html"
    page.write_text(html.replace("</body>", script))
    dom = dump_dom(page, folder / "profile")
    start = dom.index('data-probe="') + len('data-probe="')
    raw = dom[start:dom.index('"', start)]
    for entity, char in (("&quot;", '"'), ("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&")):
        raw = raw.replace(entity, char)
    return json.loads(raw)
