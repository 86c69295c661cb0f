"""The Emacs client (editors/emacs/poimen-memory.el) in a real Emacs (Debian's emacs-nox with
elpa-eglot, which editors/ci-setup.sh installs): it byte-compiles without warnings, its
commands show the memories in the *poimen-memory* buffer through a server of their own, and
through Eglot once `poimen-memory-eglot-setup' has made Eglot run the server.

And the Helix configuration (editors/helix): valid TOML whose settings the server accepts,
with poimen-memory beside each language's own server. (No Helix can be installed here.)"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from poimen_memory.lsp import commands
from poimen_memory.lsp.config import SECTION, SETTINGS, parse_config

from ..editors import require_program
from .conftest import PROJECT, World

EDITORS = Path(__file__).resolve().parents[2] / "editors"
EL = EDITORS / "emacs" / "poimen-memory.el"

PRELUDE = r"""
(require 'json)
(defvar poimen-test-report nil)
(defun poimen-test-record (key value) (push (cons key value) poimen-test-report))
(defun poimen-test-finish ()
  (with-temp-file (getenv "POIMEN_EMACS_OUT")
    (insert (json-encode poimen-test-report))))
(defun poimen-test-results ()
  (with-current-buffer "*poimen-memory*" (buffer-substring-no-properties (point-min) (point-max))))
(add-to-list 'load-path (getenv "POIMEN_EMACS_DIR"))
(require 'poimen-memory)
(setq poimen-memory-command (list (getenv "POIMEN_PYTHON") "-m" "poimen_memory.cli" "lsp"))
(setq poimen-memory-settings (list :dsn (getenv "POIMEN_TEST_DSN") :project (getenv "POIMEN_PROJECT")))
"""

COMMANDS_EL = (
    PRELUDE
    + r"""
(condition-case err
    (let ((default-directory (file-name-as-directory (getenv "POIMEN_ROOT"))))
      (poimen-memory-by-commit (getenv "POIMEN_SHA"))
      (poimen-test-record "by_commit" (poimen-test-results))
      (poimen-test-record "mode" (with-current-buffer "*poimen-memory*" (symbol-name major-mode)))
      ;; The citation is a button that visits the cited line.
      (with-current-buffer "*poimen-memory*"
        (goto-char (point-min))
        (forward-button 1)
        (poimen-test-record "button" (button-label (button-at (point))))
        (push-button)
        (poimen-test-record "visited" (list (buffer-file-name) (line-number-at-pos))))
      (poimen-memory-by-author "ALICE@org.test")
      (poimen-test-record "by_author" (poimen-test-results))
      (poimen-memory-query "BODY_BUFFER")
      (poimen-test-record "query" (poimen-test-results))
      (find-file (getenv "POIMEN_FILE"))
      (goto-char (point-min))
      (forward-line 41)
      (poimen-memory-here)
      (poimen-test-record "here" (poimen-test-results))
      (poimen-test-record "bad" (condition-case e (progn (poimen-memory-by-commit "zz") "no error")
                                  (user-error (error-message-string e))))
      (poimen-test-record "refresh" (plist-get (poimen-memory-execute 'refresh nil) :invalidated))
      (poimen-test-record "servers" (hash-table-count poimen-memory--connections))
      (poimen-memory-shutdown)
      (poimen-test-record "after_shutdown" (hash-table-count poimen-memory--connections)))
  (error (poimen-test-record "error" (format "%S" err))))
(poimen-test-finish)
"""
)

EGLOT_EL = (
    PRELUDE
    + r"""
(condition-case err
    (progn
      (setq poimen-memory-modes '(fundamental-mode))
      (poimen-memory-eglot-setup)
      (poimen-test-record "entry" (format "%S" (car eglot-server-programs)))
      (find-file (getenv "POIMEN_FILE"))
      (apply #'eglot (eglot--guess-contact))
      (let ((deadline (+ (float-time) 30)))
        (while (and (not (eglot-current-server)) (< (float-time) deadline))
          (accept-process-output nil 0.1)))
      (let ((server (eglot-current-server)))
        (poimen-test-record "eglot" (and server t))
        (let ((hover (jsonrpc-request
                      server :textDocument/hover
                      (list :textDocument (list :uri (poimen-memory--uri (buffer-file-name)))
                            :position (list :line 41 :character 0)))))
          (poimen-test-record "hover" (plist-get (plist-get hover :contents) :value)))
        (goto-char (point-min))
        (forward-line 41)
        (poimen-memory-here)
        (poimen-test-record "here" (poimen-test-results))
        (poimen-test-record "used_eglot" (eq poimen-memory-last-connection server))
        (poimen-test-record "own_servers" (hash-table-count poimen-memory--connections))
        (eglot-shutdown server)))
  (error (poimen-test-record "error" (format "%S" err))))
(poimen-test-finish)
"""
)


def _emacs() -> str:
    return require_program("emacs")


def _run(world: World, tmp_path: Path, script: str) -> dict[str, Any]:
    path = tmp_path / "test.el"
    path.write_text(script)
    out = tmp_path / "out.json"
    env = {
        **world.env,
        "POIMEN_CACHE_DIR": str(tmp_path / "cache"),
        "POIMEN_EMACS_DIR": str(EL.parent),
        "POIMEN_EMACS_OUT": str(out),
        "POIMEN_PYTHON": sys.executable,
        "POIMEN_ROOT": str(world.kong.root),
        "POIMEN_FILE": str(world.kong.root / "src" / "kong" / "buffer.rs"),
        "POIMEN_SHA": world.kong.commits["abc123"],
        "POIMEN_TEST_DSN": world.dsn,
        "POIMEN_PROJECT": PROJECT,
        "HOME": str(tmp_path),
    }
    # --batch loads no init file, but Debian's site-start, which puts elpa-eglot on the path.
    done = subprocess.run(
        [_emacs(), "--batch", "-l", str(path)],
        env=env, capture_output=True, text=True, timeout=120, check=False, cwd=world.kong.root,
    )  # fmt: skip
    assert out.exists(), f"emacs wrote nothing: {done.stdout}\n{done.stderr}"
    report = json.loads(out.read_text())
    assert "error" not in report, f"{report['error']}\n{done.stderr}"
    return report


@pytest.mark.slow
def test_byte_compiles_without_warnings(tmp_path: Path) -> None:
    copy = tmp_path / EL.name
    shutil.copy(EL, copy)
    done = subprocess.run(
        [_emacs(), "--batch", "--eval", "(setq byte-compile-error-on-warn t)", "-f", "batch-byte-compile", str(copy)],
        capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert copy.with_suffix(".elc").exists(), done.stderr


def test_command_ids_mirror_the_server() -> None:
    source = EL.read_text("utf-8")
    block = source[source.index("(defconst poimen-memory-server-commands") :]
    block = block[: block.index('"The server')]
    ids = tuple(re.findall(r'\. "(mem\.[A-Za-z]+)"\)', block))
    assert ids == commands.ALL


@pytest.mark.slow
def test_commands_show_memories(world: World, tmp_path: Path) -> None:
    report = _run(world, tmp_path, COMMANDS_EL)
    sha = world.kong.commits["abc123"]
    cite = f'src/kong/buffer.rs:42 (commit {sha[:7]}) "Increase buffer" — Alice Smith <alice@org.test>, 2026-08-06'
    shown = report["by_commit"]
    assert shown.startswith(f"Memories of commit {sha}\n"), shown
    assert "Raised BODY_BUFFER from 8MB to 16MB" in shown, shown
    assert "Uploads of 16MB now pass" in shown
    assert cite in shown
    assert shown.index("Memories (L1)") < shown.index("Evidence (L0)")
    assert report["mode"] == "poimen-memory-results-mode"
    assert report["button"] == cite
    assert report["visited"] == [str(world.kong.root / "src" / "kong" / "buffer.rs"), 42]
    for key in ("by_author", "query", "here"):
        assert "Raised BODY_BUFFER from 8MB to 16MB" in report[key], (key, report[key])
    assert report["here"].startswith("Memories of line 42\n")
    assert "a commit id is 4 to 64 hex digits" in report["bad"]
    assert isinstance(report["refresh"], int)
    assert report["servers"] == 1  # one server for the work tree, reused by every command
    assert report["after_shutdown"] == 0


@pytest.mark.slow
def test_eglot_runs_the_server_and_the_commands_use_it(world: World, tmp_path: Path) -> None:
    report = _run(world, tmp_path, EGLOT_EL)
    assert report["entry"].startswith("((fundamental-mode) "), report["entry"]
    assert ":initializationOptions poimen-memory-initialization-options" in report["entry"]
    assert report["eglot"] is True
    # Eglot 1.9 without markdown-mode asks for plain text, and gets it.
    assert "Raised BODY_BUFFER from 8MB to 16MB" in report["hover"], report["hover"]
    assert "Increase buffer — Alice Smith, 2026-08-06" in report["hover"]
    assert "Raised BODY_BUFFER from 8MB to 16MB" in report["here"]
    assert report["used_eglot"] is True
    assert report["own_servers"] == 0


def _helix_checks(config: dict[str, object]) -> None:
    server = config["language-server"]["poimen-memory"]  # type: ignore[index]
    assert server["command"] == "mem"
    assert server["args"] == ["lsp"]
    settings = server["config"]
    assert set(settings) == {SECTION}
    parsed, problems = parse_config(settings)
    assert problems == []
    assert parsed.project == "demo"
    languages = config["language"]  # type: ignore[index]
    assert languages
    for language in languages:
        servers = language["language-servers"]
        assert servers[-1] == "poimen-memory", language
        assert len(servers) >= 2, language  # beside the language's own server


def test_helix_languages_toml() -> None:
    text = (EDITORS / "helix" / "languages.toml").read_text("utf-8")
    config = tomllib.loads(text)
    _helix_checks(config)
    # Every server setting is in the example, set or as a commented line.
    settings = config["language-server"]["poimen-memory"]["config"][SECTION]
    shown = {
        f"{key}.{sub}" if isinstance(value, dict) else key
        for key, value in settings.items()
        for sub in (value if isinstance(value, dict) else [None])
    }
    for key in SETTINGS:
        assert key in shown or f"# {key} = " in text, key


@pytest.mark.parametrize("doc", ["editors/helix/README.md", "README.md"])
def test_helix_snippets_in_the_docs(doc: str) -> None:
    text = (EDITORS.parent / doc).read_text("utf-8")
    block = re.search(r"```toml\n(\[language-server\.poimen-memory\].*?)```", text, re.DOTALL)
    assert block, f"no languages.toml snippet in editors/{doc}"
    _helix_checks(tomllib.loads(block.group(1)))
