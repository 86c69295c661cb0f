"""textDocument/hover: the memory stack of the line under the cursor, rendered by
``poimen_memory.render`` as Markdown or plain text, whichever the client takes."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from cachetools import LRUCache
from lsprotocol import types
from pygls.capabilities import get_capability

from poimen_memory.lookup import HoverRequest, LookupResult
from poimen_memory.lsp import UNREACHABLE, WAITS
from poimen_memory.lsp.documents import open_document
from poimen_memory.lsp.protocol import JsonText
from poimen_memory.render import HOVER_SHOWN, render_hover

if TYPE_CHECKING:
    from poimen_memory.lsp.server import PoimenServer

__all__ = ["HoverTexts", "hover", "markdown"]


class HoverTexts:
    """Hovers as sent, remembered while the service keeps their result (a warm hover is the
    service's cached result, rendered and serialized again only when a setting changes)."""

    def __init__(self, size: int = 256) -> None:
        # Keyed by the result's id, so the entry keeps the result (an id is reused once freed).
        self._sent: LRUCache[tuple[int, int, int, bool], tuple[LookupResult, JsonText]] = LRUCache(
            size
        )

    def sent(
        self,
        result: LookupResult,
        line: int,
        excerpt_length: int,
        markdown: bool,
        serialize: Callable[[types.Hover], JsonText],
    ) -> JsonText:
        """The hover of ``result`` on 0-based ``line``, as sent."""
        key = (id(result), line, excerpt_length, markdown)
        hit = self._sent.get(key)
        if hit is not None and hit[0] is result:
            return hit[1]
        text = render_hover(result, excerpt_length, markdown, HOVER_SHOWN)
        answer = serialize(
            types.Hover(
                contents=_content(text, markdown),
                range=types.Range(types.Position(line, 0), types.Position(line + 1, 0)),
            )
        )
        self._sent[key] = (result, answer)
        return answer


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


async def hover(ls: PoimenServer, params: types.HoverParams) -> types.Hover | JsonText | None:
    """The memories of the line under the cursor; None where there are none."""
    config = ls.state.config
    if not config.hover.enabled:
        return None
    doc = open_document(ls, params.text_document.uri)
    limits = config.blame
    if doc is None or doc.over_lines(limits.max_file_lines):
        return None
    line = params.position.line
    request = HoverRequest(
        file=str(doc.path), line=line + 1, text=doc.text, history=config.hover.history
    )
    # A warm hover is answered here, on the event loop; one that would wait, in a worker.
    found = ls.at_once(lambda: ls.service.hover(request))
    if found is not WAITS:
        result: LookupResult | types.Hover | None = found
    else:
        result = await ls.settle(
            f"hover {doc.path}:{line + 1}",
            lambda: ls.service.hover(request),
            unreachable=types.Hover(contents=_content(UNREACHABLE, markdown=False)),
        )
    if result is None or isinstance(result, types.Hover):
        return result
    return ls.state.hover_texts.sent(
        result,
        line,
        config.hover.excerpt_length,
        markdown(ls),
        lambda answer: ls.protocol.to_json(answer, types.Hover),
    )
