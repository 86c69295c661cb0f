-- poimen-memory for Neovim (0.7 and newer): runs `mem lsp` for the files of git work trees,
-- shows code lenses, and adds :MemByCommit, :MemByAuthor, :MemQuery, :MemHere and
-- :MemRefresh, which show their results in a floating window or the quickfix list.
--
--   require("poimen_memory").setup({ settings = { project = "demo" } })
--
-- See :help poimen_memory.

local M = {}

local uv = vim.uv or vim.loop

-- Command ids of the server (server/poimen_memory/lsp/commands.py).
M.commands = {
  BY_GIT = "mem.byGit",
  BY_COMMIT = "mem.byCommit",
  BY_AUTHOR = "mem.byAuthor",
  QUERY = "mem.query",
  SHOW_MEMORIES = "mem.showMemories",
  REFRESH = "mem.refresh",
  PING = "mem.ping",
  REMEMBER = "mem.remember",
  WHY = "mem.why",
  BLAME = "mem.blame",
  STATUS = "mem.status",
  RESOLVE_PENDING = "mem.resolvePending",
}

local defaults = {
  -- The command that starts the server.
  cmd = { "mem", "lsp" },
  -- Server settings (the "poimenMemory" section): dsn, project, repo, hover = {...},
  -- codeLens = {...}, blame = {...}, logLevel. Sent as initializationOptions and
  -- answered on workspace/configuration.
  settings = {},
  -- nil: every file in a git work tree; else a list of filetypes.
  filetypes = nil,
  -- Where command results go: "float" or "quickfix".
  results = "float",
  -- Show and refresh code lenses (BufEnter, CursorHold, InsertLeave).
  codelens = true,
  -- The floating window: border and the largest share of the editor it takes.
  float = { border = "rounded", max_width = 0.8, max_height = 0.8 },
  -- Called as on_attach(client, bufnr) after the plugin's own attach work.
  on_attach = nil,
  -- Client capabilities (nil: Neovim's defaults).
  capabilities = nil,
  -- The client's name (one client per git root).
  name = "poimen-memory",
}

M.config = vim.deepcopy(defaults)

local state = {
  clients = {}, -- root -> client id (Neovim 0.7 has no vim.lsp.start to reuse them)
  last = nil, -- { heading, lines, result, items, root }
  warned = {},
}

local has_08 = vim.fn.has("nvim-0.8") == 1
local has_011 = vim.fn.has("nvim-0.11") == 1
-- The autocmd API's key for a buffer ("buffer" was renamed "buf" in 0.12).
local BUF = vim.fn.has("nvim-0.12") == 1 and "buf" or "buffer"

-- -- helpers ------------------------------------------------------------------------------

local function notify(msg, level)
  vim.notify("poimen-memory: " .. msg, level or vim.log.levels.INFO)
end

local function warn_once(key, msg)
  if not state.warned[key] then
    state.warned[key] = true
    notify(msg, vim.log.levels.WARN)
  end
end

local function present(value)
  return value ~= nil and value ~= vim.NIL
end

-- A Lua table that is encoded as a JSON object even when it is empty.
local function as_object(tbl)
  if type(tbl) ~= "table" then
    return tbl
  end
  if next(tbl) == nil then
    return vim.empty_dict()
  end
  local out = {}
  for k, v in pairs(tbl) do
    out[k] = as_object(v)
  end
  return out
end

local function client_request(client, method, params, handler, bufnr)
  if has_011 then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

local function client_stopped(client)
  if has_011 then
    return client:is_stopped()
  end
  return client.is_stopped()
end

-- The running poimen-memory clients (of one buffer when bufnr is given).
local function all_clients(bufnr)
  local clients
  if vim.lsp.get_clients then -- 0.10+
    clients = vim.lsp.get_clients(bufnr and { bufnr = bufnr } or nil)
  elseif has_08 then
    clients = vim.lsp.get_active_clients(bufnr and { bufnr = bufnr } or nil)
  elseif bufnr then -- 0.7: get_active_clients() takes no filter
    clients = vim.tbl_values(vim.lsp.buf_get_clients(bufnr))
  else
    clients = vim.lsp.get_active_clients()
  end
  local found = {}
  for _, client in ipairs(clients or {}) do
    if client.name == M.config.name then
      table.insert(found, client)
    end
  end
  table.sort(found, function(a, b)
    return a.id < b.id
  end)
  return found
end

-- -- roots and attaching --------------------------------------------------------------------

--- The root of the git work tree holding `path` (the nearest directory upward with a
--- `.git` directory or file), or nil. Works on Neovim 0.7 (no vim.fs).
function M.find_root(path)
  if path == nil or path == "" then
    return nil
  end
  local dir = vim.fn.fnamemodify(path, ":p")
  if vim.fn.isdirectory(dir) == 0 then
    dir = vim.fn.fnamemodify(dir, ":h")
  end
  dir = dir:gsub("[/\\]+$", "")
  if dir == "" then
    dir = "/"
  end
  while true do
    if uv.fs_stat(dir .. "/.git") then
      return dir
    end
    local parent = vim.fn.fnamemodify(dir, ":h")
    if parent == dir or parent == "" or parent == "." then
      return nil
    end
    dir = parent
  end
end

local function eligible(bufnr)
  if not vim.api.nvim_buf_is_valid(bufnr) or vim.bo[bufnr].buftype ~= "" then
    return nil
  end
  local name = vim.api.nvim_buf_get_name(bufnr)
  if name == "" or name:match("^%a[%w+.-]*://") then
    return nil -- unnamed, or a URI such as fugitive:// or oil://
  end
  local filetypes = M.config.filetypes
  if filetypes ~= nil and not vim.tbl_contains(filetypes, vim.bo[bufnr].filetype) then
    return nil
  end
  return name
end

-- Before 0.10 codelens.refresh() works on the current buffer only (and takes no options).
local function refresh_lenses(bufnr)
  if vim.api.nvim_get_current_buf() == bufnr or vim.fn.has("nvim-0.10") == 1 then
    pcall(vim.lsp.codelens.refresh, { bufnr = bufnr })
  end
end

local function setup_codelens(client, bufnr)
  local caps = client.server_capabilities or {}
  if not M.config.codelens or not caps.codeLensProvider then
    return
  end
  if type(vim.lsp.codelens.enable) == "function" then
    -- Newer Neovim keeps enabled lenses up to date by itself.
    if pcall(vim.lsp.codelens.enable, true, { bufnr = bufnr }) then
      return
    end
  end
  local group = vim.api.nvim_create_augroup("poimen_memory_codelens", { clear = false })
  vim.api.nvim_clear_autocmds({ group = group, [BUF] = bufnr })
  vim.api.nvim_create_autocmd({ "BufEnter", "CursorHold", "InsertLeave" }, {
    group = group,
    [BUF] = bufnr,
    callback = function()
      refresh_lenses(bufnr)
    end,
    desc = "poimen-memory: refresh code lenses",
  })
  refresh_lenses(bufnr)
end

local function show_memories_lens(command, ctx)
  -- A lens's command: {"uri", "lines"?}. Ask for the same memories with mem.byGit and show
  -- them here (the server's own mem.showMemories would show them as a long message).
  local arg = (command.arguments or {})[1] or {}
  local request = { uri = arg.uri }
  local heading
  if present(arg.lines) then
    request.lines = arg.lines
    heading = string.format("Memories of lines %d-%d", arg.lines[1], arg.lines[2])
  else
    request.line = 0
    heading = "Memories of this file"
  end
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  M.execute(M.commands.BY_GIT, request, function(result)
    M.show(heading, result, client and client.config.root_dir)
  end, { client = client, bufnr = ctx.bufnr })
end

local function client_config(root)
  local settings = as_object(M.config.settings or {})
  return {
    name = M.config.name,
    cmd = M.config.cmd,
    root_dir = root,
    workspace_folders = { { uri = vim.uri_from_fname(root), name = root } },
    init_options = { poimenMemory = settings },
    settings = { poimenMemory = settings },
    capabilities = M.config.capabilities,
    commands = { [M.commands.SHOW_MEMORIES] = show_memories_lens },
    on_attach = function(client, bufnr)
      setup_codelens(client, bufnr)
      if M.config.on_attach then
        M.config.on_attach(client, bufnr)
      end
    end,
  }
end

--- Attach the server to a buffer of a file in a git work tree (starting it for that root if
--- needed). Returns the client id, or nil when the buffer does not qualify.
function M.attach(bufnr)
  if bufnr == nil or bufnr == 0 then
    bufnr = vim.api.nvim_get_current_buf()
  end
  local name = eligible(bufnr)
  if not name then
    return nil
  end
  local root = M.find_root(name)
  if not root then
    return nil
  end
  local exe = M.config.cmd[1]
  if vim.fn.executable(exe) == 0 then
    warn_once("exe:" .. exe, string.format("%s is not executable; set cmd in setup() (:help poimen_memory-setup)", exe))
    return nil
  end
  local id
  if has_08 then
    id = vim.lsp.start(client_config(root), { bufnr = bufnr })
  else
    id = state.clients[root]
    local client = id and vim.lsp.get_client_by_id(id)
    if not client or client_stopped(client) then
      id = vim.lsp.start_client(client_config(root))
    end
    if id then
      vim.lsp.buf_attach_client(bufnr, id)
    end
  end
  state.clients[root] = id
  return id
end

--- The poimen-memory client for a buffer (default: the current one), else any running one.
function M.client(bufnr)
  local mine = all_clients(bufnr or vim.api.nvim_get_current_buf())
  if mine[1] then
    return mine[1]
  end
  return all_clients(nil)[1]
end

-- -- commands ---------------------------------------------------------------------------

--- Run a server command with one argument (a table sent as a JSON object); `callback`
--- gets the result. Errors are notified. opts: { client, bufnr }.
function M.execute(command, argument, callback, opts)
  opts = opts or {}
  local client = opts.client or M.client(opts.bufnr)
  if not client then
    notify("no server running: open a file of a git repository first", vim.log.levels.ERROR)
    return false
  end
  local params = { command = command, arguments = { as_object(argument) } }
  client_request(client, "workspace/executeCommand", params, function(err, result)
    if err then
      notify(string.format("%s: %s", command, err.message or vim.inspect(err)), vim.log.levels.ERROR)
      return
    end
    if callback then
      callback(result, client)
    end
  end, opts.bufnr or vim.api.nvim_get_current_buf())
  return true
end

local function run_lookup(command, argument, heading)
  M.execute(command, argument, function(result, client)
    M.show(heading, result, client.config.root_dir)
  end)
end

function M.by_commit(sha)
  sha = vim.trim(sha or "")
  if not sha:match("^%x+$") or #sha < 4 or #sha > 64 then
    notify("a commit id is 4 to 64 hex digits, got " .. vim.inspect(sha), vim.log.levels.ERROR)
    return
  end
  run_lookup(M.commands.BY_COMMIT, { commit_sha = sha:lower() }, "Memories of commit " .. sha:lower())
end

function M.by_author(author)
  author = vim.trim(author or "")
  if author == "" then
    notify("give an author's email or name", vim.log.levels.ERROR)
    return
  end
  run_lookup(M.commands.BY_AUTHOR, { author = author }, "Memories from commits by " .. author)
end

function M.query(text)
  text = vim.trim(text or "")
  if text == "" then
    notify("give words to search for", vim.log.levels.ERROR)
    return
  end
  run_lookup(M.commands.QUERY, { query = text }, "Memories matching " .. text)
end

--- The memories of the cursor line (or of lines `first`..`last`).
function M.here(first, last)
  local bufnr = vim.api.nvim_get_current_buf()
  first = first or vim.api.nvim_win_get_cursor(0)[1]
  last = last or first
  local argument = { uri = vim.uri_from_bufnr(bufnr) }
  local heading
  if first == last then
    argument.line = first
    heading = "Memories of line " .. first
  else
    argument.lines = { first, last }
    heading = string.format("Memories of lines %d-%d", first, last)
  end
  M.execute(M.commands.BY_GIT, argument, function(result, client)
    M.show(heading, result, client.config.root_dir)
  end, { bufnr = bufnr })
end

function M.refresh()
  M.execute(M.commands.REFRESH, vim.empty_dict(), function(result)
    notify(string.format("caches dropped (%s documents)", tostring(result and result.invalidated or 0)))
    refresh_lenses(vim.api.nvim_get_current_buf())
  end)
end

-- -- results ------------------------------------------------------------------------------

--- `file:line`, `file:start-end` or `file` -> file, first line, last line.
function M.parse_ref(ref)
  local file, a, b = ref:match("^(.*):(%d+)%-(%d+)$")
  if file then
    return file, tonumber(a), tonumber(b)
  end
  file, a = ref:match("^(.*):(%d+)$")
  if file then
    return file, tonumber(a), tonumber(a)
  end
  return ref, nil, nil
end

--- `src/kong/buffer.rs:42 (commit aa907e8) "Increase buffer" — Alice Smith <alice@org.test>, 2026-08-06`
function M.citation(node)
  if not present(node.git_ref) or not present(node.git_commit) then
    return nil
  end
  local c = node.git_commit
  local summary = vim.split(c.message, "\n", { plain = true })[1]
  return string.format(
    '%s (commit %s) "%s" — %s <%s>, %s',
    node.git_ref,
    c.sha:sub(1, 7),
    summary,
    c.author_name,
    c.author,
    c.date:sub(1, 10)
  )
end

local GROUPS = { { "L2", "Synthesis (L2)" }, { "L1", "Memories (L1)" }, { "L0", "Evidence (L0)" } }

--- A result (the response model) as Markdown lines: synthesis and memories first, then
--- the evidence, each with its brief, its text and its citation.
function M.render(heading, result)
  local nodes = (result and present(result.nodes)) and result.nodes or {}
  local lines = { "# " .. heading, "" }
  local count = #nodes == 1 and "1 memory" or (#nodes .. " memories")
  -- The repository, or the repositories (a list) when the memories come from several.
  local repo = result and result.repo
  if type(repo) == "table" then
    repo = table.concat(repo, ", ")
  end
  if type(repo) == "string" and repo ~= "" then
    count = count .. " · " .. repo
  end
  table.insert(lines, count)
  table.insert(lines, "")
  if #nodes == 0 then
    table.insert(lines, "No memories found.")
    return lines
  end
  local groups = vim.deepcopy(GROUPS)
  local known = { L0 = true, L1 = true, L2 = true }
  for _, node in ipairs(nodes) do
    if not known[node.level] then
      known[node.level] = true
      table.insert(groups, { node.level, node.level })
    end
  end
  for _, group in ipairs(groups) do
    local first = true
    for _, node in ipairs(nodes) do
      if node.level == group[1] then
        if first then
          table.insert(lines, "## " .. group[2])
          table.insert(lines, "")
          first = false
        end
        local body = vim.split(vim.trim(node.text), "\n", { plain = true })
        local brief = present(node.brief) and node.brief ~= "" and node.brief or body[1]
        table.insert(lines, "### " .. brief)
        table.insert(lines, "")
        if vim.trim(body[1]) == vim.trim(brief) then
          table.remove(body, 1) -- the heading says it already
        end
        if #body > 0 and vim.trim(table.concat(body, "\n")) ~= "" then
          vim.list_extend(lines, body)
          table.insert(lines, "")
        end
        local cite = M.citation(node)
        if cite then
          table.insert(lines, "— " .. cite)
          table.insert(lines, "")
        end
      end
    end
  end
  return lines
end

--- Quickfix items: evidence as file:line at its anchor's commit, memories as text.
function M.quickfix_items(result, root)
  local items = {}
  for _, node in ipairs((result and present(result.nodes)) and result.nodes or {}) do
    local brief = present(node.brief) and node.brief or node.text
    if present(node.git_ref) then
      local file, first, last = M.parse_ref(node.git_ref)
      local c = node.git_commit
      local where = present(c) and string.format(" (%s %s, %s)", c.sha:sub(1, 7), vim.split(c.message, "\n", { plain = true })[1], c.author_name)
        or ""
      table.insert(items, {
        filename = root and (root .. "/" .. file) or file,
        lnum = first or 1,
        end_lnum = last,
        text = node.level .. " " .. brief .. where,
      })
    else
      table.insert(items, { text = node.level .. " " .. brief, valid = 0 })
    end
  end
  return items
end

local function open_float(lines)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].bufhidden = "wipe"
  vim.bo[buf].filetype = "markdown"
  local opts = M.config.float or {}
  local columns, rows = vim.o.columns, vim.o.lines - vim.o.cmdheight
  local widest = 0
  for _, line in ipairs(lines) do
    widest = math.max(widest, vim.fn.strdisplaywidth(line))
  end
  local width = math.max(20, math.min(widest + 2, math.floor(columns * (opts.max_width or 0.8))))
  local height = math.max(1, math.min(#lines, math.floor(rows * (opts.max_height or 0.8))))
  local win = vim.api.nvim_open_win(buf, true, {
    relative = "editor",
    row = math.max(0, math.floor((rows - height) / 2) - 1),
    col = math.max(0, math.floor((columns - width) / 2)),
    width = width,
    height = height,
    style = "minimal",
    border = opts.border or "rounded",
  })
  vim.wo[win].wrap = true
  vim.wo[win].linebreak = true
  for _, key in ipairs({ "q", "<Esc>" }) do
    vim.keymap.set("n", key, function()
      if vim.api.nvim_win_is_valid(win) then
        vim.api.nvim_win_close(win, true)
      end
    end, { buffer = buf, nowait = true, silent = true, desc = "poimen-memory: close" })
  end
  return buf, win
end

--- Show a result as configured (float or quickfix); remembers it for M.last().
function M.show(heading, result, root)
  local lines = M.render(heading, result)
  local items = M.quickfix_items(result, root)
  state.last = { heading = heading, lines = lines, result = result, items = items, root = root }
  if M.config.results == "quickfix" then
    vim.fn.setqflist({}, " ", { title = heading, items = items })
    state.last.qf = true
    vim.cmd("copen")
  else
    local buf, win = open_float(lines)
    state.last.buf, state.last.win = buf, win
  end
end

--- The last result shown: { heading, lines, result, items, root, buf?, win?, qf? } or nil.
function M.last()
  return state.last
end

-- -- setup --------------------------------------------------------------------------------

local function define_commands()
  local cmd = vim.api.nvim_create_user_command
  cmd("MemByCommit", function(o)
    M.by_commit(o.args)
  end, { nargs = 1, desc = "poimen-memory: memories of a commit" })
  cmd("MemByAuthor", function(o)
    M.by_author(o.args)
  end, { nargs = "+", desc = "poimen-memory: memories from an author's commits" })
  cmd("MemQuery", function(o)
    M.query(o.args)
  end, { nargs = "+", desc = "poimen-memory: search the memories" })
  cmd("MemHere", function(o)
    if o.range > 0 then
      M.here(o.line1, o.line2)
    else
      M.here()
    end
  end, { range = true, desc = "poimen-memory: memories of the cursor line or range" })
  cmd("MemRefresh", function()
    M.refresh()
  end, { desc = "poimen-memory: drop caches and refresh lenses" })
end

function M.setup(opts)
  opts = opts or {}
  for _, key in ipairs({ "cmd", "settings", "filetypes", "float" }) do
    if opts[key] ~= nil and type(opts[key]) ~= "table" then
      error(string.format("poimen-memory: setup(): %s must be a table, got %s", key, vim.inspect(opts[key])), 2)
    end
  end
  if opts.cmd ~= nil and (type(opts.cmd[1]) ~= "string" or opts.cmd[1] == "") then
    error("poimen-memory: setup(): cmd must be a list starting with the program", 2)
  end
  if opts.results ~= nil and opts.results ~= "float" and opts.results ~= "quickfix" then
    error(string.format('poimen-memory: setup(): results must be "float" or "quickfix", got %s', vim.inspect(opts.results)), 2)
  end
  M.config = vim.tbl_deep_extend("force", vim.deepcopy(defaults), opts)
  if opts.filetypes ~= nil then
    M.config.filetypes = opts.filetypes -- a list, not merged
  end
  if opts.cmd ~= nil then
    M.config.cmd = opts.cmd
  end

  local group = vim.api.nvim_create_augroup("poimen_memory", { clear = true })
  if M.config.filetypes then
    vim.api.nvim_create_autocmd("FileType", {
      group = group,
      pattern = M.config.filetypes,
      callback = function(args)
        M.attach(args.buf)
      end,
      desc = "poimen-memory: attach",
    })
  else
    vim.api.nvim_create_autocmd({ "BufReadPost", "BufNewFile" }, {
      group = group,
      callback = function(args)
        M.attach(args.buf)
      end,
      desc = "poimen-memory: attach",
    })
  end
  define_commands()
  -- Buffers that were open before setup().
  for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(bufnr) then
      M.attach(bufnr)
    end
  end
end

return M
