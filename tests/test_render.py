"""The hover and the text renderings, read the way their readers read them: the hover's
Markdown parsed by markdown-it in CommonMark mode (what VS Code renders hovers with), the
plain hover and ``render_text`` as the lines a person or a model gets."""

from __future__ import annotations

import dataclasses
import html
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token

from poimen_memory.domain import (
    CommitInfo,
    CommitSha,
    Level,
    MemoryNode,
    ProjectId,
    QueryId,
    RepoId,
    RunId,
)
from poimen_memory.lookup import Citation, LookupResult, Memory
from poimen_memory.lookup.results import Earlier, Landed
from poimen_memory.render import HOVER_SHOWN, TEXT_LIMIT, render_hover, render_text

REPO = RepoId("github.com/org/kong")
PROJECT = ProjectId("render")
WHEN = datetime(2026, 8, 6, 12, 0, tzinfo=UTC)

# Every construct CommonMark could make of a memory's text or a commit's summary.
HOSTILE = [
    "# not a heading",
    "---",
    "> not a quote",
    "* not a list",
    "<script>alert(1)</script>",
    "code in `backticks` and ``two``",
    "1. not an ordered list",
    "- not a bullet",
    "===",
    "    four spaces: not a code block",
    "[a link](http://example.org) and ![an image](x.png) and <http://example.org>",
    "2) not a list either",
    "&lt; an entity, | a | table |, ~~struck~~, _under_ *star* \\ backslash",
    "+ nor this",
    "```",
    "trailing backslash \\",
]


def sha(n: int) -> CommitSha:
    return CommitSha(f"{n:x}".rjust(40, "a"))


def commit(n: int, summary: str, author: str = "Alice Smith") -> CommitInfo:
    return CommitInfo(
        REPO, sha(n), f"{summary}\n\nbody", author, "alice@example.org", WHEN.replace(day=n)
    )


def node(level: Level, text: str, minute: int) -> MemoryNode:
    return MemoryNode(
        level=level,
        project=PROJECT,
        query_id=None if level is Level.L2 else QueryId("q"),
        run_id=RunId("r"),
        t=0,
        text=text,
        created_at=WHEN.replace(minute=minute),
    )


def cited(path: str, line: int, c: CommitInfo) -> Citation:
    return Citation(REPO, path, line, line, c)


@dataclass
class Stack:
    """What a result holds, to compare with what was rendered."""

    l2: str
    l1: str
    evidence: list[tuple[str, CommitInfo, str]] = field(default_factory=list)

    def result(self, landed: Landed | None = None, earlier: Earlier | None = None) -> LookupResult:
        cites = [cited(path, 42, c) for _, c, path in self.evidence]
        l0s = tuple(
            Memory(node(Level.L0, text, i), cite, (cite,), landed=landed, earlier=earlier)
            for i, ((text, _, _), cite) in enumerate(zip(self.evidence, cites, strict=True))
        )
        uppers = (
            Memory(node(Level.L1, self.l1, 30), cites[0]),
            Memory(node(Level.L2, self.l2, 40), cites[0]),
        )
        return LookupResult(REPO, l0s + uppers)


def hostile_stack() -> Stack:
    return Stack(
        l2="Kong gateway: bodies buffered up to 16MB\n# and streamed <b>beyond</b>\n---",
        l1="* raised from 8MB to 16MB\n===\n1. so that uploads pass",
        evidence=[
            ("\n".join(HOSTILE[:6]), commit(1, "# Increase buffer <script>"), "src/kong/buffer.rs"),
            ("\n".join(HOSTILE[6:11]), commit(2, "--- `fix` *it* > now", "Bob <b>"), "src/a`b.rs"),
            ("\n".join(HOSTILE[11:]), commit(3, "1. === - + [x](y)"), "src/kong/handler.rs"),
        ],
    )


# -- reading the rendered Markdown ------------------------------------------------------------


