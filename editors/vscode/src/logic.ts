/**
 * The extension's pure logic: settings to initializationOptions, how to launch the server,
 * command arguments, the status bar text and the rendering of results as Markdown.
 *
 * Nothing here imports "vscode", so it runs (and is tested) under plain Node.
 */

import * as commands from "./commands";

/** The configuration section, on the wire and in VS Code's settings. */
export const SECTION = "poimenMemory";

/** What the server puts in hovers and command errors while the store does not answer. */
export const UNREACHABLE_MARKER = "memory store unreachable";

/** JSON-RPC InternalError: the server's answer to a command while the store is down. */
export const INTERNAL_ERROR = -32603;

/**
 * Every server setting, as its key below the section. Mirrors the keys of
 * server/poimen_memory/lsp/config.py (_KEYS); package.json declares each one.
 */
export const SERVER_SETTINGS = [
  "dsn",
  "project",
  "repo",
  "hover.enabled",
  "hover.excerptLength",
  "hover.markup",
  "hover.history",
  "codeLens.enabled",
  "codeLens.fileSummary",
  "blame.maxFileBytes",
  "blame.maxFileLines",
  "blame.detectMoves",
  "blame.sharedCache",
  "logLevel",
] as const;

/** Settings that only the extension reads: how it starts the server. */
export const LAUNCH_SETTINGS = ["server.command", "server.args", "server.python"] as const;

/**
 * Settings a workspace (a repository's `.vscode/settings.json`, a `.code-workspace` file) may
 * not choose: where memories are sent and read from (`dsn`), and the program that runs as the
 * server (`server.*`). They are read from the user's settings (local or remote) and the
 * defaults only, unless the user, in their own settings, sets `ALLOW_WORKSPACE`.
 */
export const USER_ONLY_SETTINGS = ["dsn", ...LAUNCH_SETTINGS] as const;

/** The user setting that lets workspaces choose the USER_ONLY_SETTINGS after all. */
export const ALLOW_WORKSPACE = "allowWorkspaceStore";

/** Where a setting's values come from: VS Code's `WorkspaceConfiguration.inspect`. */
export interface Inspected {
  defaultValue?: unknown;
  globalValue?: unknown;
  workspaceValue?: unknown;
  workspaceFolderValue?: unknown;
}

/** Inspects one setting by its key below the section; undefined for an unknown key. */
export type Inspector = (key: string) => Inspected | undefined;

/** A reader that honours only the user's choice of the USER_ONLY_SETTINGS, and what it left out. */
export interface GuardedSettings {
  read: Reader;
  /** The keys a workspace set and that were left out, each with the section. */
  ignored: string[];
}

function fromWorkspace(seen: Inspected | undefined): boolean {
  return seen?.workspaceValue !== undefined || seen?.workspaceFolderValue !== undefined;
}

/**
 * ``read`` with the USER_ONLY_SETTINGS taken from the user's settings, else their defaults,
 * whatever a workspace says, unless the user's own settings set `ALLOW_WORKSPACE` to true
 * (a workspace setting it counts for nothing).
 */
export function userChosen(read: Reader, inspect: Inspector): GuardedSettings {
  if (inspect(ALLOW_WORKSPACE)?.globalValue === true) {
    return { read, ignored: [] };
  }
  const guarded = new Set<string>(USER_ONLY_SETTINGS);
  const ignored = USER_ONLY_SETTINGS.filter((key) => fromWorkspace(inspect(key))).map(
    (key) => `${SECTION}.${key}`,
  );
  return {
    read: (key) => {
      if (!guarded.has(key)) {
        return read(key);
      }
      const seen = inspect(key);
      return seen?.globalValue !== undefined ? seen.globalValue : seen?.defaultValue;
    },
    ignored,
  };
}

/** The warning shown when a workspace's choice of the store or the server was left out. */
export function ignoredMessage(ignored: readonly string[]): string | undefined {
  if (ignored.length === 0) {
    return undefined;
  }
  return (
    `poimen-memory: this workspace sets ${ignored.join(", ")}, which only your user settings ` +
    `may set (a repository could send your memories to its own store, or run its own program): ` +
    `ignored. To let workspaces choose them, set ${SECTION}.${ALLOW_WORKSPACE} in your user settings.`
  );
}

/** The module the `server.python` setting runs (`python -m poimen_memory.cli lsp`). */
export const PYTHON_MODULE_ARGS = ["-m", "poimen_memory.cli", "lsp"] as const;

export type JsonValue = null | boolean | number | string | JsonValue[] | JsonObject;
export interface JsonObject {
  [key: string]: JsonValue;
}

