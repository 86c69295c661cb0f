"""Automatic capture from Claude Code: its hooks run ``mem hooks run claude-code`` when a session
stops or ends, which ingests the session's transcript; ``mem mcp install`` registers the MCP
server the same way.

- settings files: read, merge and unmerge our entries in Claude Code's JSON settings, written
  atomically; every other key, hook and server is kept as it was;
- the hook: read the payload Claude Code writes on stdin, start a detached worker and return at
  once; the worker ingests the transcript, one run per transcript at a time;
- the log: one JSON line per run under the user's cache directory, bounded in size, shown by
  ``mem hooks status``.

The hook never fails the agent: every problem ends up as a line in the log.
"""

from __future__ import annotations

import contextlib
import difflib
import fcntl
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import platformdirs

from poimen_memory.domain import ProjectId
from poimen_memory.errors import ConfigError
from poimen_memory.ingest import Format, IngestOptions, IngestSummary, ingest
from poimen_memory.lookup import NotInRepository, new_checkouts, project_for
from poimen_memory.settings import APP, load_settings, redact_dsn
from poimen_memory.wiring import open_store

__all__ = [
    "AGENT",
    "EVENTS",
    "HOOK_TIMEOUT_S",
    "LOG_MAX_BYTES",
    "MCP_SERVER",
    "PAYLOAD_MAX_BYTES",
    "Change",
    "HookInputError",
    "HookPayload",
    "Scope",
    "claude_config_dir",
    "hook_command",
    "installed_commands",
    "is_hook_command",
    "log_path",
    "mcp_config_path",
    "mcp_entry",
    "mem_invocation",
    "parse_payload",
    "plan_hooks_install",
    "plan_hooks_uninstall",
    "plan_mcp_install",
    "read_log",
    "run_hook",
    "settings_path",
    "transcript_locks",
]

AGENT = "claude-code"
# Claude Code's events after which the transcript holds a finished turn, or the whole session.
EVENTS = ("Stop", "SessionEnd")
MCP_SERVER = "poimen-memory"
# Seconds Claude Code gives the hook; it returns in about one, the ingest runs detached.
HOOK_TIMEOUT_S = 30
# The words that make a hook command ours, wherever mem is installed.
_OURS = ("hooks", "run", AGENT)
LOG_MAX_BYTES = 1_000_000
PAYLOAD_MAX_BYTES = 1_000_000
# How long a worker waits for the run of the same transcript before it to finish.
LOCK_WAIT_S = 900.0
# Lock files of transcripts no run has touched for this long are deleted.
LOCKS_KEPT_S = 7 * 24 * 3600.0

Scope = Literal["project", "user"]


# -- settings files ---------------------------------------------------------------------------


def claude_config_dir() -> Path:
    """Claude Code's user directory: ``$CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".claude"


def settings_path(scope: Scope, project_root: Path | None) -> Path:
    """The settings file hooks go in: ``.claude/settings.json`` in the project, or the user's."""
    if scope == "user":
        return claude_config_dir() / "settings.json"
    assert project_root is not None
    return project_root / ".claude" / "settings.json"


def mcp_config_path(scope: Scope, project_root: Path | None) -> Path:
    """Where Claude Code reads MCP servers: ``.mcp.json`` at the project root, or the user's
    ``~/.claude.json`` (in ``$CLAUDE_CONFIG_DIR`` when that is set)."""
    if scope == "user":
        configured = os.environ.get("CLAUDE_CONFIG_DIR")
        home = Path(configured).expanduser() if configured else Path.home()
        return home / ".claude.json"
    assert project_root is not None
    return project_root / ".mcp.json"


@dataclass(frozen=True, slots=True)
class _JsonFile:
    path: Path
    text: str | None  # None: the file does not exist
    data: dict[str, Any]
    indent: int | str | None


def _indent_of(text: str) -> int | str | None:
    """The indentation a JSON file is written with (2 spaces for a new or one-line file)."""
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and stripped != line:
            lead = line[: len(line) - len(stripped)]
            return "\t" if lead.startswith("\t") else len(lead)
    return 2 if not text.strip() or "\n" in text.strip() else None


