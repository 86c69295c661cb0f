"""Text renderings of a lookup result (the JSON form is LookupResult.to_json)."""

from __future__ import annotations

from poimen_memory.lookup import Citation, LookupResult, Memory

__all__ = ["cite_line", "render_text"]


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
    for extra in m.citations[1:]:
        lines.append(f"{indent}   also {extra.cite()}")
    return lines


def render_text(result: LookupResult) -> str:
    """Readable text: each memory, then where it is cited, ready to paste."""
    if not result.memories:
        return "no memories found"
    out: list[str] = []
    for m in result.memories:
        out.extend(_memory(m))
        for p in m.parents:
            out.append(f"   ↳ {p.node.level.value} · {p.node.brief}")
        out.append("")
    return "\n".join(out).rstrip() + "\n"