@dataclass
class Block:
    """A top-level block of the rendered hover: its tag and its text as a reader sees it
    (hard line breaks as newlines), with the blocks inside it."""

    tag: str
    text: str = ""
    inner: list[Block] = field(default_factory=list)


def _inline_text(token: Token) -> str:
    out = []
    for child in token.children or []:
        if child.type in {"text", "code_inline"}:
            out.append(child.content)
        elif child.type in {"hardbreak", "softbreak"}:
            out.append("\n")
    return "".join(out)


def blocks_of(markdown: str) -> list[Block]:
    """The top-level blocks CommonMark makes of ``markdown``."""
    top: list[Block] = []
    stack: list[Block] = []
    for token in MarkdownIt("commonmark").parse(markdown):
        if token.nesting == 1:
            block = Block(token.tag)
            (stack[-1].inner if stack else top).append(block)
            stack.append(block)
        elif token.nesting == -1:
            stack.pop()
        elif token.type == "inline":
            stack[-1].text += _inline_text(token)
        else:
            (stack[-1].inner if stack else top).append(Block(token.tag, token.content))
    return top


def lines_of(text: str) -> str:
    """A memory's text as the hover shows it: each non-blank line, without its edge blanks."""
    return "\n".join(ln.strip() for ln in text.splitlines() if ln.strip())


def no_markup(rendered: str) -> None:
    """No heading, no raw HTML, no list, no code block, no link or image: the texts stay text."""
    tokens = MarkdownIt("commonmark").parse(rendered)
    kinds = {t.type for t in tokens} | {c.type for t in tokens for c in t.children or []}
    forbidden = {
        "heading_open",
        "html_block",
        "html_inline",
        "bullet_list_open",
        "ordered_list_open",
        "code_block",
        "fence",
        "link_open",
        "image",
    }
    assert not kinds & forbidden, (kinds & forbidden, rendered)
    page = MarkdownIt("commonmark").render(rendered)
    assert not re.search(r"<h\d|<script|<b>|<a |<img|<ul|<ol|<pre", page), page


# -- the hover in Markdown --------------------------------------------------------------------


def test_hover_markdown_structure_with_l2_l1_and_three_evidence() -> None:
    stack = hostile_stack()
    rendered = render_hover(stack.result())
    no_markup(rendered)
    blocks = blocks_of(rendered)
    assert [b.tag for b in blocks] == ["p", "p", "p"] + ["hr", "blockquote", "p"] * 3, rendered
    head, l2, l1 = blocks[:3]
    assert head.text == "poimen-memory · 3 memories"
    # L2 then L1, each its own paragraph, every line of its text kept and shown literally.
    assert l2.text == "L2 · " + lines_of(stack.l2)
    assert l1.text == "L1 · " + lines_of(stack.l1)
    for i, (text, c, path) in enumerate(stack.evidence):
        quote, citation = blocks[4 + 3 * i], blocks[5 + 3 * i]
        # The excerpt is the blockquote's only content, its lines as written ...
        assert [b.tag for b in quote.inner] == ["p"], quote
        assert quote.inner[0].text == lines_of(text)
        # ... and the citation follows it, outside it.
        assert citation.text == (
            f"{c.sha.short()} {c.summary} — {c.author_name}, "
            f"{c.author_date.date().isoformat()} · {path}:42"
        )
    page = MarkdownIt("commonmark").render(rendered)
    assert page.count("<blockquote>") == 3
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def _crowded(evidence: int, uppers: int) -> LookupResult:
    """A line with many memories, in the service's order (newest first): ``evidence`` pieces
    of evidence (evidence i made at minute i) and ``uppers`` L1 memories above them."""
    c = commit(1, "Tune the buffer")
    cite = cited("src/kong/buffer.rs", 42, c)
    l0s = tuple(Memory(node(Level.L0, f"evidence {i}", i), cite) for i in reversed(range(evidence)))
    l1s = tuple(Memory(node(Level.L1, f"learned {i}", i), cite) for i in range(uppers))
    return LookupResult(REPO, l0s + l1s)