/** Reads one setting by its key below the section; undefined when it has no value. */
export type Reader = (key: string) => unknown;

function toJson(value: unknown): JsonValue {
  if (value === null || typeof value === "boolean" || typeof value === "string") {
    return value;
  }
  if (typeof value === "number") {
    return Number.isFinite(value) ? value : null;
  }
  // Objects and arrays from VS Code's configuration are plain JSON underneath.
  return JSON.parse(JSON.stringify(value)) as JsonValue;
}

/**
 * The server's settings as one nested object (`{"hover": {"enabled": false}, ...}`), with
 * only the keys the server knows: the launch settings and anything else a user typed
 * under the section stay out, so the server never reports them as unknown.
 */
export function serverSettings(read: Reader): JsonObject {
  const out: JsonObject = {};
  for (const key of SERVER_SETTINGS) {
    const value = read(key);
    if (value === undefined) {
      continue;
    }
    const path = key.split(".");
    let node = out;
    for (const part of path.slice(0, -1)) {
      const next = node[part];
      if (next === undefined || next === null || typeof next !== "object" || Array.isArray(next)) {
        node[part] = {};
      }
      node = node[part] as JsonObject;
    }
    node[path[path.length - 1]] = toJson(value);
  }
  return out;
}

/** The initializationOptions the server reads: `{"poimenMemory": {...nested...}}`. */
export function initializationOptions(read: Reader): JsonObject {
  return { [SECTION]: serverSettings(read) };
}

/** The didChangeConfiguration payload: the same shape as the initializationOptions. */
export function configurationChange(read: Reader): { settings: JsonObject } {
  return { settings: initializationOptions(read) };
}

export interface Launch {
  command: string;
  args: string[];
  /** Settings that were ignored, each naming the key and the value. */
  problems: string[];
}

function nonEmpty(value: unknown): string | undefined {
  return typeof value === "string" && value.trim() !== "" ? value.trim() : undefined;
}

/** `~/x` and `~` to the home directory; anything else unchanged. */
export function expandHome(path: string, home: string): string {
  if (path === "~") {
    return home;
  }
  if (path.startsWith("~/")) {
    return home.replace(/\/+$/, "") + path.slice(1);
  }
  return path;
}

/**
 * How to start the server: `server.python -m poimen_memory.cli lsp` when `server.python`
 * is set, else `server.command server.args...` (default `mem lsp`).
 */
export function serverLaunch(read: Reader, home: string): Launch {
  const problems: string[] = [];
  const python = read("server.python");
  if (python !== undefined && python !== null && nonEmpty(python) === undefined) {
    problems.push(`${SECTION}.server.python: expected a path, got ${JSON.stringify(python)}`);
  }
  const pythonPath = nonEmpty(python);
  if (pythonPath !== undefined) {
    return { command: expandHome(pythonPath, home), args: [...PYTHON_MODULE_ARGS], problems };
  }
  const rawCommand = read("server.command");
  let command = nonEmpty(rawCommand);
  if (command === undefined) {
    if (rawCommand !== undefined && rawCommand !== null) {
      problems.push(
        `${SECTION}.server.command: expected a command, got ${JSON.stringify(rawCommand)}; using "mem"`,
      );
    }
    command = "mem";
  }
  const rawArgs = read("server.args");
  let args = ["lsp"];
  if (Array.isArray(rawArgs) && rawArgs.every((a) => typeof a === "string")) {
    args = [...rawArgs];
  } else if (rawArgs !== undefined && rawArgs !== null) {
    problems.push(
      `${SECTION}.server.args: expected a list of strings, got ${JSON.stringify(rawArgs)}; using ["lsp"]`,
    );
  }
  return { command: expandHome(command, home), args, problems };
}

// -- commands ---------------------------------------------------------------------------

export interface Prompt {
  /** The server command this prompt runs. */
  command: commands.ServerCommand;
  title: string;
  prompt: string;
  placeHolder: string;
  /** An error message for the input box, or undefined when the input is acceptable. */
  validate(input: string): string | undefined;
  /** The command's one argument, from valid input. */
  argument(input: string): JsonObject;
  /** The heading of the result view. */
  heading(input: string): string;
}

const HEX_PREFIX = /^[0-9a-fA-F]{4,64}$/;
const MAX_TEXT = 1000;

function required(what: string, input: string): string | undefined {
  const text = input.trim();
  if (text === "") {
    return `Enter ${what}.`;
  }
  if (text.length > MAX_TEXT) {
    return `At most ${MAX_TEXT} characters.`;
  }
  return undefined;
}