def _read(path: Path) -> _JsonFile:
    """A JSON settings file; ConfigError naming it when it is no JSON object."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return _JsonFile(path, None, {}, 2)
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not valid UTF-8; not changed") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read: {exc.strerror}") from None
    if not text.strip():
        return _JsonFile(path, text, {}, 2)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path}: not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg}); not changed"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object, found {_json_type(data)}; not changed")
    return _JsonFile(path, text, data, _indent_of(text))


def _render(data: Mapping[str, Any], indent: int | str | None, like: str | None) -> str:
    text = json.dumps(data, indent=indent, ensure_ascii=False)
    return text + "\n" if like is None or like.endswith("\n") else text


def _write_atomically(path: Path, text: str) -> None:
    """Write through a temporary file in the same directory and a rename; a symlinked file is
    written where it points, and keeps its permissions."""
    target = Path(os.path.realpath(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, mode)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


@dataclass(frozen=True, slots=True)
class Change:
    """What an install or uninstall does to one file: its text before and after (None: no
    file), and a sentence saying what that is."""

    path: Path
    before: str | None
    after: str | None
    message: str

    @property
    def changed(self) -> bool:
        """Whether the file would be written."""
        return self.after is not None and self.before != self.after

    def diff(self) -> str:
        """The change as a unified diff of the JSON, pretty-printed whatever the file's layout
        (a one-line file would be one changed line); empty when nothing changes."""
        if not self.changed:
            return ""

        def lines(text: str | None) -> list[str]:
            if text is None or not text.strip():
                return []
            return (json.dumps(json.loads(text), indent=2, ensure_ascii=False) + "\n").splitlines(
                keepends=True
            )

        diff = difflib.unified_diff(
            lines(self.before), lines(self.after), f"{self.path} (now)", f"{self.path} (after)"
        )
        return "".join(line if line.endswith("\n") else line + "\n" for line in diff)

    def apply(self) -> None:
        """Write the file (atomically); nothing when nothing changes."""
        if not self.changed or self.after is None:
            return
        try:
            _write_atomically(self.path, self.after)
        except OSError as exc:
            raise ConfigError(f"{self.path}: cannot be written: {exc.strerror or exc}") from None


def _unchanged(file: _JsonFile, message: str) -> Change:
    return Change(file.path, file.text, file.text, message)


def _drop(items: list[Any], item: object) -> None:
    """Remove ``item`` itself from ``items`` (not an equal one that comes first)."""
    del items[next(i for i, x in enumerate(items) if x is item)]


def _json_type(value: object) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    return names.get(type(value), "a number" if isinstance(value, int | float) else "null")


def _container(file: _JsonFile, parent: dict[str, Any], key: str, kind: type, where: str) -> Any:
    value = parent.get(key)
    if value is not None and not isinstance(value, kind):
        raise ConfigError(
            f"{file.path}: {where} is {_json_type(value)}, expected "
            f"{'an object' if kind is dict else 'an array'}; not changed"
        )
    return value


# -- the command the hook runs ----------------------------------------------------------------


def mem_invocation() -> list[str]:
    """How to run this ``mem`` from anywhere, without a virtual environment being active: the
    absolute path of the running ``mem`` script, else ``python -m poimen_memory.cli`` with this
    interpreter."""
    module = [sys.executable, "-m", "poimen_memory.cli"]
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and str(spec.name).startswith("poimen_memory.cli"):
        return module
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script is not None and script.stem == "mem" and script.is_file():
        return [str(script.absolute())]
    beside = Path(sys.executable).parent / "mem"
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("mem")
    return [str(Path(found).absolute())] if found else module


def _options(project: str | None, dsn: str | None) -> list[str]:
    return [*(["--project", project] if project else []), *(["--dsn", dsn] if dsn else [])]


def hook_command(invocation: Sequence[str], project: str | None, dsn: str | None) -> str:
    """The shell command Claude Code runs on each event. ``mem hooks run`` exits 0 whatever
    happens; ``|| true`` covers what happens before it runs (a command line a later mem no
    longer parses exits 2, which on ``Stop`` would keep the agent from stopping)."""
    return shlex.join([*invocation, *_OURS, *_options(project, dsn)]) + " || true"


def is_hook_command(command: object) -> bool:
    """Whether a hook command is ours: ``mem`` (any path to it) or ``python -m
    poimen_memory.cli``, then ``hooks run claude-code``; another tool whose command merely
    contains those words is not."""
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    n = len(_OURS)
    for i in range(len(words) - n + 1):
        if tuple(words[i : i + n]) != _OURS:
            continue
        program = words[:i]
        if len(program) == 1 and Path(program[0]).name == "mem":
            return True
        if len(program) == 3 and program[1:] == ["-m", "poimen_memory.cli"]:
            return True
    return False


def _our_hook(command: str) -> dict[str, Any]:
    return {"type": "command", "command": command, "timeout": HOOK_TIMEOUT_S}


def _hooks_table(file: _JsonFile, data: dict[str, Any]) -> dict[str, Any] | None:
    table: dict[str, Any] | None = _container(file, data, "hooks", dict, '"hooks"')
    if table is None:
        return None
    for event in EVENTS:
        groups = _container(file, table, event, list, f'"hooks.{event}"')
        for index, group in enumerate(groups or []):
            if isinstance(group, dict):
                _container(file, group, "hooks", list, f'"hooks.{event}[{index}].hooks"')
    return table


def _ours_in(groups: list[Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(group, hook) for each of our hooks among an event's matcher groups."""
    for group in groups:
        if isinstance(group, dict):
            for hook in group.get("hooks") or []:
                if isinstance(hook, dict) and is_hook_command(hook.get("command")):
                    yield group, hook


