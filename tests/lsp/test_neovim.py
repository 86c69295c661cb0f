"""A real editor: headless Neovim opens a file of the fixture repository with the server
attached, asks for a hover on line 42 and writes what it got to a file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ..editors import require_program
from .conftest import PROJECT, World

pytestmark = pytest.mark.slow

HOVER_LUA = r"""
local file, out = vim.env.POIMEN_NVIM_FILE, vim.env.POIMEN_NVIM_OUT
vim.cmd('edit ' .. vim.fn.fnameescape(file))
local bufnr = vim.api.nvim_get_current_buf()
local client_id = vim.lsp.start_client({
  name = 'poimen-memory',
  cmd = { vim.env.POIMEN_PYTHON, '-m', 'poimen_memory.cli', 'lsp' },
  root_dir = vim.env.POIMEN_ROOT,
  init_options = { poimenMemory = { dsn = vim.env.POIMEN_TEST_DSN, project = vim.env.POIMEN_PROJECT } },
})
vim.lsp.buf_attach_client(bufnr, client_id)
local ready = vim.wait(20000, function()
  local c = vim.lsp.get_client_by_id(client_id)
  return c ~= nil and c.server_capabilities ~= nil and c.server_capabilities.hoverProvider ~= nil
end, 50)
local text = ready and '' or 'NOT INITIALIZED'
if ready then
  local params = { textDocument = { uri = vim.uri_from_bufnr(bufnr) }, position = { line = 41, character = 0 } }
  local responses = vim.lsp.buf_request_sync(bufnr, 'textDocument/hover', params, 20000)
  for _, res in pairs(responses or {}) do
    if res.result and res.result.contents then text = text .. (res.result.contents.value or '') end
    if res.err then text = text .. 'ERROR ' .. vim.inspect(res.err) end
  end
end
local f = io.open(out, 'w'); f:write(text); f:close()
vim.cmd('qa!')
"""


def run_nvim(
    world: World, tmp_path: Path, lua: str, extra_env: dict[str, str] | None = None
) -> str:
    nvim = require_program("nvim")
    script = tmp_path / "test.lua"
    script.write_text(lua)
    out = tmp_path / "out.txt"
    env = {
        **world.env,
        "POIMEN_CACHE_DIR": str(tmp_path / "cache"),
        "POIMEN_NVIM_FILE": str(world.kong.root / "src" / "kong" / "buffer.rs"),
        "POIMEN_NVIM_OUT": str(out),
        "POIMEN_PYTHON": sys.executable,
        "POIMEN_ROOT": str(world.kong.root),
        "POIMEN_TEST_DSN": world.dsn,
        "POIMEN_PROJECT": PROJECT,
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "HOME": str(tmp_path),
        **(extra_env or {}),
    }
    done = subprocess.run(
        [nvim, "--headless", "-u", "NONE", "-i", "NONE", "-c", f"luafile {script}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
        cwd=world.kong.root,
    )
    assert out.exists(), f"neovim wrote nothing: {done.stdout}\n{done.stderr}"
    return out.read_text()


def test_headless_neovim_hover_shows_the_memory(world: World, tmp_path: Path) -> None:
    text = run_nvim(world, tmp_path, HOVER_LUA)
    assert "Raised BODY\\_BUFFER from 8MB to 16MB" in text, text
    assert "Increase buffer" in text
    assert "Alice Smith" in text