def test_a_hover_shows_the_newest_few_and_counts_the_rest() -> None:
    result = _crowded(evidence=11, uppers=9)
    rendered = render_hover(result, limit=HOVER_SHOWN)
    no_markup(rendered)
    blocks = blocks_of(rendered)
    assert blocks[0].text == "poimen-memory · 11 memories"
    shown = [b.inner[0].text for b in blocks if b.tag == "blockquote"]
    assert shown == [f"evidence {i}" for i in range(10, 10 - HOVER_SHOWN, -1)]
    learned = [b.text for b in blocks if b.tag == "p" and b.text.startswith("L1 · ")]
    assert len(learned) == HOVER_SHOWN
    assert blocks[-2].tag == "hr"
    left = 11 - HOVER_SHOWN + 9 - HOVER_SHOWN
    assert blocks[-1].text == f"and {left} more: the code lens or mem why shows every one"
    assert blocks[-1].tag == "p"
    assert "<code>mem why</code>" in MarkdownIt("commonmark").render(rendered)
    plain = render_hover(result, markdown=False, limit=HOVER_SHOWN)
    assert plain.endswith(f"and {left} more: the code lens or `mem why` shows every one\n")
    assert plain.count("evidence ") == HOVER_SHOWN
    # Without a limit (the lens's command, the CLI), every memory and no count.
    whole = render_hover(result)
    assert [b.inner[0].text for b in blocks_of(whole) if b.tag == "blockquote"] == [
        f"evidence {i}" for i in range(10, -1, -1)
    ]
    assert "more:" not in whole
    # Evidence the lookup only counted (a hover reads the newest few): counted here too.
    read = dataclasses.replace(_crowded(evidence=HOVER_SHOWN, uppers=2), evidence_total=61)
    counted = render_hover(read, limit=HOVER_SHOWN)
    assert blocks_of(counted)[0].text == "poimen-memory · 61 memories"
    assert blocks_of(counted)[-1].text.startswith(f"and {61 - HOVER_SHOWN} more: ")
    assert render_hover(read).count("evidence ") == HOVER_SHOWN  # no more than was read
    # At the limit exactly, nothing is left to count.
    assert "more:" not in render_hover(_crowded(HOVER_SHOWN, HOVER_SHOWN), limit=HOVER_SHOWN)


def test_hover_markdown_arrival_lines_follow_the_citation_outside_the_quote() -> None:
    stack = hostile_stack()
    landed = Landed(recorded=sha(7), landed=sha(8), how="squash")
    earlier = Earlier(replaced_by=commit(9, "Rewrite * the line"), depth=1)
    for how, words in (
        (landed, f"recorded on {sha(7).short()}, landed as {sha(8).short()} (squash)"),
        (earlier, f"about an earlier version of this line, replaced by {sha(9).short()} on "),
    ):
        result = stack.result(landed=how) if isinstance(how, Landed) else stack.result(earlier=how)
        rendered = render_hover(result)
        no_markup(rendered)
        blocks = blocks_of(rendered)
        assert [b.tag for b in blocks] == ["p"] * 3 + ["hr", "blockquote", "p", "p"] * 3
        for i in range(3):
            quote, citation, arrived = blocks[4 + 4 * i : 7 + 4 * i]
            assert quote.inner[0].text == lines_of(stack.evidence[i][0])
            assert citation.text.startswith(stack.evidence[i][1].sha.short())
            assert arrived.text.startswith(words), arrived
        tokens = MarkdownIt("commonmark").parse(rendered)
        emphasis = [c for t in tokens for c in t.children or [] if c.type == "em_open"]
        assert len(emphasis) == 3  # the arrival lines, in italics