def plan_hooks_install(path: Path, command: str) -> Change:
    """Add our hook to ``Stop`` and ``SessionEnd`` in a settings file, or update the command of
    the one there; every other key and hook is kept."""
    file = _read(path)
    data = json.loads(json.dumps(file.data))  # a copy to change
    table = _hooks_table(file, data)
    if table is None:
        table = data["hooks"] = {}
    added, updated = [], []
    for event in EVENTS:
        groups = table.get(event)
        if groups is None:
            groups = table[event] = []
        ours = list(_ours_in(groups))
        if not ours:
            groups.append({"hooks": [_our_hook(command)]})
            added.append(event)
            continue
        first = ours[0][1]
        if first.get("command") != command or first.get("type") != "command":
            first.update(type="command", command=command)
            first.setdefault("timeout", HOOK_TIMEOUT_S)
            updated.append(event)
        for group, hook in ours[1:]:  # the same hook twice would ingest twice
            _drop(group["hooks"], hook)
            if not group["hooks"]:
                _drop(groups, group)
            updated.append(event)
    if not added and not updated:
        return _unchanged(file, f"the {AGENT} hook is already installed in {path}; nothing changed")
    verb = "installed" if not updated else "updated"
    events = ", ".join(dict.fromkeys([*added, *updated]))
    return Change(
        path,
        file.text,
        _render(data, file.indent, file.text),
        f"{verb} the {AGENT} hook in {path} ({events}): {command}",
    )


def plan_hooks_uninstall(path: Path) -> Change:
    """Remove our hooks from a settings file, and the lists and tables that removing them left
    empty; nothing else."""
    file = _read(path)
    data = json.loads(json.dumps(file.data))
    table = _hooks_table(file, data) or {}
    removed = []
    for event in EVENTS:
        groups = table.get(event)
        ours = list(_ours_in(groups or []))
        if not groups or not ours:
            continue
        for group, hook in ours:
            _drop(group["hooks"], hook)
            if not group["hooks"]:
                _drop(groups, group)
        removed.append(event)
        if not groups:
            del table[event]
    if not removed:
        return _unchanged(file, f"no {AGENT} hook in {path}; nothing changed")
    if not table:
        del data["hooks"]
    return Change(
        path,
        file.text,
        _render(data, file.indent, file.text),
        f"removed the {AGENT} hook from {path} ({', '.join(removed)})",
    )


