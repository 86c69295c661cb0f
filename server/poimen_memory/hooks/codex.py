"""What the Codex CLI is to the hook, as its source defines it (openai/codex:
``codex-rs/config/src/hook_config.rs``, ``codex-rs/hooks/src/engine/discovery.rs``,
``codex-rs/features/src/lib.rs``):

- hooks are read from ``hooks.json`` beside each config layer: the user's ``$CODEX_HOME``
  (``~/.codex``) and a project's ``.codex/`` (loaded only when Codex trusts the project);
  ``{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": ..., "timeout": s}]}]}}``,
  the same shape as Claude Code's;
- the feature flag is ``[features] hooks`` in ``config.toml`` (``codex_hooks`` before):
  on by default; ``false`` turns every hook off;
- Codex runs a hook that is not managed only after the user trusted it (``/hooks``), per
  hash of its definition: a new or changed hook waits for that review.

Codex has no local scope: its project scope is ``.codex/hooks.json``, which teams commit."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Literal

__all__ = [
    "CODEX",
    "CODEX_EVENTS",
    "CODEX_HOOK_WORDS",
    "CODEX_SCOPES",
    "CodexScope",
    "codex_home",
    "codex_hooks_path",
    "hooks_turned_off",
]

CODEX = "codex"
# Codex's events after which the rollout holds a finished turn, or a subagent's work.
CODEX_EVENTS = ("Stop", "SubagentStop")
CODEX_HOOK_WORDS = ("hooks", "run", CODEX)

CodexScope = Literal["project", "user"]
CODEX_SCOPES: tuple[CodexScope, ...] = ("project", "user")
# The feature flag under [features], and the name it had before.
FEATURE_KEYS = ("hooks", "codex_hooks")


def codex_home() -> Path:
    """Codex's user directory: ``$CODEX_HOME``, else ``~/.codex``."""
    configured = os.environ.get("CODEX_HOME")
    return Path(configured).expanduser() if configured else Path.home() / ".codex"


def codex_hooks_path(scope: CodexScope, project_root: Path | None) -> Path:
    """The hooks file of a scope: ``.codex/hooks.json`` in the project, or the user's."""
    if scope == "user":
        return codex_home() / "hooks.json"
    assert project_root is not None
    return project_root / ".codex" / "hooks.json"


def hooks_turned_off(config: Path) -> str | None:
    """The setting in a Codex ``config.toml`` that turns hooks off (``[features] hooks =
    false``), as a sentence; None when hooks are on there (the default) or it is unreadable."""
    try:
        data = tomllib.loads(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    features = data.get("features")
    if not isinstance(features, dict):
        return None
    for key in FEATURE_KEYS:
        if features.get(key) is False:
            return f"{config} sets [features] {key} = false: Codex runs no hook until it is removed"
    return None
