"""Running git: never a shell, a fixed environment, a timeout, and a count of processes."""

from __future__ import annotations

import atexit
import logging
import os
import resource
import shutil
import subprocess
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from poimen_memory.errors import may_wait
from poimen_memory.gitio.errors import GitFailed, GitNotFound, UnsafeArgument

__all__ = [
    "MEMORY_LIMIT",
    "GitRunner",
    "bound_memory",
    "bound_process",
    "check_not_option",
    "failure",
    "finish_stream",
    "pinned_environment",
    "stop_all",
]

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 60.0
# The address space of every git process (RLIMIT_AS, set in the child before git starts): a
# repository that makes git read without end (an alternates or grafts file linked to
# /dev/zero) costs at most this much, then git stops with "out of memory".
MEMORY_LIMIT = 2 << 30

# A repository is untrusted input: no program its configuration names may run. Pinned for
# every git we start, GitPython's persistent cat-file included:
#   -c core.quotePath=false     (not for safety: UTF-8 names come unquoted)
#   -c log.showSignature=false  gpg.program, gpg.ssh.program, gpg.x509.program verify nothing
#   core.fsmonitor=false        no fsmonitor hook asked which files changed
#   core.hooksPath=/dev/null    no hook: none exists below /dev/null
#   credential.helper=          the empty value empties the list of helper programs
#   GIT_ALLOW_PROTOCOL=none     no transport at all, so no core.sshCommand, remote.*.uploadpack,
#                               core.gitProxy, credential.helper or core.askPass: the lazy
#                               fetch of a partial clone's missing object would run them
#   GIT_NO_LAZY_FETCH=1         and that fetch is not even tried
#   GIT_ASKPASS= GIT_TERMINAL_PROMPT=0 GIT_EDITOR=: GIT_PAGER=cat   no prompt, editor, pager
# All but the two -c travel in the environment, so they reach the ``git version`` GitPython
# runs on import too.
# Files the configuration names, which git would open whatever they are (/dev/zero, a FIFO):
#   diff.orderFile=/dev/null    the order of files in a patch; ours does not depend on it
#   core.attributesFile=/dev/null   the user's own attributes; a repository's .gitattributes
#                               and info/attributes still count (drivers are pinned anyway)
# core.excludesFile is checked, not pinned (GitRepo.is_ignored): the user's own ignore rules
# still count where the file they name is a small regular file.
# Per repository (blameconfig): mailmap.file= when the file named is no small regular file,
# mailmap.blob=<id> of a checked blob. Per command: blame --no-textconv (diff.*.textconv, and
# the filter.*.process it would start); cat-file never with --textconv or --filters
# (filter.*.smudge, clean, process). No command we run reads diff.external, diff.*.command,
# core.pager or pager.* (our stdout is never a terminal), core.editor, merge drivers or
# uploadpack.packObjectsHook (upload-pack only, and never from a repository's configuration).
_CONFIG = ("core.quotePath=false", "log.showSignature=false")
# Passed as GIT_CONFIG_COUNT/KEY/VALUE: command-line scope, above every configuration file.
_PINNED: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("credential.helper", ""),
    ("diff.orderFile", "/dev/null"),
    ("core.attributesFile", "/dev/null"),
)
# No prompt, pager, editor or transport; no locks taken by read-only commands; stable
# (untranslated) messages.
_ENV_OVERRIDES: Mapping[str, str] = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_ASKPASS": "",
    "GIT_EDITOR": ":",
    "GIT_PAGER": "cat",
    "GIT_ALLOW_PROTOCOL": "none",
    "GIT_NO_LAZY_FETCH": "1",
    "GIT_OPTIONAL_LOCKS": "0",
    "LC_ALL": "C",
    "LANGUAGE": "C",
}
# glibc's allocator, for git: a heap that grows 16 MiB at a time and gives memory back only
# when 32 MiB lie free at its top. With the defaults (128 KiB each) a blame of a long-lived
# file grows and trims its heap again and again as it reads versions: redis's src/server.c,
# 110,000 page faults and a fifth of git's time in the kernel; with these, 28,000 and a
# twentieth, the same peak memory, 14% less time. (Setting them also keeps the mmap
# threshold at 128 KiB rather than letting it grow: larger blocks are still mapped apart.
# Other C libraries ignore the variable; a tunable the user sets comes after ours and wins.
# GitPython's long-lived cat-file readers get the user's value alone: see gitpython.)
_MALLOC_TUNABLES = "glibc.malloc.top_pad=16777216:glibc.malloc.trim_threshold=33554432"
_OUT_OF_MEMORY = "out of memory"
# git's words on stderr, recognised but never repeated: they may quote a file git was pointed
# at (an ignore-revs "list" that is /etc/passwd). First match wins; compared in lower case.
_CAUSES: tuple[tuple[bytes, str], ...] = (
    (b"not a git repository", "not a git repository"),
    (b"dubious ownership", "the repository belongs to another user (see safe.directory)"),
    (b"no such path", "no such path"),
    (b"no such ref", "no such ref"),
    (b"has only", "beyond the end of the file"),
    (b"lazy fetching disabled", "objects missing (a partial clone; nothing is fetched)"),
    (b"promisor remote", "objects missing (a partial clone; nothing is fetched)"),
    (b"bad config", "unreadable git configuration"),
    (b"bad shallow", "unreadable .git/shallow"),
    (b"repository format", "unsupported repository format"),
    (b"repository extension", "unsupported repository format"),
    (b"permission denied", "permission denied"),
    (b"out of memory", _OUT_OF_MEMORY),
    (b"cannot allocate", _OUT_OF_MEMORY),
    (b"invalid object name", "bad revision"),
    (b"bad revision", "bad revision"),
    (b"unknown revision", "bad revision"),
    (b"ambiguous argument", "bad revision"),
    (b"bad object", "missing or corrupt objects"),
    (b"unable to read", "missing or corrupt objects"),
    (b"corrupt", "missing or corrupt objects"),
)


