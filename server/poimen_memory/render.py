"""Text renderings of a lookup result (the JSON form is LookupResult.to_json)."""

from __future__ import annotations

from poimen_memory.lookup import Citation, LookupResult, Memory

__all__ = ["arrival", "cite_line", "excerpt", "render_hover", "render_text"]


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


def _memory(m: Memory, indent: str = "") -> list[str]:
    lines = [f"{indent}{m.node.level.value} · {m.node.brief}"]
    body = [ln for ln in m.node.text.splitlines()[1:] if ln.strip()]
    lines += [f"{indent}     {ln}" for ln in body[:6]]
    if len(body) > 6:
        lines.append(f"{indent}     … ({len(body) - 6} more lines)")
    if m.citation is not None:
        lines.append(f"{indent}   {cite_line(m.citation)}")
    how = arrival(m)
    if how is not None:
        lines.append(f"{indent}   {how}")
    for extra in m.citations[1:]:
        lines.append(f"{indent}   also {extra.cite()}")
    return lines


def render_text(result: LookupResult) -> str:
    """Readable text: each memory, then where it is cited, ready to paste."""
    if not result.memories:
        return "no memories found\n"
    out: list[str] = []
    for m in result.memories:
        out.extend(_memory(m))
        for p in m.parents:
            out.append(f"   ↳ {p.node.level.value} · {p.node.brief}")
        out.append("")
    if result.mapped is False:
        out.append("(not mapped through blame: the lines as the memories stored them)")
    if result.truncated:
        more = f"; next page: --cursor {result.cursor}" if result.cursor else ""
        out.append(f"(truncated: more than shown{more})")
    return "\n".join(out).rstrip() + "\n"


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


def _md_escape(text: str) -> str:
    return "".join("\\" + ch if ch in "\\`*_[]<>#|" else ch for ch in text)


def render_hover(result: LookupResult, excerpt_length: int = 400, markdown: bool = True) -> str:
    """The hover: what was learned (L2, L1 briefs) first, then the evidence excerpts with the
    commit, author, date and the reference to cite."""
    uppers = [m for m in result.memories if m.node.level.rank > 0]
    evidence = result.evidence
    out: list[str] = []
    count = f"{len(evidence)} memor{'y' if len(evidence) == 1 else 'ies'}"
    out.append(f"**poimen-memory** · {count}" if markdown else f"poimen-memory · {count}")
    out.append("")
    for m in sorted(uppers, key=lambda m: -m.node.level.rank):
        brief = _md_escape(m.node.brief) if markdown else m.node.brief
        out.append(
            f"**{m.node.level.value}** {brief}"
            if markdown
            else f"{m.node.level.value}  {m.node.brief}"
        )
    for m in evidence:
        out.append("---" if markdown else "")
        body = excerpt(m.node.text, excerpt_length)
        if markdown:
            out.append(
                "\n".join(f"> {_md_escape(line)}" if line else ">" for line in body.splitlines())
            )
        else:
            out.append("\n".join(f"  {line}" for line in body.splitlines()))
        c = m.citation
        if c is not None:
            commit = c.commit
            when = commit.author_date.date().isoformat()
            if markdown:
                out.append(
                    f"`{commit.sha.short()}` {_md_escape(commit.summary)} — "
                    f"{_md_escape(commit.author_name)}, {when} · `{c.git_ref}`"
                )
            else:
                who = f"{commit.author_name}, {when}"
                out.append(f"{commit.sha.short()} {commit.summary} — {who} · {c.git_ref}")
        how = arrival(m)
        if how is not None:
            out.append(f"*{how}*" if markdown else how)
        out.append("")
    return "\n".join(out).rstrip() + "\n"