export const PROMPTS: Record<"byCommit" | "byAuthor" | "query", Prompt> = {
  byCommit: {
    command: commands.BY_COMMIT,
    title: "Memories: by commit",
    prompt: "A commit id, or a unique prefix of one (4 to 64 hex digits)",
    placeHolder: "aa907e8",
    validate: (input) =>
      HEX_PREFIX.test(input.trim()) ? undefined : "A commit id is 4 to 64 hex digits.",
    argument: (input) => ({ commit_sha: input.trim().toLowerCase() }),
    heading: (input) => `Memories of commit ${input.trim().toLowerCase()}`,
  },
  byAuthor: {
    command: commands.BY_AUTHOR,
    title: "Memories: by author",
    prompt: "An author's email or name (any case)",
    placeHolder: "alice@example.org",
    validate: (input) => required("an email or a name", input),
    argument: (input) => ({ author: input.trim() }),
    heading: (input) => `Memories from commits by ${input.trim()}`,
  },
  query: {
    command: commands.QUERY,
    title: "Memories: search",
    prompt: 'Words to search the memories for (web-search syntax: "a phrase", -not, or)',
    placeHolder: "body buffer",
    validate: (input) => required("words to search for", input),
    argument: (input) => ({ query: input.trim() }),
    heading: (input) => `Memories matching “${input.trim()}”`,
  },
};

/** The project the store probe searches: any valid project will do, the store is asked. */
export const PROBE_PROJECT = "poimen-memory-probe";

/** The cheap command that tells whether the store answers: a one-result search. */
export function probeArgument(): JsonObject {
  return { query: "poimen", limit: 1, project: PROBE_PROJECT };
}

/** Whether an error from a command says that the store did not answer. */
export function isUnreachable(error: unknown): boolean {
  if (typeof error !== "object" || error === null) {
    return false;
  }
  const { code, message } = error as { code?: unknown; message?: unknown };
  return code === INTERNAL_ERROR && typeof message === "string" && message.includes(UNREACHABLE_MARKER);
}

/** Whether hover texts say that the store did not answer. */
export function mentionsUnreachable(texts: readonly string[]): boolean {
  return texts.some((t) => t.includes(UNREACHABLE_MARKER));
}

/** A one-line message for an error of any kind. */
export function errorMessage(error: unknown): string {
  if (error instanceof Error) {
    return error.message;
  }
  if (typeof error === "object" && error !== null && typeof (error as { message?: unknown }).message === "string") {
    return (error as { message: string }).message;
  }
  return String(error);
}

// -- the status bar ---------------------------------------------------------------------

export type StoreState = "starting" | "reachable" | "unreachable" | "stopped";

export interface Status {
  text: string;
  tooltip: string;
}

export function statusFor(state: StoreState, detail?: string): Status {
  const more = detail ? `\n\n${detail}` : "";
  switch (state) {
    case "starting":
      return { text: "$(sync~spin) memories", tooltip: "poimen-memory: starting the language server" + more };
    case "reachable":
      return { text: "$(database) memories", tooltip: "poimen-memory: the memory store answers. Click to check again." + more };
    case "unreachable":
      return {
        text: "$(warning) store unreachable",
        tooltip: "poimen-memory: the memory store does not answer; checking again every 30 seconds. Click to check now." + more,
      };
    case "stopped":
      return {
        text: "$(circle-slash) memories",
        tooltip: "poimen-memory: the language server is not running. Click to restart it." + more,
      };
  }
}

// -- results ----------------------------------------------------------------------------

export interface CommitInfo {
  sha: string;
  message: string;
  author: string;
  author_name: string;
  date: string;
}

export interface MemoryNode {
  level: string;
  brief: string;
  text: string;
  git_ref: string | null;
  git_commit: CommitInfo | null;
}

export interface LookupResult {
  repo: string | null;
  nodes: MemoryNode[];
}

function str(obj: Record<string, unknown>, key: string, where: string): string {
  const value = obj[key];
  if (typeof value !== "string") {
    throw new Error(`${where}.${key}: expected a string, got ${JSON.stringify(value)}`);
  }
  return value;
}

function commitOf(value: unknown, where: string): CommitInfo | null {
  if (value === null || value === undefined) {
    return null;
  }
  if (typeof value !== "object") {
    throw new Error(`${where}: expected an object, got ${JSON.stringify(value)}`);
  }
  const obj = value as Record<string, unknown>;
  return {
    sha: str(obj, "sha", where),
    message: str(obj, "message", where),
    author: str(obj, "author", where),
    author_name: str(obj, "author_name", where),
    date: str(obj, "date", where),
  };
}