def pinned_environment(base: Mapping[str, str]) -> dict[str, str]:
    """The variables a git started with ``base`` as its environment gets on top of it: the
    fixed ones, and the pinned configuration after any that ``base`` already passes."""
    try:
        start = int(base.get("GIT_CONFIG_COUNT", "0") or "0")
    except ValueError:
        start = 0  # git refuses such a count itself; ours are then the only ones
    out = dict(_ENV_OVERRIDES)
    theirs = base.get("GLIBC_TUNABLES")
    out["GLIBC_TUNABLES"] = f"{_MALLOC_TUNABLES}:{theirs}" if theirs else _MALLOC_TUNABLES
    for offset, (key, value) in enumerate(_PINNED):
        out[f"GIT_CONFIG_KEY_{start + offset}"] = key
        out[f"GIT_CONFIG_VALUE_{start + offset}"] = value
    out["GIT_CONFIG_COUNT"] = str(start + len(_PINNED))
    return out


def _memory_limit() -> tuple[int, int]:
    # (soft, hard) for a git: MEMORY_LIMIT, or the limit this process has when lower.
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    return (MEMORY_LIMIT if hard == resource.RLIM_INFINITY else min(MEMORY_LIMIT, hard), hard)


# The git processes running now (any runner's): ended with this process, never left behind.
# A git is counted in _SPAWNING from before it is started until it is in _LIVE, so that
# stop_all, run as the process ends, waits for one another thread is starting this moment
# (at exit that thread might never run again to register it).
_LIVE: set[subprocess.Popen[bytes]] = set()
_LIVE_LOCK = threading.Condition()
_SPAWNING: Counter[int] = Counter()  # thread id -> gits it is starting
_STOPPED = False  # stop_all ran: a git started after it is killed as soon as it is noted
# How long stop_all waits for gits being started (each takes milliseconds).
_SPAWN_WAIT_S = 5.0


def _ended(proc: subprocess.Popen[bytes]) -> None:
    with _LIVE_LOCK:
        _LIVE.discard(proc)


