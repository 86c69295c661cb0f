"""The VS Code extension in a real VS Code: code-server (VS Code's own server and web
workbench) with the .vsix built from editors/vscode installed, `mem lsp` from this venv on a
real store holding the demo's memories and three pieces of evidence on one line, driven by
headless Chromium through Playwright. What is checked is what a person sees: the lens above
the cited line, and the hover as rendered (the memory text, the citation, no heading, one
blockquote per piece of evidence with its citation after it). Screenshots (lens.png,
hover.png) are kept under the test's tmp directory and copied to ``$POIMEN_ARTIFACTS``.

editors/ci-setup.sh installs code-server, Node.js 24 for it and Debian's chromium."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .editors import missing, require_program
from .serving import free_port

ROOT = Path(__file__).resolve().parent.parent
EXT = ROOT / "editors" / "vscode"
FILE = "src/kong/buffer.rs"
LINE = 42
ARTIFACTS_ENV = "POIMEN_ARTIFACTS"

# Two more pieces of evidence on the demo's line 42, under a memory of their own, written
# with every piece of Markdown a transcript can hold: the hover must show them as typed.
HOSTILE = [
    {"type": "node", "id": "h1", "level": "L1", "query_id": "markup", "text": "Markup in memories is shown as typed: # --- <b>bold</b> `code` *star*.", "created_at": "2026-08-21T08:00:00Z"},
    {"type": "node", "id": "h2", "level": "L0", "query_id": "markup", "text": "User: why is the limit `16 * MB`?\n# not a heading\n---\nAgent: <script>alert(1)</script> stays text.\n1. not a list\n===", "parents": ["h1"], "anchors": [{"file": FILE, "line": LINE}], "created_at": "2026-08-21T07:00:00Z"},
    {"type": "node", "id": "h3", "level": "L0", "query_id": "markup", "text": "> not a quote\n- not a bullet\nVerified: *stars* and _underscores_ stay as typed.", "parents": ["h1"], "anchors": [{"file": FILE, "line": LINE}], "created_at": "2026-08-21T07:30:00Z"},
]  # fmt: skip

# The visible hovers of the workbench.
VISIBLE_HOVERS = (
    "[...document.querySelectorAll('.monaco-hover')]"
    ".filter(e => e.offsetParent !== null && e.innerText.trim())"
)
# The rendered hover of poimen-memory, as its DOM is: headings, blockquotes, paragraphs (and
# whether each is inside a blockquote), elements that must never be there.
HOVER_DOM = f"""() => {{
    const h = {VISIBLE_HOVERS}.find(e => e.innerText.includes('poimen-memory'));
    if (!h) return null;
    const md = h.querySelector('.rendered-markdown') || h;
    const all = s => [...md.querySelectorAll(s)];
    return {{
        text: md.innerText,
        headings: all('h1, h2, h3, h4, h5, h6').map(e => e.innerText),
        blockquotes: all('blockquote').map(e => e.innerText),
        paragraphs: all('p').map(e => ({{text: e.innerText, quoted: !!e.closest('blockquote')}})),
        rules: all('hr').length,
        raw: all('script, b, img, iframe, li, pre').map(e => e.tagName),
    }};
}}"""
# The box of line ``n`` of the editor (its number in the gutter, its text), when rendered.
LINE_BOX = """(n) => {
    const ed = document.querySelector('.editor-instance .monaco-editor');
    if (!ed) return null;
    const num = [...ed.querySelectorAll('.margin-view-overlays .line-numbers')]
        .find(e => e.textContent.trim() === String(n));
    if (!num) return null;
    const top = num.getBoundingClientRect().top;
    const line = [...ed.querySelectorAll('.view-lines .view-line')]
        .find(l => Math.abs(l.getBoundingClientRect().top - top) < 3);
    if (!line) return null;
    const r = (line.querySelector('span span') || line).getBoundingClientRect();
    return {x: r.left, y: r.top, w: r.width, h: r.height, text: line.textContent};
}"""
LENSES = """() => [...document.querySelectorAll('.editor-instance .codelens-decoration')]
    .map(e => { const r = e.getBoundingClientRect(); return {text: e.textContent, top: r.top, bottom: r.bottom}; })"""


@dataclass
class Seen:
    """What the workbench showed."""

    line_top: float  # where line 42's text is on screen
    line_height: float
    lenses: list[dict[str, Any]]
    hover: dict[str, Any] | None
    shots: Path


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (read from /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """code-server and everything it started (extension host, `mem lsp`): TERM, then KILL."""
    pids = [proc.pid, *_descendants(proc.pid)]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in pids):
        proc.poll()
        time.sleep(0.2)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait(timeout=10)


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 300) -> str:
    done = subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, f"{' '.join(cmd)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _vsix(work: Path, env: dict[str, str]) -> Path:
    """The .vsix built from a copy of editors/vscode (`npm ci && npm run package`)."""
    src = work / "ext"
    shutil.copytree(
        EXT, src, ignore=shutil.ignore_patterns("node_modules", "out", "dist", "*.vsix")
    )
    ci = ["npm", "ci", "--no-audit", "--no-fund", "--prefer-offline", "--fetch-retries=1"]
    done = subprocess.run(
        ci, cwd=src, env=env, capture_output=True, text=True, timeout=600, check=False,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    if done.returncode != 0 and re.search(
        r"ENOTFOUND|EAI_AGAIN|ENETUNREACH|ECONNREFUSED|ETIMEDOUT", done.stdout + done.stderr
    ):
        missing("the npm registry cannot be reached and npm's cache lacks the dependencies")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    _run(["npm", "run", "package"], src, env)
    return src / "poimen-memory.vsix"


def _programs() -> tuple[str, str]:
    """code-server and chromium, and Playwright importable; else skip (or fail) naming it."""
    code_server = require_program("code-server")
    chromium = require_program("chromium")
    require_program("npm")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing("playwright for Python is not installed (pip install -e '.[test]')")
    return code_server, chromium


def _demo(work: Path, dsn: str, env: dict[str, str]) -> Path:
    """`mem demo` into the test's store, plus the markup-laden evidence on line 42."""
    mem = [sys.executable, "-m", "poimen_memory.cli"]
    out = _run([*mem, "demo", "--dir", str(work / "demo"), "--dsn", dsn], work, env)
    found = re.search(r"Sample repository: *(\S+)", out)
    assert found is not None, out
    demo = Path(found[1])
    records = work / "markup.jsonl"
    records.write_text("".join(json.dumps(r) + "\n" for r in HOSTILE), "utf-8")
    _run(
        [*mem, "ingest", str(records), "--repo", str(demo), "--dsn", dsn, "--project", "demo"],
        work,
        env,
    )
    return demo


