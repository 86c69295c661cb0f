"""Claude Code sessions as Claude Code 2.x writes them, made by really editing a work tree: each
tool call is followed by its result entry with the ``toolUseResult`` shape Claude Code records
for it (Edit, MultiEdit, Write creating or updating a file, NotebookEdit, Task), and the
subagents' transcripts are written where Claude Code keeps them
(``<session>/subagents/agent-<id>.jsonl``)."""

from __future__ import annotations

import difflib
import json
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

VERSION = "2.1.29"


def stamp(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def structured_patch(old: str, new: str) -> list[dict[str, Any]]:
    """Hunks as Claude Code records them (``structuredPatch``): unified diff, 3 lines of
    context, each line with its ``-``/``+``/`` `` prefix."""
    hunks: list[dict[str, Any]] = []
    diff = difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=3)
    for line in diff:
        if line.startswith(("---", "+++")):
            continue
        if line.startswith("@@"):
            old_part, new_part = line.split()[1:3]
            o_start, _, o_len = old_part[1:].partition(",")
            n_start, _, n_len = new_part[1:].partition(",")
            hunks.append(
                {
                    "oldStart": int(o_start),
                    "oldLines": int(o_len or 1),
                    "newStart": int(n_start),
                    "newLines": int(n_len or 1),
                    "lines": [],
                }
            )
            continue
        hunks[-1]["lines"].append(line)
    return hunks