def stop_all() -> None:
    """Kill every git process still running: called as this process ends (at exit, and
    before any ``os._exit``), so that a background blame, whose git may compute for seconds
    before it writes a byte, does not outlive the server that wanted it. A git another
    thread is starting this moment is waited for and killed too, and one started later is
    killed as it is noted."""
    global _STOPPED
    me = threading.get_ident()
    with _LIVE_LOCK:
        _STOPPED = True
        _LIVE_LOCK.wait_for(
            lambda: not any(n for t, n in _SPAWNING.items() if t != me), timeout=_SPAWN_WAIT_S
        )
        running = list(_LIVE)
        _LIVE.clear()
    for proc in running:
        with suppress(OSError):
            proc.kill()


atexit.register(stop_all)


def bound_memory() -> None:
    """In a child about to become git: cap its address space (see _memory_limit). For the
    git processes we start without a way to reach them before they run (GitPython's)."""
    resource.setrlimit(resource.RLIMIT_AS, _memory_limit())


def bound_process(proc: subprocess.Popen[bytes]) -> None:
    """Cap the address space of a git just started (Linux's prlimit; elsewhere the limit is
    set in the child). Set from outside, the child is spawned as fast as without it (no
    Python code between fork and exec); git needs far longer than this takes to read a file
    that never ends, and a limit below what it has already takes effect at once."""
    prlimit = getattr(resource, "prlimit", None)
    if prlimit is None:
        return
    with suppress(OSError, ValueError):  # it has ended already
        prlimit(proc.pid, resource.RLIMIT_AS, _memory_limit())


def _preexec() -> Callable[[], None] | None:
    # Where the limit can be set from outside, nothing runs in the child.
    return None if hasattr(resource, "prlimit") else bound_memory


def in_repository(exc: GitFailed, cwd: Path) -> GitFailed:
    """``exc`` naming the repository at ``cwd`` when git ran out of its memory bound there."""
    if exc.cause != _OUT_OF_MEMORY:
        return exc
    bound = f"git may use {MEMORY_LIMIT >> 20} MiB"
    return GitFailed(f"{exc} ({bound}) in the repository at {cwd}", exc.cause)


def check_not_option(name: str, value: str) -> str:
    """Refuse a user-supplied value that git could parse as an option."""
    if value.startswith("-"):
        raise UnsafeArgument(f"{name}: {value!r} looks like an option; refused")
    if "\x00" in value or "\n" in value:
        raise UnsafeArgument(f"{name}: {value!r} contains a NUL or newline; refused")
    return value


