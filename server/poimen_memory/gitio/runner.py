"""Running git: never a shell, a fixed environment, a timeout, and a count of processes."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from poimen_memory.gitio.errors import GitFailed, GitNotFound, UnsafeArgument

__all__ = ["GitRunner", "check_not_option", "describe_failure", "finish_stream"]

DEFAULT_TIMEOUT_S = 60.0

# No pager, no prompts, no locks taken by read-only commands, stable (untranslated) messages.
_ENV_OVERRIDES: Mapping[str, str] = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_PAGER": "cat",
    "LC_ALL": "C",
    "LANGUAGE": "C",
}
# Per-process settings: UTF-8 names unquoted; no signature check (gpg.program is configurable).
_CONFIG = ("core.quotePath=false", "log.showSignature=false")


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
        return dict(_ENV_OVERRIDES)

    def _env(self) -> dict[str, str]:
        return {**os.environ, **_ENV_OVERRIDES}

    def argv(self, args: Sequence[str]) -> list[str]:
        """The whole command line of git running ``args`` (GitPython's commands too)."""
        return [self.git, *(part for value in _CONFIG for part in ("-c", value)), *args]

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

    def run(
        self,
        cwd: Path,
        args: Sequence[str],
        *,
        stdin: bytes | None = None,
        ok_codes: tuple[int, ...] = (0,),
        timeout: float | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run git to completion; a code outside ``ok_codes`` raises GitFailed with git's words."""
        self.count()
        try:
            done = subprocess.run(
                self.argv(args),
                cwd=cwd,
                input=stdin,
                capture_output=True,
                env=self._env(),
                timeout=self.timeout if timeout is None else timeout,
                check=False,
            )
        except FileNotFoundError:
            raise self.not_found() from None
        except subprocess.TimeoutExpired:
            raise GitFailed(
                f"git {args[0]} timed out after {timeout or self.timeout:.0f}s"
            ) from None
        except OSError as exc:
            raise GitFailed(f"git {args[0]} could not run in {cwd}: {exc.strerror}") from None
        if done.returncode not in ok_codes:
            raise GitFailed(_failure(args, done.returncode, done.stderr))
        return done

    def version(self) -> str:
        """``git version X.Y.Z`` of the git this runner spawns (GitNotFound if there is none)."""
        done = self.run(Path.cwd(), ["--version"], timeout=10)
        return done.stdout.decode("utf-8", "replace").strip()

    @contextmanager
    def stream(
        self, cwd: Path, args: Sequence[str], stdin: int = subprocess.DEVNULL
    ) -> Iterator[subprocess.Popen[bytes]]:
        """A running git whose stdout is read as it is produced; killed if the reader stops."""
        self.count()
        try:
            proc = subprocess.Popen(
                self.argv(args),
                cwd=cwd,
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self._env(),
            )
        except FileNotFoundError:
            raise self.not_found() from None
        except OSError as exc:
            raise GitFailed(f"git {args[0]} could not run in {cwd}: {exc.strerror}") from None
        timer = threading.Timer(self.timeout, proc.kill)
        timer.daemon = True
        timer.start()
        try:
            yield proc
        finally:
            timer.cancel()
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            _close(proc.stdin)
            _close(proc.stdout)
            _close(proc.stderr)


def _close(handle: IO[bytes] | None) -> None:
    if handle is not None:
        handle.close()


def describe_failure(command: str, stderr: bytes, otherwise: str) -> str:
    """One line for a user: git's last word on stderr (``otherwise`` if it said nothing)."""
    words = stderr.decode("utf-8", "replace").strip().splitlines()
    said = words[-1] if words else otherwise
    return f"git {command} failed: {said.removeprefix('fatal: ').removeprefix('error: ')}"


def _failure(args: Sequence[str], code: int, stderr: bytes) -> str:
    return describe_failure(args[0], stderr, f"exit status {code}")


def finish_stream(proc: subprocess.Popen[bytes], args: Sequence[str]) -> None:
    """After reading a stream to its end: raise GitFailed if git did not succeed."""
    code = proc.wait()
    if code != 0:
        stderr = proc.stderr.read() if proc.stderr else b""
        if code < 0:
            raise GitFailed(f"git {args[0]} was stopped (timeout or cancel)")
        raise GitFailed(_failure(args, code, stderr))