def test_hover_without_l1_l2_or_citation_is_still_blocks() -> None:
    evidence = Memory(node(Level.L0, "---\n# only evidence", 1), None)
    rendered = render_hover(LookupResult(REPO, (evidence,)))
    no_markup(rendered)
    assert [b.tag for b in blocks_of(rendered)] == ["p", "hr", "blockquote"]


def test_hover_markdown_excerpt_is_cut_and_says_so() -> None:
    long = " ".join(f"word{i}" for i in range(200))
    stack = Stack(l2="L2 " + long, l1="L1 " + long, evidence=[(long, commit(1, "x"), "a.rs")])
    blocks = blocks_of(render_hover(stack.result(), excerpt_length=100))
    assert all(len(b.text) < 120 and b.text.endswith(" …") for b in (blocks[1], blocks[2]))
    assert blocks[4].inner[0].text.endswith(" …")


# Text a memory or a commit could hold: markup characters, line starts and breaks above all.
_TEXT = st.text(
    alphabet=st.sampled_from(list("#->*+=1.)`<>/\\[]()!&;|~_ \tab\n"))
    | st.characters(exclude_categories=["Cs"]),
    min_size=1,
    max_size=60,
).filter(lambda s: s.strip() and "\x00" not in s)


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(_TEXT, min_size=3, max_size=3), summary=_TEXT)
def test_any_text_renders_as_itself_in_its_own_blocks(texts: list[str], summary: str) -> None:
    summary = summary.splitlines()[0] if summary.splitlines() else "x"
    stack = Stack(
        l2=texts[0],
        l1=texts[1],
        evidence=[(texts[2], commit(1, summary or "x"), "src/x.rs")],
    )
    rendered = render_hover(stack.result(), excerpt_length=10_000)
    no_markup(rendered)
    blocks = blocks_of(rendered)
    assert [b.tag for b in blocks] == ["p", "p", "p", "hr", "blockquote", "p"], rendered
    assert blocks[1].text == "L2 · " + lines_of(texts[0])
    assert blocks[2].text == "L1 · " + lines_of(texts[1])
    assert blocks[4].inner[0].text == lines_of(texts[2])
    assert f" {summary or 'x'} — " in blocks[5].text


# -- the hover in plain text ------------------------------------------------------------------


def test_hover_plaintext_is_the_texts_as_written() -> None:
    stack = hostile_stack()
    plain = render_hover(stack.result(), markdown=False)
    paragraphs = plain.rstrip("\n").split("\n\n")
    assert paragraphs[0] == "poimen-memory · 3 memories"
    # L2 and L1 on lines of their own, continuation lines indented.
    assert paragraphs[1].splitlines()[0] == "L2  Kong gateway: bodies buffered up to 16MB"
    assert "\nL1  * raised from 8MB to 16MB\n    ===\n" in paragraphs[1]
    assert len(paragraphs) == 5
    for (text, c, path), para in zip(stack.evidence, paragraphs[2:], strict=True):
        *quoted, citation = para.splitlines()
        assert [ln.strip() for ln in quoted] == lines_of(text).splitlines()
        assert all(ln.startswith("  ") for ln in quoted)
        assert citation.startswith(f"{c.sha.short()} {c.summary} — {c.author_name}, ")
        assert citation.endswith(f" · {path}:42")
    assert plain.count("\\") == "".join(HOSTILE).count("\\")  # nothing escaped
    assert "**" not in plain


# -- render_text: the CLI's text and MCP's text content ---------------------------------------


