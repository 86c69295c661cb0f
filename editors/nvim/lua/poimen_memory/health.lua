-- :checkhealth poimen_memory — the Neovim version, the server command, the running servers,
-- and whether their memory store answers.

local M = {}

local health = vim.health or require("health")
local start = health.start or health.report_start
local ok = health.ok or health.report_ok
local warn = health.warn or health.report_warn
local err = health.error or health.report_error
local info = health.info or health.report_info

local function request_sync(client, method, params)
  if vim.fn.has("nvim-0.11") == 1 then
    return client:request_sync(method, params, 5000)
  end
  return client.request_sync(method, params, 5000)
end

function M.check()
  start("poimen-memory")
  local v = vim.version()
  local version = string.format("%d.%d.%d", v.major, v.minor, v.patch)
  if vim.fn.has("nvim-0.7") == 1 then
    ok("Neovim " .. version)
  else
    err("Neovim " .. version .. ": 0.7 or newer is needed")
  end

  local pm = require("poimen_memory")
  local cmd = pm.config.cmd
  if vim.fn.executable(cmd[1]) == 1 then
    ok(string.format("server command: %s (%s)", table.concat(cmd, " "), vim.fn.exepath(cmd[1])))
  else
    err(string.format("%s is not executable", cmd[1]), {
      "pip install poimen-memory",
      'or set cmd in setup(), e.g. { "/path/to/venv/bin/python", "-m", "poimen_memory.cli", "lsp" }',
    })
  end

  local get = vim.lsp.get_clients or vim.lsp.get_active_clients
  local running = 0
  for _, client in ipairs(get()) do
    if client.name == pm.config.name then
      running = running + 1
      local root = client.config.root_dir or "?"
      local ping = request_sync(client, "workspace/executeCommand", { command = pm.commands.PING, arguments = {} })
      if ping and ping.result and ping.result.version then
        ok(string.format("server %d for %s answers: poimen-memory %s", client.id, root, ping.result.version))
      else
        warn(string.format("server %d for %s does not answer mem.ping: %s", client.id, root, vim.inspect(ping and ping.err)))
      end
      local probe = request_sync(client, "workspace/executeCommand", {
        command = pm.commands.QUERY,
        arguments = { { query = "poimen", limit = 1, project = "poimen-memory-probe" } },
      })
      if probe and probe.result then
        ok("the memory store answers")
      else
        local message = probe and probe.err and probe.err.message or "no answer"
        err("the memory store does not answer: " .. message, { "check the dsn setting (:help poimen_memory-setup)" })
      end
    end
  end
  if running == 0 then
    info("no poimen-memory server is running: open a file of a git repository")
  end
end

return M