def _code_server(
    work: Path, code_server: str, vsix: Path, demo: Path, dsn: str, env: dict[str, str]
) -> tuple[subprocess.Popen[bytes], str]:
    """code-server on a free port with the extension installed and its settings written."""
    data, extensions = work / "user-data", work / "extensions"
    (data / "User").mkdir(parents=True)
    (data / "Machine").mkdir()
    ui = {
        "workbench.startupEditor": "none",
        "security.workspace.trust.enabled": False,
        "telemetry.telemetryLevel": "off",
        "extensions.autoUpdate": False,
        "extensions.autoCheckUpdates": False,
        "workbench.tips.enabled": False,
        "chat.disableAIFeatures": True,
        "editor.hover.delay": 150,
        "window.restoreWindows": "none",
    }
    (data / "User" / "settings.json").write_text(json.dumps(ui), "utf-8")
    # server.* are machine-overridable: a remote window (code-server is one) reads them from
    # the remote machine's settings, never from the browser's user settings.
    mem = str(Path(sys.executable).parent / "mem")
    machine = {
        "poimenMemory.server.command": mem,
        "poimenMemory.server.args": ["lsp"],
        "poimenMemory.project": "demo",
        "poimenMemory.dsn": dsn,
    }
    (data / "Machine" / "settings.json").write_text(json.dumps(machine), "utf-8")
    dirs = ["--user-data-dir", str(data), "--extensions-dir", str(extensions)]
    _run([code_server, *dirs, "--install-extension", str(vsix), "--force"], work, env)
    port = free_port()
    with (work / "code-server.log").open("wb") as log:
        proc = subprocess.Popen(
            [code_server, "--auth", "none", "--bind-addr", f"127.0.0.1:{port}",
             "--disable-telemetry", "--disable-update-check", "--disable-workspace-trust",
             *dirs, str(demo)],
            cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"code-server exited:\n{(work / 'code-server.log').read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2):
                return proc, url
        except OSError:
            time.sleep(0.5)
    _stop(proc)
    pytest.fail("code-server did not answer on /healthz within 60 s")


def _drive(url: str, demo: Path, chromium: str, shots: Path) -> Seen:
    """Open the file in the workbench, go to the line, wait for its lens, hover it."""
    from playwright.sync_api import Error, sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=chromium,
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"{url}/?folder={demo}", wait_until="domcontentloaded")
            page.wait_for_selector(".monaco-workbench .statusbar", timeout=120_000)
            name = FILE.rsplit("/", 1)[1]
            for _ in range(5):  # Quick Open (Ctrl+P); the first tries can come too early
                page.keyboard.press("Escape")
                page.click(".monaco-workbench .part.editor", position={"x": 200, "y": 200})
                page.keyboard.press("Control+p")
                try:
                    page.wait_for_selector(".quick-input-widget input", timeout=10_000)
                    page.keyboard.type(FILE, delay=20)
                    page.wait_for_selector(
                        f'.quick-input-list .monaco-list-row[aria-label*="{name}"]', timeout=10_000
                    )
                    page.keyboard.press("Enter")
                    page.wait_for_selector(f'.tab[aria-label*="{name}"]', timeout=15_000)
                    break
                except Error:
                    time.sleep(1)
            else:
                page.screenshot(path=shots / "open-failed.png")
                pytest.fail(f"could not open {FILE} in the workbench (open-failed.png)")
            for _ in range(5):  # Go to Line (Ctrl+G): line 42 rendered, mid-screen
                page.keyboard.press("Escape")
                page.keyboard.press("Control+g")
                try:
                    page.wait_for_selector(".quick-input-widget input", timeout=10_000)
                    page.keyboard.type(str(LINE), delay=20)
                    page.wait_for_selector(
                        f'.quick-input-list .monaco-list-row:has-text("line {LINE}")',
                        timeout=10_000,
                    )
                    page.keyboard.press("Enter")
                    page.wait_for_selector(
                        f'.statusbar-item:has-text("Ln {LINE}, Col 1")', timeout=10_000
                    )
                    break
                except Error:
                    time.sleep(1)
            else:
                page.screenshot(path=shots / "goto-failed.png")
                pytest.fail(f"could not go to line {LINE} (goto-failed.png)")

            lenses: list[dict[str, Any]] = []
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and not any("memor" in x["text"] for x in lenses):
                time.sleep(1)
                lenses = page.evaluate(LENSES)
            page.wait_for_timeout(500)
            lenses = page.evaluate(LENSES)
            box = page.evaluate(LINE_BOX, LINE)
            assert box is not None, f"line {LINE} is not rendered"
            page.screenshot(path=shots / "lens.png")

            hover = None
            deadline = time.monotonic() + 60
            while hover is None and time.monotonic() < deadline:
                box = page.evaluate(LINE_BOX, LINE)
                x, y = box["x"] + min(40, box["w"] / 2), box["y"] + box["h"] / 2
                page.mouse.move(5, 5)
                page.mouse.move(x - 3, y)
                page.mouse.move(x, y, steps=4)
                try:
                    page.wait_for_function(
                        f"() => {VISIBLE_HOVERS}.some(e => e.innerText.includes('poimen-memory'))",
                        timeout=8_000,
                    )
                except Error:
                    continue
                page.wait_for_timeout(500)  # let it settle at its full size
                hover = page.evaluate(HOVER_DOM)
            page.screenshot(path=shots / ("hover.png" if hover else "hover-failed.png"))
            return Seen(box["y"], box["h"], lenses, hover, shots)
        finally:
            browser.close()


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory, store_dsn: str) -> Iterator[Seen]:
    """The workbench on the demo repository, looked at once for the tests below."""
    code_server, chromium = _programs()
    work = tmp_path_factory.mktemp("vscode-real")
    home = work / "home"
    home.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("POIMEN_", "XDG_", "VSCODE_")) or k == "POIMEN_REQUIRE_EDITORS"
    }
    # A home of its own (code-server's and mem's files), but npm's cache of the real one.
    if not any(k.lower() == "npm_config_cache" for k in env):
        env["NPM_CONFIG_CACHE"] = str(Path.home() / ".npm")
    env.update(HOME=str(home), NPM_CONFIG_UPDATE_NOTIFIER="false")
    vsix = _vsix(work, env)
    demo = _demo(work, store_dsn, env)
    proc, url = _code_server(work, code_server, vsix, demo, store_dsn, env)
    shots = work / "shots"
    shots.mkdir()
    try:
        yield _drive(url, demo, chromium, shots)
    finally:
        _stop(proc)
        artifacts = os.environ.get(ARTIFACTS_ENV)
        if artifacts:
            target = Path(artifacts) / "vscode-real"
            target.mkdir(parents=True, exist_ok=True)
            for shot in shots.glob("*.png"):
                shutil.copy2(shot, target / shot.name)
            shutil.copy2(work / "code-server.log", target / "code-server.log")


