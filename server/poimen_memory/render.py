"""Text renderings of a lookup result (the JSON form is LookupResult.to_json).

The hover's Markdown is read by CommonMark renderers (VS Code's, and markdown-it in general):
every text from a memory or a commit is escaped so that it can never become a heading, a list,
a rule, a code block, a link or raw HTML, and each block is set apart by a blank line so that
no line is read as a setext heading's underline or as a lazy continuation of a blockquote."""

from __future__ import annotations

import re

from poimen_memory.lookup import HOVER_SHOWN, Citation, LookupResult, Memory

__all__ = [
    "HOVER_SHOWN",
    "TEXT_LIMIT",
    "arrival",
    "cite_line",
    "excerpt",
    "render_hover",
    "render_text",
]

# Characters of one memory's text that render_text shows; the rest is in the JSON form.
TEXT_LIMIT = 2000


def arrival(m: Memory) -> str | None:
    """How a memory came to this line, when not simply through its anchor:
    ``recorded on 3f2a1b0, landed as 9c8d7e6 (squash)`` or ``about an earlier version,
    replaced by 9c8d7e6 on 2026-08-06``."""
    if m.landed is not None:
        how = "rebased or cherry-picked" if m.landed.how == "same-change" else "squash"
        return (
            f"recorded on {m.landed.recorded.short()}, landed as {m.landed.landed.short()} ({how})"
        )
    if m.earlier is not None:
        replaced = m.earlier.replaced_by
        return (
            f"about an earlier version of this line, replaced by {replaced.sha.short()} "
            f"on {replaced.author_date.date().isoformat()}"
        )
    return None


def cite_line(c: Citation) -> str:
    """``src/kong/buffer.rs:42 (commit aa907e8) "Increase buffer" — Alice <a@x>, 2026-08-06``."""
    commit = c.commit
    return (
        f'{c.cite()} "{commit.summary}" — {commit.author_name} <{commit.author_email}>, '
        f"{commit.author_date.date().isoformat()}"
    )