def installed_commands(path: Path) -> dict[str, list[str]]:
    """Our hook commands in a settings file, by event (ConfigError if it is unreadable)."""
    file = _read(path)
    table = _hooks_table(file, file.data) or {}
    return {
        event: [str(hook["command"]) for _, hook in _ours_in(table.get(event) or [])]
        for event in EVENTS
        if any(True for _ in _ours_in(table.get(event) or []))
    }


# -- the MCP server entry ---------------------------------------------------------------------


def mcp_entry(
    invocation: Sequence[str], repo: Path | None, project: str | None, dsn: str | None
) -> dict[str, Any]:
    """The ``mcpServers`` entry that runs ``mem mcp`` over stdio."""
    args = [*invocation[1:], "mcp", *(["--repo", str(repo)] if repo else [])]
    return {"type": "stdio", "command": invocation[0], "args": [*args, *_options(project, dsn)]}


def plan_mcp_install(path: Path, entry: Mapping[str, Any], name: str = MCP_SERVER) -> Change:
    """Add (or bring up to date) our entry under ``mcpServers``; other servers, and keys of our
    entry that we do not set (``env``), are kept."""
    file = _read(path)
    data = json.loads(json.dumps(file.data))
    servers = _container(file, data, "mcpServers", dict, '"mcpServers"')
    if servers is None:
        servers = data["mcpServers"] = {}
    current = servers.get(name)
    if current is not None and not isinstance(current, dict):
        raise ConfigError(
            f'{path}: "mcpServers.{name}" is {_json_type(current)}, expected an object; not changed'
        )
    if current is not None and all(current.get(k) == v for k, v in entry.items()):
        return _unchanged(file, f"the MCP server {name} is already in {path}; nothing changed")
    servers[name] = {**(current or {}), **entry}
    words = shlex.join([entry["command"], *entry["args"]])
    verb = "added" if current is None else "updated"
    return Change(
        path,
        file.text,
        _render(data, file.indent, file.text),
        f"{verb} the MCP server {name} in {path}: {words}",
    )


# -- the hook's payload -----------------------------------------------------------------------


class HookInputError(ValueError):
    """The payload on stdin is not one a Claude Code hook sends."""


@dataclass(frozen=True, slots=True)
class HookPayload:
    """What the hook is told: which event, which session, where its transcript is."""

    transcript: Path
    cwd: Path
    event: str = "?"
    session: str = ""
    reason: str = ""

    def to_json(self) -> dict[str, str]:
        """The payload as the worker reads it back."""
        return {
            "transcript_path": str(self.transcript),
            "cwd": str(self.cwd),
            "hook_event_name": self.event,
            "session_id": self.session,
            "reason": self.reason,
        }


def _text(body: Mapping[str, Any], key: str) -> str:
    value = body.get(key)
    return value if isinstance(value, str) else ""


