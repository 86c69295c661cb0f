"""``python -m bench.echo ANSWER``: a process that speaks LSP's framing on stdio and answers
every request with the JSON in the file ANSWER, as it is, doing nothing else (until ``exit``).

The floor of a cached answer: what it costs a client to receive those bytes from a process
that has them ready (figure c's warm code lens)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.lspclient import read_message


def serve(answer: str) -> None:
    """Answer each request on stdin with ``answer`` until ``exit`` or the end of stdin."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        message = read_message(stdin)
        if message is None or message.get("method") == "exit":
            return
        if "id" not in message:
            continue
        body = f'{{"id":{json.dumps(message["id"])},"jsonrpc":"2.0","result":{answer}}}'.encode()
        stdout.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        stdout.flush()


if __name__ == "__main__":
    serve(Path(sys.argv[1]).read_text())