/** A command's answer, checked against the response model. */
export function parseResult(value: unknown): LookupResult {
  if (typeof value !== "object" || value === null || !Array.isArray((value as { nodes?: unknown }).nodes)) {
    throw new Error(`unexpected answer from the server: ${JSON.stringify(value)?.slice(0, 200)}`);
  }
  const raw = value as { repo?: unknown; nodes: unknown[] };
  const nodes = raw.nodes.map((item, i): MemoryNode => {
    const where = `nodes[${i}]`;
    if (typeof item !== "object" || item === null) {
      throw new Error(`${where}: expected an object, got ${JSON.stringify(item)}`);
    }
    const obj = item as Record<string, unknown>;
    const gitRef = obj.git_ref;
    if (gitRef !== null && gitRef !== undefined && typeof gitRef !== "string") {
      throw new Error(`${where}.git_ref: expected a string, got ${JSON.stringify(gitRef)}`);
    }
    return {
      level: str(obj, "level", where),
      brief: str(obj, "brief", where),
      text: str(obj, "text", where),
      git_ref: gitRef ?? null,
      git_commit: commitOf(obj.git_commit, `${where}.git_commit`),
    };
  });
  // One repository, or (an answer spanning several) a list of them.
  const repo =
    typeof raw.repo === "string"
      ? raw.repo
      : Array.isArray(raw.repo) && raw.repo.length > 0 && raw.repo.every((r) => typeof r === "string")
        ? raw.repo.join(", ")
        : null;
  return { repo, nodes };
}

/** `src/kong/buffer.rs:42 (commit aa907e8) "Increase buffer" — Alice Smith <alice@org.test>, 2026-08-06` */
export function citation(node: MemoryNode): string | null {
  if (!node.git_ref || !node.git_commit) {
    return null;
  }
  const c = node.git_commit;
  const summary = c.message.split("\n", 1)[0];
  return `${node.git_ref} (commit ${c.sha.slice(0, 7)}) "${summary}" — ${c.author_name} <${c.author}>, ${c.date.slice(0, 10)}`;
}

/** Text shown literally in Markdown (no emphasis, links, headings or HTML from it). */
export function escapeMarkdown(text: string): string {
  return text.replace(/[\\`*_[\]<>~|&]/g, (ch) => (ch === "&" ? "&amp;" : `\\${ch}`));
}

/** An inline code span holding `text` whatever backticks it contains. */
export function codeSpan(text: string): string {
  const runs = text.match(/`+/g) ?? [];
  const fence = "`".repeat(Math.max(0, ...runs.map((r) => r.length)) + 1);
  const pad = text.startsWith("`") || text.endsWith("`") ? " " : "";
  return `${fence}${pad}${text}${pad}${fence}`;
}

const GROUPS: readonly (readonly [string, string])[] = [
  ["L2", "Synthesis (L2)"],
  ["L1", "Memories (L1)"],
  ["L0", "Evidence (L0)"],
];

function plural(n: number, one: string, many: string): string {
  return `${n} ${n === 1 ? one : many}`;
}

/**
 * A result as a Markdown document: the synthesis and memories first, then the evidence,
 * each with its brief, its text and the citation of its evidence.
 */
export function renderResult(heading: string, result: LookupResult): string {
  const lines = [`# ${escapeMarkdown(heading)}`, ""];
  const count = plural(result.nodes.length, "memory", "memories");
  lines.push(result.repo ? `${count} · ${codeSpan(result.repo)}` : count, "");
  if (result.nodes.length === 0) {
    lines.push("No memories found.", "");
    return lines.join("\n");
  }
  const known = new Set(GROUPS.map(([level]) => level));
  const groups = [...GROUPS];
  for (const node of result.nodes) {
    if (!known.has(node.level)) {
      known.add(node.level);
      groups.push([node.level, escapeMarkdown(node.level)]);
    }
  }
  for (const [level, title] of groups) {
    const nodes = result.nodes.filter((n) => n.level === level);
    if (nodes.length === 0) {
      continue;
    }
    lines.push(`## ${title}`, "");
    for (const node of nodes) {
      const body = node.text.trim().split("\n");
      const brief = node.brief || body[0];
      lines.push(`### ${escapeMarkdown(brief)}`, "");
      if (body[0].trim() === brief.trim()) {
        body.shift(); // the heading says it already
      }
      if (body.join("\n").trim() !== "") {
        lines.push(body.join("\n"), "");
      }
      const cite = citation(node);
      if (cite !== null) {
        lines.push(`— ${codeSpan(cite)}`, "");
      }
    }
  }
  return lines.join("\n");
}
