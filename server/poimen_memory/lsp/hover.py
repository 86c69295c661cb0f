"""textDocument/hover: the memory stack of the line under the cursor, rendered by
``poimen_memory.render`` as Markdown or plain text, whichever the client takes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cachetools import LRUCache
from lsprotocol import types
from pygls.capabilities import get_capability

from poimen_memory.lookup import HoverRequest, LookupResult
from poimen_memory.lsp import UNREACHABLE
from poimen_memory.lsp.documents import open_document
from poimen_memory.render import render_hover

if TYPE_CHECKING:
    from poimen_memory.lsp.server import PoimenServer

__all__ = ["HoverTexts", "hover", "markdown"]


class HoverTexts:
    """Rendered hovers, remembered while the service keeps their result (a warm hover is
    the service's cached result, rendered again only when a setting changes)."""

    def __init__(self, size: int = 256) -> None:
        # Keyed by the result's id, so the entry keeps the result (an id is reused once freed).
        self._texts: LRUCache[tuple[int, int, bool], tuple[LookupResult, str]] = LRUCache(size)

    def text(self, result: LookupResult, excerpt_length: int, markdown: bool) -> str:
        """The hover text of ``result``."""
        key = (id(result), excerpt_length, markdown)
        hit = self._texts.get(key)
        if hit is not None and hit[0] is result:
            return hit[1]
        text = render_hover(result, excerpt_length, markdown)
        self._texts[key] = (result, text)
        return text


def markdown(ls: PoimenServer) -> bool:
    """Whether hovers are Markdown for this client (the setting, else its capabilities)."""
    choice = ls.state.config.hover.markup
    if choice != "auto":
        return choice == "markdown"
    formats = get_capability(ls.client_capabilities, "text_document.hover.content_format", None)
    return not formats or types.MarkupKind.Markdown in formats


def _content(text: str, markdown: bool) -> types.MarkupContent:
    kind = types.MarkupKind.Markdown if markdown else types.MarkupKind.PlainText
    return types.MarkupContent(kind, text)


async def hover(ls: PoimenServer, params: types.HoverParams) -> types.Hover | None:
    """The memories of the line under the cursor; None where there are none."""
    config = ls.state.config
    if not config.hover.enabled:
        return None
    doc = open_document(ls, params.text_document.uri)
    limits = config.blame
    if doc is None or doc.over_lines(limits.max_file_lines):
        return None
    line = params.position.line
    result = await ls.settle(
        f"hover {doc.path}:{line + 1}",
        lambda: ls.service.hover(
            HoverRequest(
                file=str(doc.path), line=line + 1, text=doc.text, history=config.hover.history
            )
        ),
        unreachable=types.Hover(contents=_content(UNREACHABLE, markdown=False)),
    )
    if result is None or isinstance(result, types.Hover):
        return result
    as_markdown = markdown(ls)
    text = ls.state.hover_texts.text(result, config.hover.excerpt_length, as_markdown)
    return types.Hover(
        contents=_content(text, as_markdown),
        range=types.Range(types.Position(line, 0), types.Position(line + 1, 0)),
    )