def parse_payload(raw: bytes | str) -> HookPayload:
    """The hook's payload; HookInputError saying what is wrong with it."""
    if not raw.strip():
        raise HookInputError("no payload on stdin (Claude Code writes one for each event)")
    if len(raw) > PAYLOAD_MAX_BYTES:
        raise HookInputError(f"payload over {PAYLOAD_MAX_BYTES} bytes")
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        body = json.loads(text)
    except UnicodeDecodeError:
        raise HookInputError("payload is not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise HookInputError(f"payload is not JSON: {exc.msg} at char {exc.pos}") from None
    if not isinstance(body, dict):
        raise HookInputError(f"payload is a JSON {type(body).__name__}, expected an object")
    transcript = _text(body, "transcript_path")
    if not transcript:
        raise HookInputError("payload has no transcript_path")
    path = Path(transcript).expanduser()
    if not path.is_file():
        raise HookInputError(f"transcript_path: no such file {path}")
    cwd = _text(body, "cwd") or os.getcwd()
    return HookPayload(
        transcript=path.absolute(),
        cwd=Path(cwd).expanduser().absolute(),
        event=_text(body, "hook_event_name") or "?",
        session=_text(body, "session_id"),
        reason=_text(body, "reason"),
    )


# -- the log ----------------------------------------------------------------------------------


def _state_dir() -> Path:
    """``hooks`` under the user cache directory (``$POIMEN_CACHE_DIR``), beside the blame
    cache; the platform's default when the settings cannot be read."""
    try:
        base = load_settings().cache_dir
    except ConfigError:
        base = platformdirs.user_cache_path(APP)
    return base / "hooks"


def log_path() -> Path:
    """The hook's log: one JSON object per line."""
    return _state_dir() / f"{AGENT}.log"


@contextlib.contextmanager
def _locked(path: Path, *, wait: float | None) -> Iterator[bool]:
    """An exclusive flock on ``path``: yields whether it was taken (within ``wait`` seconds;
    None: do not wait)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+b") as handle:
        with contextlib.suppress(OSError):
            os.utime(handle.fileno())  # in use: not pruned
        deadline = time.monotonic() + (wait or 0.0)
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if wait is None or time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(0.1)
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _log(entry: Mapping[str, Any], path: Path | None = None) -> None:
    """Append one entry (with the time) to the log, moving a log over LOG_MAX_BYTES to
    ``.1`` first. Never raises: the log is the last resort."""
    path = path or log_path()
    line = json.dumps(
        {"time": datetime.now(UTC).isoformat(timespec="seconds"), **entry}, ensure_ascii=False
    )
    with contextlib.suppress(OSError), _locked(path.with_suffix(".lock"), wait=5.0):
        with contextlib.suppress(FileNotFoundError):
            if path.stat().st_size > LOG_MAX_BYTES:
                os.replace(path, path.with_name(path.name + ".1"))
        with path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")


def read_log(limit: int = 10, path: Path | None = None) -> list[dict[str, Any]]:
    """The last ``limit`` entries, oldest first; a line that is not one of ours (a worker's
    stray output) is an entry with outcome ``output``."""
    path = path or log_path()
    lines: list[str] = []
    for candidate in (path, path.with_name(path.name + ".1")):
        try:
            with candidate.open("rb") as handle:
                start = max(0, handle.seek(0, os.SEEK_END) - 256_000)
                handle.seek(start)
                tail = handle.read().decode("utf-8", errors="replace").splitlines()
        except OSError:
            continue
        lines = [*(tail[1:] if start else tail), *lines]  # from the first whole line
        if len(lines) >= limit:
            break
    entries = []
    for line in lines[-limit:] if limit > 0 else []:
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            entry = None
        if not isinstance(entry, dict):
            entry = {"outcome": "output", "message": line.strip()}
        entries.append(entry)
    return entries


# -- running the hook -------------------------------------------------------------------------


def _one_line(exc: BaseException, dsn: str | None) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return redact_dsn(text, dsn)


def _described(payload: HookPayload | None) -> dict[str, Any]:
    if payload is None:
        return {"event": "?"}
    described = {
        "event": payload.event,
        "session": payload.session,
        "transcript": str(payload.transcript),
        "cwd": str(payload.cwd),
    }
    if payload.reason:
        described["reason"] = payload.reason
    return described


def run_hook(raw: bytes, *, project: str | None, dsn: str | None, wait: bool) -> None:
    """What ``mem hooks run claude-code`` does with the payload ``raw``: with ``wait``, ingest
    the transcript here; else start a detached worker doing so and return at once. Every
    outcome is logged; nothing is raised, nothing printed."""
    payload = None
    try:
        payload = parse_payload(raw)
        if wait:
            _ingest_logged(payload, project, dsn)
        else:
            _detach(payload, project, dsn)
    except Exception as exc:  # the agent must never see the hook fail
        kind = "" if isinstance(exc, HookInputError) else f"{type(exc).__name__}: "
        message = kind + _one_line(exc, dsn or os.environ.get("POIMEN_DSN"))
        _log({**_described(payload), "outcome": "error", "message": message})


def _detach(payload: HookPayload, project: str | None, dsn: str | None) -> None:
    """Start ``mem hooks run claude-code --wait`` in a new session, the payload on its stdin,
    its stray output into the log; do not wait for it."""
    log = log_path()
    log.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env |= {"POIMEN_PROJECT": project} if project else {}
    env |= {"POIMEN_DSN": dsn} if dsn else {}
    argv = [sys.executable, "-m", "poimen_memory.cli", *_OURS, "--wait"]
    with log.open("ab") as output:
        worker = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=output,
            stderr=output,
            cwd=payload.cwd if payload.cwd.is_dir() else None,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
    assert worker.stdin is not None
    with worker.stdin:
        worker.stdin.write(json.dumps(payload.to_json()).encode("utf-8"))


def transcript_locks(transcript: Path) -> tuple[Path, Path]:
    """The lock files of a transcript's runs: (held by the one run waiting for its turn, held
    by the one run ingesting)."""
    key = hashlib.sha256(str(transcript).encode()).hexdigest()[:24]
    locks = _state_dir() / "locks"
    return locks / f"{key}.waiting", locks / f"{key}.running"


def _ingest_logged(payload: HookPayload, project: str | None, dsn: str | None) -> None:
    """Ingest the transcript and log the outcome, one run per transcript at a time. A run that
    finds another already waiting for the same transcript leaves it to that one, which reads
    the transcript later than this event anyway."""
    waiting, running_lock = transcript_locks(payload.transcript)
    described = _described(payload)
    with contextlib.ExitStack() as running:
        with _locked(waiting, wait=None) as first:
            if not first:
                message = "another run for this transcript is waiting; left to it"
                _log({**described, "outcome": "skipped", "message": message})
                return
            if not running.enter_context(_locked(running_lock, wait=LOCK_WAIT_S)):
                message = f"the run before this one still runs after {LOCK_WAIT_S:.0f}s"
                _log({**described, "outcome": "error", "message": message})
                return
        started = time.monotonic()
        try:
            summary, used = _ingest(payload, project, dsn)
        except NotInRepository as exc:
            message = f"not ingested, no git work tree: {exc}"
            _log({**described, "outcome": "skipped", "message": message})
            return
        seconds = round(time.monotonic() - started, 2)
        _log({**described, **_counts(summary, used), "seconds": seconds})
    _prune_locks(waiting.parent)


def _prune_locks(locks: Path, older_than_s: float = LOCKS_KEPT_S) -> None:
    """Delete the lock files of transcripts no run has touched for a while (a free one only)."""
    cutoff = time.time() - older_than_s
    for path in locks.glob("*.*"):
        with contextlib.suppress(OSError):
            if path.stat().st_mtime < cutoff:
                with _locked(path, wait=None) as free:
                    if free:
                        path.unlink()


def _ingest(
    payload: HookPayload, project: str | None, dsn: str | None
) -> tuple[IngestSummary, ProjectId]:
    settings = load_settings({"project": project, "dsn": dsn})
    identity, _ = new_checkouts().add(payload.cwd, field_name="cwd")
    used = project_for(identity) if settings.project is None else ProjectId(settings.project)
    options = IngestOptions(
        project=used,
        repo_dir=payload.cwd,
        format=Format.CLAUDE_CODE,
        skip_bad=True,
        redact=True,
    )
    with open_store(settings.dsn) as store:
        return ingest([payload.transcript], store, options), used


def _counts(summary: IngestSummary, project: ProjectId) -> dict[str, Any]:
    nodes = sum(summary.nodes_by_level.values())
    written = summary.written
    message = (
        f"{nodes} nodes ({written.nodes} new), {summary.anchors} anchors "
        f"({written.anchors} new) into project {project}"
    )
    if summary.skipped:
        message += f"; {len(summary.skipped)} bad record(s) skipped"
    return {
        "outcome": "ok",
        "message": message,
        "project": project.value,
        "repo": summary.repo.value,
        "nodes": nodes,
        "new_nodes": written.nodes,
        "anchors": summary.anchors,
        "new_anchors": written.anchors,
        "bad_records": len(summary.skipped),
    }