def test_render_text_carries_whole_texts_and_ready_citations() -> None:
    long_l1 = "Kong's body buffer was raised " + "and explained at length " * 10 + "(end)."
    stack = Stack(
        l2="Kong gateway: request bodies are buffered in memory up to 16MB and streamed beyond.",
        l1=long_l1,
        evidence=[("User: uploads fail.\nAgent: raised it.", commit(1, "Increase buffer"), "b.rs")],
    )
    text = render_text(stack.result())
    assert len(long_l1) > 200
    assert f"L1 · {long_l1}\n" in text  # whole, not the 80-character brief
    assert f"L2 · {stack.l2}\n" in text
    assert "L0 · User: uploads fail.\n     Agent: raised it.\n" in text
    c = stack.evidence[0][1]
    assert f'   b.rs:42 (commit {c.sha.short()}) "Increase buffer" — Alice Smith' in text
    assert "more characters" not in text


def test_render_text_bounds_each_memory_and_says_what_is_left() -> None:
    words = [f"w{i:04d}" for i in range(1000)]  # 5999 characters on one line
    long = " ".join(words)
    stack = Stack(l2="short", l1="short too", evidence=[(long, commit(1, "x"), "a.rs")])
    text = render_text(stack.result())
    first = next(ln for ln in text.splitlines() if ln.startswith("L0 · "))
    shown = first.removeprefix("L0 · ").removesuffix(" …")
    assert len(shown) <= TEXT_LIMIT
    assert long.startswith(shown)
    left = len(long) - len(shown)
    assert (
        f"     … ({left} more characters; the full text is in the JSON form: --json, "
        "or MCP's structured content)\n"
    ) in text
    small = render_text(stack.result(), limit=50)
    head = next(ln for ln in small.splitlines() if ln.startswith("L0 · "))
    kept = head.removeprefix("L0 · ").removesuffix(" …")
    assert 25 <= len(kept) <= 50
    assert f"     … ({len(long) - len(kept)} more characters;" in small


def test_render_text_lists_the_memories_above_and_every_citation() -> None:
    stack = hostile_stack()
    result = stack.result()
    extra = cited("src/other.rs", 7, commit(4, "Other"))
    first = result.memories[0]
    parents = result.memories[3:]
    with_more = Memory(first.node, first.citation, (first.citation, extra), parents)
    text = render_text(LookupResult(REPO, (with_more, *result.memories[1:])))
    assert f"   also src/other.rs:7 (commit {sha(4).short()})" in text
    assert "   ↳ L1 · * raised from 8MB to 16MB" in text
    assert "<script>alert(1)</script>" in text  # plain text: as written
    assert html.escape("<script>") not in text
    assert render_text(LookupResult(REPO, ())) == "no memories found\n"


def test_render_text_shows_whole_a_memory_above_that_is_not_listed() -> None:
    stack = hostile_stack()
    result = stack.result()
    first = result.memories[0]
    above = Memory(node(Level.L1, "Not listed on its own.\nSecond line " + "x" * 100, 50), None)
    alone = Memory(first.node, first.citation, first.citations, (above, *result.memories[3:]))
    text = render_text(LookupResult(REPO, (alone, *result.memories[3:])))
    assert "   ↳ L1 · Not listed on its own.\n          Second line " + "x" * 100 + "\n" in text
    assert "   ↳ L1 · * raised from 8MB to 16MB\n" in text  # listed below: named only
    assert text.count("===") == 1


def test_line_breaks_in_one_line_fields_open_no_block() -> None:
    """A commit summary, an author or a path with a line break in it (git allows a CR in a
    subject and a newline in a path) stays on its line: no list, no heading below it."""
    stack = Stack(
        l2="L2",
        l1="L1",
        evidence=[
            ("one", commit(1, "Fix\r- item", "Alice\u2028# Smith"), "a\n# pwned.py"),
            ("two", commit(2, "Fix\r1. x", "Bob\r\n=== Jones"), "b\r\n- c.py"),
        ],
    )
    rendered = render_hover(stack.result(), 400)
    no_markup(rendered)
    citations = [b for b in blocks_of(rendered) if b.tag == "p" and " — " in b.text]
    assert len(citations) == 2, rendered
    assert "\n" not in citations[0].text
    assert "pwned.py" in citations[0].text