class Session:
    """One session of the agent in ``root`` (its cwd may be a subdirectory), written to
    ``transcript``; edits really change the files. Timestamps run from ``start`` (epoch)."""

    def __init__(
        self,
        root: Path,
        transcript: Path,
        *,
        cwd: Path | None = None,
        start: float | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
    ) -> None:
        self.root = root
        self.cwd = cwd or root
        self.transcript = transcript
        self.clock = time.time() - 600 if start is None else start
        self.session_id = session_id or str(uuid.uuid4())
        self.agent_id = agent_id
        self.entries: list[dict[str, Any]] = []
        self.parent: str | None = None
        self.prompts: list[str] = []

    # -- entries --------------------------------------------------------------------------

    def _base(self, kind: str) -> dict[str, Any]:
        self.clock += 2
        uid = str(uuid.uuid4())
        entry: dict[str, Any] = {
            "parentUuid": self.parent,
            "isSidechain": self.agent_id is not None,
            "userType": "external",
            "cwd": str(self.cwd),
            "sessionId": self.session_id,
            "version": VERSION,
            "gitBranch": "main",
            "type": kind,
            "uuid": uid,
            "timestamp": stamp(self.clock),
        }
        if self.agent_id is not None:
            entry["agentId"] = self.agent_id
        self.parent = uid
        return entry

    def prompt(self, text: str) -> str:
        entry = self._base("user")
        entry["message"] = {"role": "user", "content": text}
        self.entries.append(entry)
        self.prompts.append(entry["uuid"])
        return str(entry["uuid"])

    def say(self, text: str) -> None:
        self._assistant({"type": "text", "text": text})

    def _assistant(self, *blocks: dict[str, Any]) -> None:
        entry = self._base("assistant")
        entry["message"] = {
            "model": "claude-opus-4-5-20251101",
            "id": f"msg_{uuid.uuid4().hex[:20]}",
            "type": "message",
            "role": "assistant",
            "content": list(blocks),
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 140},
        }
        entry["requestId"] = f"req_{uuid.uuid4().hex[:20]}"
        self.entries.append(entry)

    def _call(self, name: str, tool_input: dict[str, Any]) -> str:
        tool_id = f"toolu_{uuid.uuid4().hex[:24]}"
        self._assistant({"type": "tool_use", "id": tool_id, "name": name, "input": tool_input})
        return tool_id

    def _result(self, tool_id: str, text: str, outcome: object, *, error: bool = False) -> None:
        entry = self._base("user")
        block: dict[str, Any] = {"tool_use_id": tool_id, "type": "tool_result", "content": text}
        if error:
            block["is_error"] = True
        entry["message"] = {"role": "user", "content": [block]}
        entry["toolUseResult"] = outcome
        self.entries.append(entry)

    # -- tools ----------------------------------------------------------------------------

    def edit(self, rel: str, old: str, new: str) -> None:
        path = self.root / rel
        before = path.read_text()
        assert before.count(old) == 1, f"{old!r} is not once in {rel}"
        after = before.replace(old, new)
        tool_id = self._call(
            "Edit",
            {"file_path": str(path), "old_string": old, "new_string": new, "replace_all": False},
        )
        path.write_text(after)
        self._result(
            tool_id,
            f"The file {path} has been updated. Here's the result of running `cat -n` on a "
            "snippet of the edited file:\n…",
            {
                "filePath": str(path),
                "oldString": old,
                "newString": new,
                "originalFile": before,
                "structuredPatch": structured_patch(before, after),
                "userModified": False,
                "replaceAll": False,
            },
        )

    def multi_edit(self, rel: str, pairs: list[tuple[str, str]]) -> None:
        path = self.root / rel
        before = after = path.read_text()
        for old, new in pairs:
            after = after.replace(old, new, 1)
        edits = [{"old_string": o, "new_string": n, "replace_all": False} for o, n in pairs]
        tool_id = self._call("MultiEdit", {"file_path": str(path), "edits": edits})
        path.write_text(after)
        self._result(
            tool_id,
            f"Applied {len(pairs)} edits to {path}:\n…",
            {
                "filePath": str(path),
                "edits": edits,
                "originalFileContents": before,
                "structuredPatch": structured_patch(before, after),
                "userModified": False,
            },
        )

    def write(self, rel: str, content: str) -> None:
        path = self.root / rel
        existed = path.exists()
        before = path.read_text() if existed else None
        tool_id = self._call("Write", {"file_path": str(path), "content": content})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        if before is None:
            self._result(
                tool_id,
                f"File created successfully at: {path}",
                {
                    "type": "create",
                    "filePath": str(path),
                    "content": content,
                    "structuredPatch": [],
                    "originalFile": None,
                },
            )
        else:
            self._result(
                tool_id,
                f"The file {path} has been updated. Here's the result of running `cat -n` on "
                "a snippet of the edited file:\n…",
                {
                    "type": "update",
                    "filePath": str(path),
                    "content": content,
                    "structuredPatch": structured_patch(before, content),
                    "originalFile": before,
                },
            )

    def failed_edit(self, rel: str, old: str, new: str) -> None:
        path = self.root / rel
        tool_id = self._call(
            "Edit",
            {"file_path": str(path), "old_string": old, "new_string": new, "replace_all": False},
        )
        self._result(
            tool_id,
            f"<tool_use_error>String to replace not found in file.\nString: {old}</tool_use_error>",
            "Error: String to replace not found in file.",
            error=True,
        )

    def notebook_edit(self, rel: str, cell_id: str, source: str) -> None:
        path = self.root / rel
        tool_id = self._call(
            "NotebookEdit",
            {
                "notebook_path": str(path),
                "cell_id": cell_id,
                "new_source": source,
                "cell_type": "code",
                "edit_mode": "replace",
            },
        )
        notebook = json.loads(path.read_text())
        for cell in notebook["cells"]:
            if cell.get("id") == cell_id:
                cell["source"] = source.splitlines(keepends=True)
        path.write_text(json.dumps(notebook, indent=1) + "\n")
        self._result(
            tool_id,
            f"Updated cell {cell_id} with {source}",
            {
                "new_source": source,
                "cell_id": cell_id,
                "cell_type": "code",
                "language": "python",
                "edit_mode": "replace",
                "error": "",
            },
        )

    def subagent(self, description: str, prompt: str) -> Session:
        """Start a subagent with the Task tool: its own session, written beside this one's
        transcript as Claude Code does; ``finish_task`` records its result here."""
        agent_id = uuid.uuid4().hex[:8]
        tool_id = self._call(
            "Task",
            {"description": description, "prompt": prompt, "subagent_type": "general-purpose"},
        )
        where = self.transcript.with_suffix("") / "subagents" / f"agent-{agent_id}.jsonl"
        child = Session(
            self.root,
            where,
            cwd=self.cwd,
            start=self.clock,
            session_id=self.session_id,
            agent_id=agent_id,
        )
        child.prompt(prompt)
        child.task_id = tool_id  # type: ignore[attr-defined]
        return child

    def finish_task(self, child: Session, reply: str) -> None:
        self.clock = max(self.clock, child.clock)
        self._result(
            child.task_id,  # type: ignore[attr-defined]
            reply,
            {
                "status": "completed",
                "prompt": child.entries[0]["message"]["content"],
                "agentId": child.agent_id,
                "content": [{"type": "text", "text": reply}],
                "totalDurationMs": 41000,
                "totalTokens": 9000,
                "totalToolUseCount": 3,
            },
        )

    def save(self) -> Path:
        self.transcript.parent.mkdir(parents=True, exist_ok=True)
        self.transcript.write_text("".join(json.dumps(e) + "\n" for e in self.entries))
        return self.transcript


def hook_payload(session: Session, event: str, **extra: Any) -> str:
    """What Claude Code writes on a hook's stdin for ``event``."""
    body: dict[str, Any] = {
        "session_id": session.session_id,
        "transcript_path": str(session.transcript),
        "cwd": str(session.cwd),
        "permission_mode": "default",
        "hook_event_name": event,
    }
    if event in ("Stop", "SubagentStop"):
        body["stop_hook_active"] = False
    if event == "SessionEnd":
        body["reason"] = "prompt_input_exit"
    return json.dumps(body | extra)