@pytest.mark.slow
def test_lens_above_the_cited_line(seen: Seen) -> None:
    assert (seen.shots / "lens.png").stat().st_size > 0
    above = [x for x in seen.lenses if "memor" in x["text"]]
    assert above, f"no poimen-memory lens: {seen.lenses}"
    # The lens right above line 42: its box ends where the line begins.
    nearest = min(above, key=lambda x: abs(seen.line_top - x["bottom"]))
    assert nearest["bottom"] <= seen.line_top + 1, (nearest, seen.line_top)
    assert seen.line_top - nearest["bottom"] < seen.line_height, (nearest, seen.line_top)
    # Three memories on the line (the demo's and the two below), by Alice, on her commit.
    assert nearest["text"] == "3 memories · Alice · Increase buffer", nearest


@pytest.mark.slow
def test_hover_shows_memories_and_citations_as_meant(seen: Seen) -> None:
    hover = seen.hover
    assert hover is not None, "no poimen-memory hover on line 42 (hover-failed.png)"
    assert (seen.shots / "hover.png").stat().st_size > 0
    assert hover["headings"] == [], hover
    assert hover["raw"] == [], hover  # no HTML, list or code block made of the texts
    paragraphs = [p["text"] for p in hover["paragraphs"] if not p["quoted"]]
    assert paragraphs[0] == "poimen-memory · 3 memories"
    # L2, then each L1, each a paragraph of its own, in full.
    assert paragraphs[1] == (
        "L2 · Kong gateway: request bodies are buffered in memory up to 16MB and streamed "
        "beyond that."
    )
    assert set(paragraphs[2:4]) == {
        "L1 · Kong's body buffer was raised from 8MB to 16MB so that 16MB uploads pass.",
        "L1 · Markup in memories is shown as typed: # --- <b>bold</b> `code` *star*.",
    }
    # One blockquote per piece of evidence, newest first, each its text as typed.
    quotes = hover["blockquotes"]
    assert len(quotes) == 3, quotes
    assert quotes[0].split("\n") == [
        "> not a quote",
        "- not a bullet",
        "Verified: *stars* and _underscores_ stay as typed.",
    ]
    assert quotes[1].split("\n") == [
        "User: why is the limit `16 * MB`?",
        "# not a heading",
        "---",
        "Agent: <script>alert(1)</script> stays text.",
        "1. not a list",
        "===",
    ]
    assert quotes[2].startswith("User: uploads over 8MB fail with a 413 from Kong.\n")
    # Each citation follows its evidence, outside the blockquote.
    citations = [p for p in paragraphs if p.endswith(f"· {FILE}:{LINE}")]
    assert len(citations) == 3, paragraphs
    for citation in citations:
        assert re.fullmatch(
            rf"[0-9a-f]{{7}} Increase buffer — Alice Smith, 2026-08-06 · {FILE}:{LINE}", citation
        ), citation
    assert not any("Increase buffer" in q for q in quotes)
    assert hover["rules"] == 3
