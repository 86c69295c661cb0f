/**
 * Command ids.
 *
 * The first block mirrors server/poimen_memory/lsp/commands.py: the language server's
 * workspace/executeCommand commands (tests/test_vscode_extension.py checks that the two
 * lists agree). The second block is this extension's own palette commands.
 */

// -- the server's commands (workspace/executeCommand) -----------------------------------
export const BY_GIT = "mem.byGit";
export const BY_COMMIT = "mem.byCommit";
export const BY_AUTHOR = "mem.byAuthor";
export const QUERY = "mem.query";
export const SHOW_MEMORIES = "mem.showMemories";
export const REFRESH = "mem.refresh";
export const PING = "mem.ping";
export const REMEMBER = "mem.remember";
export const WHY = "mem.why";
export const BLAME = "mem.blame";
export const STATUS = "mem.status";
export const RESOLVE_PENDING = "mem.resolvePending";

export const ALL = [
  BY_GIT,
  BY_COMMIT,
  BY_AUTHOR,
  QUERY,
  SHOW_MEMORIES,
  REFRESH,
  PING,
  REMEMBER,
  WHY,
  BLAME,
  STATUS,
  RESOLVE_PENDING,
] as const;

export type ServerCommand = (typeof ALL)[number];

// -- the extension's palette commands (package.json contributes.commands) ----------------
export const PALETTE = {
  byCommit: "poimenMemory.byCommit",
  byAuthor: "poimenMemory.byAuthor",
  query: "poimenMemory.query",
  refresh: "poimenMemory.refresh",
  checkStore: "poimenMemory.checkStore",
  restartServer: "poimenMemory.restartServer",
  showOutput: "poimenMemory.showOutput",
} as const;