def excerpt(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters at a line or word boundary, marked with …."""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[:limit]
    boundary = max(cut.rfind("\n"), cut.rfind(" "))
    if boundary > limit // 2:
        cut = cut[:boundary]
    return cut.rstrip() + " …"


# -- plain text (the CLI, MCP's text content) -------------------------------------------------


def _bounded(text: str, limit: int) -> tuple[list[str], int]:
    """The non-blank lines of ``text`` within ``limit`` characters, and how many characters
    were left out."""
    whole = text.strip()
    shown = excerpt(whole, limit)
    left = 0 if shown == whole else len(whole) - len(shown.removesuffix(" …"))
    return [ln.rstrip() for ln in shown.splitlines() if ln.strip()], left


def _text(m: Memory, limit: int, indent: str = "") -> list[str]:
    """``L1 · first line`` and the other lines of the text, bounded, the rest counted."""
    lines, left = _bounded(m.node.text, limit)
    out = [f"{indent}{m.node.level.value} · {lines[0]}"]
    under = " " * len(indent) + "     "
    out += [f"{under}{ln}" for ln in lines[1:]]
    if left:
        out.append(
            f"{under}… ({left} more characters; the full text is in the JSON form: "
            "--json, or MCP's structured content)"
        )
    return out


def _memory(m: Memory, limit: int, listed: set[str]) -> list[str]:
    out = _text(m, limit)
    if m.citation is not None:
        out.append(f"   {cite_line(m.citation)}")
    how = arrival(m)
    if how is not None:
        out.append(f"   {how}")
    for extra in m.citations[1:]:
        out.append(f"   also {extra.cite()}")
    for p in m.parents:
        # A memory above that the result lists itself is named here; any other is shown whole.
        if p.node.sha256.value in listed:
            out.append(f"   ↳ {p.node.level.value} · {p.node.brief}")
        else:
            out.extend(_text(p, limit, "   ↳ "))
    return out


def render_text(result: LookupResult, limit: int = TEXT_LIMIT) -> str:
    """Readable text: each memory's whole text (up to ``limit`` characters each, the number
    left out said), then where it is cited, ready to paste, then the memories above it."""
    if not result.memories:
        return "no memories found\n"
    listed = {m.node.sha256.value for m in result.memories}
    out: list[str] = []
    for m in result.memories:
        out.extend(_memory(m, limit, listed))
        out.append("")
    if result.mapped is False:
        out.append("(not mapped through blame: the lines as the memories stored them)")
    if result.truncated:
        more = f"; the next page's cursor: {result.cursor}" if result.cursor else ""
        out.append(f"(truncated: more than shown{more})")
    return "\n".join(out).rstrip() + "\n"


# -- Markdown (CommonMark) --------------------------------------------------------------------

# Escaped wherever they are: emphasis, code, links, images, HTML, entities, tables, strikeout.
_INLINE = frozenset("\\`*_[]<>#|~&")
# A line starting with one of these could open a block (a list item, a setext underline, a
# heading, a blockquote) once the line is at the start of a paragraph or continues one.
_LINE_START = re.compile(r"^(?:(\d{1,9})([.)])|([-+=]))")


def _md_inline(text: str) -> str:
    """``text`` with every character CommonMark could read as markup backslash-escaped."""
    return "".join("\\" + ch if ch in _INLINE else ch for ch in text)


def _md_line(line: str) -> str:
    """One line of text as a line of a paragraph: leading blanks dropped (four would make a
    code block), markup escaped, a block-opening start escaped."""
    escaped = _md_inline(line.strip())
    return _LINE_START.sub(lambda m: f"{m[1]}\\{m[2]}" if m[1] else f"\\{m[3]}", escaped, 1)


def _md_paragraph(text: str, prefix: str = "") -> str:
    """``text``'s lines as one paragraph, each line kept (hard line breaks), every line led by
    ``prefix`` (``"> "`` inside a blockquote)."""
    lines = [_md_line(ln) for ln in text.splitlines() if ln.strip()]
    return "\\\n".join(prefix + ln for ln in lines)


# Line breaks (CommonMark's, and those str.splitlines knows): a one-line field keeps none.
_BREAKS = re.compile("[\r\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")


def _md_one_line(text: str) -> str:
    """A one-line field (a commit's summary, an author, a path) with its line breaks made
    spaces, escaped: a break could start a block (a list, a heading) below it."""
    return _md_inline(_BREAKS.sub(" ", text))


def _md_code(text: str) -> str:
    """``text`` as a code span (line breaks made spaces: a code span does not stop a new
    line from starting a block), fenced by more backticks than any run inside it."""
    text = _BREAKS.sub(" ", text)
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _left_out(result: LookupResult, uppers: int, limit: int | None) -> int:
    """How many memories a hover showing at most ``limit`` of each kind leaves out (the
    evidence not read counted too)."""
    if limit is None:
        return _evidence_count(result) - len(result.evidence)
    shown = min(limit, len(result.evidence))
    return max(0, uppers - limit) + _evidence_count(result) - shown


def _evidence_count(result: LookupResult) -> int:
    """The line's pieces of evidence: all of them, read or not."""
    total = result.evidence_total
    return len(result.evidence) if total is None else max(total, len(result.evidence))


def _uppers(result: LookupResult) -> list[Memory]:
    return sorted(
        (m for m in result.memories if m.node.level.rank > 0), key=lambda m: -m.node.level.rank
    )


def _hover_markdown(result: LookupResult, excerpt_length: int, limit: int | None) -> list[str]:
    uppers = _uppers(result)
    evidence = result.evidence
    n = _evidence_count(result)
    count = f"{n} memor{'y' if n == 1 else 'ies'}"
    blocks = [f"**poimen-memory** · {count}"]
    for m in uppers[:limit]:
        text = _md_paragraph(excerpt(m.node.text, excerpt_length))
        blocks.append(f"**{m.node.level.value}** · {text}")
    for m in evidence[:limit]:
        blocks.append("---")
        blocks.append(_md_paragraph(excerpt(m.node.text, excerpt_length), "> "))
        c = m.citation
        if c is not None:
            commit = c.commit
            blocks.append(
                f"{_md_code(commit.sha.short())} {_md_one_line(commit.summary)} — "
                f"{_md_one_line(commit.author_name)}, {commit.author_date.date().isoformat()} · "
                f"{_md_code(c.git_ref)}"
            )
        how = arrival(m)
        if how is not None:
            blocks.append(f"*{_md_one_line(how)}*")
    left = _left_out(result, len(uppers), limit)
    if left:
        blocks += ["---", f"*and {left} more: the code lens or* `mem why` *shows every one*"]
    return blocks


def _hover_plain(result: LookupResult, excerpt_length: int, limit: int | None) -> list[str]:
    uppers = _uppers(result)
    evidence = result.evidence
    n = _evidence_count(result)
    count = f"{n} memor{'y' if n == 1 else 'ies'}"
    blocks = [f"poimen-memory · {count}"]
    if uppers:
        lines: list[str] = []
        for m in uppers[:limit]:
            first, *rest = excerpt(m.node.text, excerpt_length).splitlines()
            lines.append(f"{m.node.level.value}  {first.strip()}")
            lines += [f"    {ln.strip()}" for ln in rest if ln.strip()]
        blocks.append("\n".join(lines))
    for m in evidence[:limit]:
        body = [f"  {ln.rstrip()}" for ln in excerpt(m.node.text, excerpt_length).splitlines()]
        c = m.citation
        if c is not None:
            commit = c.commit
            who = f"{commit.author_name}, {commit.author_date.date().isoformat()}"
            body.append(f"{commit.sha.short()} {commit.summary} — {who} · {c.git_ref}")
        how = arrival(m)
        if how is not None:
            body.append(how)
        blocks.append("\n".join(body))
    left = _left_out(result, len(uppers), limit)
    if left:
        blocks.append(f"and {left} more: the code lens or `mem why` shows every one")
    return blocks


def render_hover(
    result: LookupResult,
    excerpt_length: int = 400,
    markdown: bool = True,
    limit: int | None = None,
) -> str:
    """The hover: what was learned (L2, then L1) first, each in its own paragraph, then each
    piece of evidence: its excerpt (a blockquote in Markdown) and, after it, the commit,
    author, date and the reference to cite. ``markdown=False``: plain text for clients that
    take no Markdown. ``limit``: at most that many syntheses and pieces of evidence (the first,
    in the result's order: the newest), and a last line counting the rest; None: every one."""
    blocks = (
        _hover_markdown(result, excerpt_length, limit)
        if markdown
        else _hover_plain(result, excerpt_length, limit)
    )
    return "\n\n".join(blocks) + "\n"
