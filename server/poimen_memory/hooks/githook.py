"""The opt-in git ``post-commit`` hook (``mem hooks install AGENT --git-post-commit``): after
each commit it starts ``mem hooks post-commit`` in the background, which places the pending
anchors the commit now holds, and logs what it did. It never fails or slows the commit.

A hook already there is kept: it is moved aside to ``post-commit.poimen-chained`` and ours
runs it last, with its arguments, stdin and exit status; uninstall moves it back, byte for
byte (a rename: content, mode and symlink alike).

Where: the hooks directory git uses (``core.hooksPath``, else ``.git/hooks``). A repository
is untrusted input, and its configuration may point ``core.hooksPath`` anywhere: a directory
shared by every repository (``~/.githooks``), or one the repository chose. We write only in the
git directory, or in the work tree where git ignores the file (husky's ``.husky/_``); never
where the hook would be committed, nor outside the repository."""

from __future__ import annotations

import contextlib
import os
import shlex
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from poimen_memory.errors import ConfigError
from poimen_memory.wiring import HooksDir

__all__ = [
    "CHAINED_SUFFIX",
    "GIT_HOOK",
    "GitHookChange",
    "git_hook_command",
    "is_our_git_hook",
    "plan_git_hook_install",
    "plan_git_hook_uninstall",
    "post_commit_script",
]

GIT_HOOK = "post-commit"
CHAINED_SUFFIX = ".poimen-chained"
_MARK = "# poimen-memory post-commit hook"
# Read this much of a hook to tell whether it is ours.
_HEAD_BYTES = 4096


def post_commit_script(invocation: Sequence[str], log: Path, options: Sequence[str]) -> str:
    """The hook: ``mem hooks post-commit`` detached (no stdin, output to the log, immune to
    the terminal's hangup and ^C), then the chained hook, if any, in its place (``exec``: its
    exit status is the hook's). git runs it at the work tree's root, with a relative
    GIT_INDEX_FILE that would mislead git commands run from elsewhere: unset."""
    command = shlex.join([*invocation, "hooks", "post-commit", *options])
    return f"""#!/bin/sh
{_MARK}: places the pending anchors this commit holds,
# in the background; it never fails or slows the commit. Added by
# `mem hooks install ... --git-post-commit`; `mem hooks uninstall ... --git-post-commit`
# removes it, and puts back the hook it runs after ({GIT_HOOK}{CHAINED_SUFFIX}).
mkdir -p {shlex.quote(str(log.parent))} 2>/dev/null
(
  unset GIT_INDEX_FILE GIT_PREFIX
  trap '' HUP INT
  exec {command}
) </dev/null >>{shlex.quote(str(log))} 2>&1 &
chained="$(dirname "$0")/{GIT_HOOK}{CHAINED_SUFFIX}"
if [ -x "$chained" ]; then
  exec "$chained" "$@"
fi
"""


def is_our_git_hook(path: Path) -> bool:
    """Whether the hook file at ``path`` is ours (a regular file with our mark)."""
    if path.is_symlink() or not path.is_file():
        return False
    try:
        with path.open("rb") as handle:
            return _MARK.encode() in handle.read(_HEAD_BYTES)
    except OSError:
        return False


def git_hook_command(script: str) -> list[str]:
    """The words of the command our hook's script runs (empty if it names none)."""
    for line in script.splitlines():
        if line.startswith("  exec ") and "hooks post-commit" in line:
            with contextlib.suppress(ValueError):
                return shlex.split(line.removeprefix("  exec "))
    return []


def _checked(hooks: HooksDir) -> Path:
    """The hooks directory, if it is a place we may write in; else ConfigError saying why."""
    where = f"core.hooksPath ({hooks.configured})" if hooks.configured else "the hooks directory"
    if hooks.in_git_dir:
        return hooks.path
    if hooks.in_work_tree and hooks.ignored:
        return hooks.path
    if hooks.in_work_tree:
        raise ConfigError(
            f"--git-post-commit: {where} is {hooks.path}, in the work tree, and git does not "
            f"ignore {GIT_HOOK} there: the hook would be committed; not changed"
        )
    raise ConfigError(
        f"--git-post-commit: {where} is {hooks.path}, outside this repository (shared with "
        "others, or chosen by its configuration): not changed. To use it, add "
        "`mem hooks post-commit &` to its post-commit hook yourself"
    )


@dataclass(frozen=True, slots=True)
class GitHookChange:
    """What an install or uninstall does to the hooks directory: the hook to write (None:
    none), whether ours is removed, whether the hook there moves aside or back, and a
    sentence saying so."""

    hook: Path
    message: str
    write: str | None = None
    remove: bool = False
    move_aside: bool = False
    move_back: bool = False

    @property
    def changed(self) -> bool:
        """Whether anything would be written, moved or removed."""
        return self.write is not None or self.remove or self.move_aside or self.move_back

    @property
    def chained(self) -> Path:
        """Where the hook we run after is kept."""
        return self.hook.with_name(self.hook.name + CHAINED_SUFFIX)

    def apply(self) -> None:
        """Carry it out; the new hook is written beside and renamed into place."""
        try:
            if self.move_aside:
                os.rename(self.hook, self.chained)
            if self.write is not None:
                _write_executable(self.hook, self.write)
            if self.remove:
                self.hook.unlink()
            if self.move_back:
                os.rename(self.chained, self.hook)
        except OSError as exc:
            raise ConfigError(f"{self.hook}: cannot be changed: {exc.strerror or exc}") from None


def _write_executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temp, 0o777 & ~umask | 0o700)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def plan_git_hook_install(hooks: HooksDir, script: str) -> GitHookChange:
    """Put our post-commit hook in place, the one there (if any) moved aside to be run after
    ours; ours already there is brought up to date."""
    hook = _checked(hooks) / GIT_HOOK
    chained = hook.with_name(hook.name + CHAINED_SUFFIX)
    ours = is_our_git_hook(hook)
    exists = hook.exists() or hook.is_symlink()
    kept = chained.exists() or chained.is_symlink()
    if not ours and exists and kept:
        raise ConfigError(f"--git-post-commit: {hook} and {chained} both exist; move one away")
    if not exists and kept:
        raise ConfigError(
            f"--git-post-commit: {chained} is left from an earlier install without its hook; "
            f"move it back to {hook} (or delete it) first"
        )
    if ours and hook.read_text(encoding="utf-8") == script:
        return GitHookChange(hook, f"the git {GIT_HOOK} hook is already in {hook}")
    if ours:
        return GitHookChange(hook, f"updated the git {GIT_HOOK} hook {hook}", write=script)
    if exists:
        return GitHookChange(
            hook,
            f"installed the git {GIT_HOOK} hook {hook}; the hook that was there runs after it, "
            f"from {chained}",
            write=script,
            move_aside=True,
        )
    return GitHookChange(hook, f"installed the git {GIT_HOOK} hook {hook}", write=script)


def plan_git_hook_uninstall(hooks: HooksDir) -> GitHookChange:
    """Remove our post-commit hook, and move back the hook it ran after."""
    hook = hooks.path / GIT_HOOK
    chained = hook.with_name(hook.name + CHAINED_SUFFIX)
    if not is_our_git_hook(hook):
        return GitHookChange(hook, f"no poimen-memory git {GIT_HOOK} hook in {hooks.path}")
    back = chained.exists() or chained.is_symlink()
    restored = f"; the hook it ran after is back in {hook}" if back else ""
    return GitHookChange(
        hook, f"removed the git {GIT_HOOK} hook {hook}{restored}", remove=True, move_back=back
    )