@dataclass
class GitRunner:
    """Spawns git processes in a repository and counts them (benchmarks and tests read it)."""

    git: str = "git"
    timeout: float = DEFAULT_TIMEOUT_S
    spawned: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def overrides(self) -> dict[str, str]:
        """The variables every git process gets on top of this process's environment."""
        return pinned_environment(os.environ)

    def _env(self) -> dict[str, str]:
        return {**os.environ, **self.overrides()}

    def argv(self, args: Sequence[str], config: Sequence[str] = ()) -> list[str]:
        """The whole command line of git running ``args`` (GitPython's commands too), with
        ``config`` (``key=value`` settings of this repository) after the fixed ones."""
        settings = (*_CONFIG, *config)
        return [self.git, *(part for value in settings for part in ("-c", value)), *args]

    def count(self) -> None:
        """Count one git process (those GitPython starts for us as well)."""
        with self._lock:
            self.spawned += 1

    def not_found(self) -> GitNotFound:
        """The error for a git executable that is not there."""
        return GitNotFound(f"git is not installed or not on PATH (looked for {self.git!r})")

    def require(self) -> None:
        """GitNotFound unless the git executable exists (looked up on PATH, no process run)."""
        if shutil.which(self.git) is None:
            raise self.not_found()

    def _start(
        self, cwd: Path, args: Sequence[str], argv: list[str], stdin: int
    ) -> subprocess.Popen[bytes]:
        """git (``argv``, running ``args``) started in ``cwd``, noted as running (``stop_all``
        ends it with this process) and its address space bounded. While it starts, it is
        counted in _SPAWNING under this thread; once stop_all ran, it is killed as noted."""
        me = threading.get_ident()
        counted = False
        try:
            with _LIVE_LOCK:
                _SPAWNING[me] += 1
                counted = True
            try:
                proc = subprocess.Popen(
                    argv,
                    cwd=cwd,
                    stdin=stdin,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=self._env(),
                    preexec_fn=_preexec(),
                )
            except FileNotFoundError:
                raise self.not_found() from None
            except OSError as exc:
                raise GitFailed(f"git {args[0]} could not run in {cwd}: {exc.strerror}") from None
            with _LIVE_LOCK:
                _LIVE.add(proc)
                if _STOPPED:  # the process is ending: no git of ours outlives it
                    with suppress(OSError):
                        proc.kill()
            bound_process(proc)
        finally:
            if counted:
                with _LIVE_LOCK:
                    _SPAWNING[me] -= 1
                    if not _SPAWNING[me]:
                        del _SPAWNING[me]
                    _LIVE_LOCK.notify_all()
        return proc

    def run(
        self,
        cwd: Path,
        args: Sequence[str],
        *,
        stdin: bytes | None = None,
        ok_codes: tuple[int, ...] = (0,),
        timeout: float | None = None,
        config: Sequence[str] = (),
    ) -> subprocess.CompletedProcess[bytes]:
        """Run git to completion; a code outside ``ok_codes`` raises GitFailed (see failure)."""
        may_wait()
        self.count()
        argv = self.argv(args, config)
        # Never the server's own stdin (an editor's pipe): nothing but ours to read.
        proc = self._start(
            cwd, args, argv, subprocess.DEVNULL if stdin is None else subprocess.PIPE
        )
        with proc:
            try:
                out, err = proc.communicate(stdin, self.timeout if timeout is None else timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                raise GitFailed(
                    f"git {args[0]} timed out after {timeout or self.timeout:.0f}s"
                ) from None
            except OSError as exc:
                proc.kill()
                raise GitFailed(f"git {args[0]} could not run in {cwd}: {exc.strerror}") from None
            except BaseException:  # interrupted: no git left running (as subprocess.run)
                proc.kill()
                raise
            finally:
                _ended(proc)
        done = subprocess.CompletedProcess(argv, proc.returncode, out, err)
        if done.returncode not in ok_codes:
            raise in_repository(failure(args[0], done.stderr, f"exit {done.returncode}"), cwd)
        return done

    def version(self) -> str:
        """``git version X.Y.Z`` of the git this runner spawns (GitNotFound if there is none)."""
        done = self.run(Path.cwd(), ["--version"], timeout=10)
        return done.stdout.decode("utf-8", "replace").strip()

    @contextmanager
    def stream(
        self,
        cwd: Path,
        args: Sequence[str],
        stdin: int = subprocess.DEVNULL,
        config: Sequence[str] = (),
    ) -> Iterator[subprocess.Popen[bytes]]:
        """A running git whose stdout is read as it is produced; killed if the reader stops."""
        may_wait()
        self.count()
        proc = self._start(cwd, args, self.argv(args, config), stdin)
        timer = threading.Timer(self.timeout, proc.kill)
        timer.daemon = True
        timer.start()
        try:
            yield proc
        except GitFailed as exc:
            raise in_repository(exc, cwd) from None
        finally:
            timer.cancel()
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            _ended(proc)
            _close(proc.stdin)
            _close(proc.stdout)
            _close(proc.stderr)


def _close(handle: IO[bytes] | None) -> None:
    if handle is not None:
        handle.close()


def failure(command: str, stderr: bytes, status: str) -> GitFailed:
    """The error of a git that failed, in our words: ``git blame failed (exit 128): bad
    revision``. git's own words go to the debug log only; they may quote a file's contents."""
    said = stderr.decode("utf-8", "replace").strip()
    log.debug("git %s failed (%s): %s", command, status, said)
    lowered = stderr.lower()
    cause = next((ours for theirs, ours in _CAUSES if theirs in lowered), None)
    message = f"git {command} failed ({status})"
    return GitFailed(f"{message}: {cause}" if cause else message, cause)


def finish_stream(proc: subprocess.Popen[bytes], args: Sequence[str]) -> None:
    """After reading a stream to its end: raise GitFailed if git did not succeed."""
    code = proc.wait()
    if code != 0:
        stderr = proc.stderr.read() if proc.stderr else b""
        if code < 0:
            raise GitFailed(f"git {args[0]} was stopped (timeout or cancel)")
        raise failure(args[0], stderr, f"exit {code}")
