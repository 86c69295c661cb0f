import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import * as commands from "../commands";
import {
  ALLOW_WORKSPACE,
  type Inspected,
  LAUNCH_SETTINGS,
  PROMPTS,
  type Reader,
  SECTION,
  SERVER_SETTINGS,
  citation,
  codeSpan,
  configurationChange,
  escapeMarkdown,
  expandHome,
  initializationOptions,
  isUnreachable,
  mentionsUnreachable,
  parseResult,
  probeArgument,
  renderResult,
  serverLaunch,
  serverSettings,
  statusFor,
  userChosen,
} from "../logic";

interface Property {
  default?: unknown;
  type?: unknown;
  enum?: unknown[];
}

interface Manifest {
  engines: { vscode: string };
  devDependencies: Record<string, string>;
  contributes: {
    configuration: { properties: Record<string, Property> };
    commands: { command: string; title: string; category?: string }[];
  };
}

const manifest = JSON.parse(
  readFileSync(join(__dirname, "..", "..", "package.json"), "utf-8"),
) as Manifest;
const properties = manifest.contributes.configuration.properties;

/** A reader over package.json's defaults, with some values overridden. */
function defaults(overrides: Record<string, unknown> = {}): Reader {
  return (key) => (key in overrides ? overrides[key] : properties[`${SECTION}.${key}`]?.default);
}

const RESULT = {
  repo: "github.com/org/poimen",
  nodes: [
    {
      sha256: "a".repeat(64),
      level: "L0",
      brief: "Raised BODY_BUFFER to 16MB",
      text: "Raised BODY_BUFFER from 8MB to 16MB in the Kong buffer module.\nUploads of 16MB now pass.",
      created_at: "2026-08-20T07:00:00+00:00",
      git_ref: "src/kong/buffer.rs:42",
      git_commit: {
        sha: "aa907e8c0ffee0000000000000000000000000000",
        message: "Increase buffer\n\nLonger body.",
        author: "alice@org.test",
        author_name: "Alice Smith",
        date: "2026-08-06T09:06:40+00:00",
      },
      parents: [],
    },
    {
      level: "L1",
      brief: "Kong body buffer raised to 16MB",
      text: "Kong body buffer raised to 16MB so 16MB uploads pass.",
      git_ref: null,
      git_commit: null,
    },
    {
      level: "L2",
      brief: "Kong platform",
      text: "Kong platform: bodies are buffered up to 16MB and streamed beyond.",
      git_ref: null,
      git_commit: null,
    },
  ],
};

describe("package.json", () => {
  it("declares every server setting, the launch settings and the workspace switch, and nothing else", () => {
    const expected = [...SERVER_SETTINGS, ...LAUNCH_SETTINGS, ALLOW_WORKSPACE]
      .map((k) => `${SECTION}.${k}`)
      .sort();
    assert.deepEqual(Object.keys(properties).sort(), expected);
  });

  it("pins @types/vscode to the engines.vscode version", () => {
    assert.equal(manifest.devDependencies["@types/vscode"], manifest.engines.vscode.replace(/^\^/, ""));
  });

  it("contributes exactly the palette commands, in the Memories category", () => {
    const contributed = manifest.contributes.commands.map((c) => c.command).sort();
    assert.deepEqual(contributed, Object.values(commands.PALETTE).sort());
    for (const c of manifest.contributes.commands) {
      assert.equal(c.category, "Memories", c.command);
    }
  });
});

/** Settings as VS Code inspects them: the user's values, the workspace's, and the defaults. */
function layered(user: Record<string, unknown>, workspace: Record<string, unknown>, folder = false) {
  const inspect = (key: string): Inspected | undefined => {
    const declared = properties[`${SECTION}.${key}`];
    if (declared === undefined) {
      return undefined;
    }
    return {
      defaultValue: declared.default,
      globalValue: user[key],
      ...(folder ? { workspaceFolderValue: workspace[key] } : { workspaceValue: workspace[key] }),
    };
  };
  const read: Reader = (key) => {
    const seen = inspect(key);
    if (seen === undefined) {
      return undefined;
    }
    for (const value of [seen.workspaceFolderValue, seen.workspaceValue, seen.globalValue]) {
      if (value !== undefined) {
        return value;
      }
    }
    return seen.defaultValue;
  };
  return { read, inspect };
}

describe("what a workspace may choose", () => {
  const hostile = {
    dsn: "postgresql://attacker.example/notes",
    "server.command": "/tmp/evil",
    "server.args": ["--steal"],
    "server.python": "/tmp/evil-python",
    project: "app",
    "hover.enabled": false,
    [ALLOW_WORKSPACE]: true, // a workspace cannot allow itself
  };

  for (const folder of [false, true]) {
    it(`never the store nor the server's program (${folder ? "folder" : "workspace"} settings)`, () => {
      const { read, inspect } = layered({ dsn: "postgresql://mine/notes" }, hostile, folder);
      const chosen = userChosen(read, inspect);
      assert.equal(serverSettings(chosen.read).dsn, "postgresql://mine/notes");
      assert.deepEqual(serverLaunch(chosen.read, "/home/u"), { command: "mem", args: ["lsp"], problems: [] });
      assert.deepEqual(chosen.ignored.sort(), [
        "poimenMemory.dsn",
        "poimenMemory.server.args",
        "poimenMemory.server.command",
        "poimenMemory.server.python",
      ]);
      // everything else is the workspace's to choose
      assert.equal(serverSettings(chosen.read).project, "app");
      assert.deepEqual(serverSettings(chosen.read).hover, {
        enabled: false, excerptLength: 400, markup: "auto", history: 0,
      });
    });
  }

  it("unset by the user: the default (the environment, the config file, the embedded store)", () => {
    const { read, inspect } = layered({}, hostile);
    assert.equal(serverSettings(userChosen(read, inspect).read).dsn, null);
  });

  it("everything, once the user's own settings allow workspaces to choose", () => {
    const { read, inspect } = layered({ [ALLOW_WORKSPACE]: true }, hostile);
    const chosen = userChosen(read, inspect);
    assert.equal(serverSettings(chosen.read).dsn, hostile.dsn);
    assert.equal(serverLaunch(chosen.read, "/home/u").command, "/tmp/evil-python");
    assert.deepEqual(chosen.ignored, []);
  });

  it("nothing to say when the workspace sets none of them", () => {
    const { read, inspect } = layered({ "server.python": "/venv/bin/python" }, { project: "app" });
    const chosen = userChosen(read, inspect);
    assert.deepEqual(chosen.ignored, []);
    assert.equal(serverLaunch(chosen.read, "/home/u").command, "/venv/bin/python");
  });
});

describe("settings", () => {
  it("nest the server's keys under the section as initializationOptions", () => {
    const options = initializationOptions(
      defaults({ dsn: "postgresql://db/x", "hover.enabled": false, "codeLens.fileSummary": false }),
    );
    assert.deepEqual(options, {
      poimenMemory: {
        dsn: "postgresql://db/x",
        project: null,
        repo: null,
        hover: { enabled: false, excerptLength: 400, markup: "auto", history: 0 },
        codeLens: { enabled: true, fileSummary: false },
        blame: {
          maxFileBytes: 2000000,
          maxFileLines: 100000,
          detectMoves: false,
          sharedCache: true,
        },
        logLevel: "warning",
      },
    });
  });

  it("leave out the launch settings and keys the server does not know", () => {
    const read: Reader = (key) =>
      ({ "server.command": "/opt/mem", "server.args": ["lsp"], "hover.enabled": true, bogus: 1 })[key];
    assert.deepEqual(serverSettings(read), { hover: { enabled: true } });
    assert.deepEqual(configurationChange(read), { settings: { poimenMemory: { hover: { enabled: true } } } });
  });

  it("skip unset keys and keep null", () => {
    const read: Reader = (key) => (key === "project" ? null : undefined);
    assert.deepEqual(serverSettings(read), { project: null });
  });
});

describe("serverLaunch", () => {
  it("runs `mem lsp` by default", () => {
    assert.deepEqual(serverLaunch(defaults(), "/home/u"), { command: "mem", args: ["lsp"], problems: [] });
  });

  it("runs the configured command and arguments", () => {
    const launch = serverLaunch(defaults({ "server.command": "~/bin/mem", "server.args": ["lsp", "--tcp", "x"] }), "/home/u");
    assert.deepEqual(launch, { command: "/home/u/bin/mem", args: ["lsp", "--tcp", "x"], problems: [] });
  });

  it("runs `<python> -m poimen_memory.cli lsp` when server.python is set", () => {
    const launch = serverLaunch(defaults({ "server.python": "/venv/bin/python", "server.command": "other" }), "/h");
    assert.deepEqual(launch, { command: "/venv/bin/python", args: ["-m", "poimen_memory.cli", "lsp"], problems: [] });
  });

  it("reports bad values by key and uses the defaults", () => {
    const launch = serverLaunch(defaults({ "server.command": "  ", "server.args": "lsp", "server.python": "" }), "/h");
    assert.equal(launch.command, "mem");
    assert.deepEqual(launch.args, ["lsp"]);
    assert.equal(launch.problems.length, 3);
    assert.match(launch.problems[0], /poimenMemory\.server\.python/);
    assert.match(launch.problems[1], /poimenMemory\.server\.command/);
    assert.match(launch.problems[2], /poimenMemory\.server\.args: expected a list of strings, got "lsp"/);
  });

  it("expands only a leading ~", () => {
    assert.equal(expandHome("~", "/h"), "/h");
    assert.equal(expandHome("~/x", "/h/"), "/h/x");
    assert.equal(expandHome("/a/~/x", "/h"), "/a/~/x");
    assert.equal(expandHome("~bob/x", "/h"), "~bob/x");
  });
});

describe("command arguments", () => {
  it("by commit: a hex prefix, lower-cased", () => {
    const p = PROMPTS.byCommit;
    assert.equal(p.command, commands.BY_COMMIT);
    assert.deepEqual(p.argument(" AA907E8 "), { commit_sha: "aa907e8" });
    assert.equal(p.validate("aa907e8"), undefined);
    assert.ok(p.validate("abc"));
    assert.ok(p.validate("not-a-sha"));
    assert.ok(p.validate("a".repeat(65)));
  });

  it("by author: the trimmed email or name", () => {
    const p = PROMPTS.byAuthor;
    assert.equal(p.command, commands.BY_AUTHOR);
    assert.deepEqual(p.argument(" Alice Smith "), { author: "Alice Smith" });
    assert.ok(p.validate("   "));
    assert.equal(p.validate("alice@org.test"), undefined);
  });

  it("query: the trimmed text, at most 1000 characters", () => {
    const p = PROMPTS.query;
    assert.equal(p.command, commands.QUERY);
    assert.deepEqual(p.argument("  body buffer "), { query: "body buffer" });
    assert.ok(p.validate(""));
    assert.ok(p.validate("x".repeat(1001)));
  });

  it("the store probe is a one-result search in a valid project", () => {
    const arg = probeArgument();
    assert.equal(arg.limit, 1);
    assert.match(arg.project as string, /^[A-Za-z0-9][A-Za-z0-9._:@/+=-]{0,127}$/);
    assert.equal(typeof arg.query, "string");
  });
});

describe("store state", () => {
  it("recognises the server's unreachable error and hover", () => {
    assert.ok(isUnreachable({ code: -32603, message: "poimen-memory: memory store unreachable: timeout" }));
    assert.ok(!isUnreachable({ code: -32602, message: "memory store unreachable" }));
    assert.ok(!isUnreachable({ code: -32603, message: "other failure" }));
    assert.ok(!isUnreachable(undefined));
    assert.ok(mentionsUnreachable(["poimen-memory: memory store unreachable"]));
    assert.ok(!mentionsUnreachable(["**Kong body buffer**"]));
  });

  it("shows the status bar text for each state", () => {
    assert.equal(statusFor("reachable").text, "$(database) memories");
    assert.equal(statusFor("unreachable").text, "$(warning) store unreachable");
    assert.match(statusFor("unreachable", "timeout after 1.5s").tooltip, /timeout after 1\.5s/);
    assert.notEqual(statusFor("stopped").text, statusFor("starting").text);
  });
});

describe("results", () => {
  it("parse the response model", () => {
    const result = parseResult(RESULT);
    assert.equal(result.repo, "github.com/org/poimen");
    assert.equal(result.nodes.length, 3);
    assert.equal(result.nodes[0].git_commit?.author_name, "Alice Smith");
    assert.equal(result.nodes[1].git_commit, null);
  });

  it("refuse answers that are not the response model", () => {
    assert.throws(() => parseResult(null), /unexpected answer/);
    assert.throws(() => parseResult({ nodes: [{ level: "L0" }] }), /nodes\[0\]\.brief: expected a string/);
    assert.throws(
      () => parseResult({ nodes: [{ ...RESULT.nodes[0], git_commit: { sha: 1 } }] }),
      /nodes\[0\]\.git_commit\.sha/,
    );
  });

  it("cite evidence as in the README", () => {
    const [l0, l1] = parseResult(RESULT).nodes;
    assert.equal(
      citation(l0),
      'src/kong/buffer.rs:42 (commit aa907e8) "Increase buffer" — Alice Smith <alice@org.test>, 2026-08-06',
    );
    assert.equal(citation(l1), null);
  });

  it("render synthesis and memories before the evidence, with citations", () => {
    const md = renderResult("Memories of commit aa907e8", parseResult(RESULT));
    const lines = md.split("\n");
    assert.equal(lines[0], "# Memories of commit aa907e8");
    assert.ok(md.includes("3 memories · `github.com/org/poimen`"));
    const order = ["## Synthesis (L2)", "## Memories (L1)", "## Evidence (L0)"].map((h) => lines.indexOf(h));
    assert.ok(order.every((i) => i > 0), md);
    assert.deepEqual([...order].sort((a, b) => a - b), order);
    assert.ok(md.includes("### Raised BODY\\_BUFFER to 16MB"));
    assert.ok(md.includes("Raised BODY_BUFFER from 8MB to 16MB in the Kong buffer module.\nUploads of 16MB now pass."));
    assert.ok(md.includes('— `src/kong/buffer.rs:42 (commit aa907e8) "Increase buffer" — Alice Smith <alice@org.test>, 2026-08-06`'));
  });

  it("render a text whose first line is its brief once", () => {
    const node = { ...RESULT.nodes[1], brief: "Kong body buffer raised", text: "Kong body buffer raised\nto 16MB." };
    const md = renderResult("h", parseResult({ repo: null, nodes: [node] }));
    assert.equal(md.split("Kong body buffer raised").length, 2, md);
    assert.ok(md.includes("### Kong body buffer raised\n\nto 16MB.\n"), md);
    const single = renderResult("h", parseResult({ repo: null, nodes: [{ ...node, text: "Kong body buffer raised" }] }));
    assert.equal(single.split("Kong body buffer raised").length, 2, single);
  });

  it("render an empty result", () => {
    const md = renderResult("Memories matching “nothing”", { repo: null, nodes: [] });
    assert.ok(md.includes("0 memories"));
    assert.ok(md.includes("No memories found."));
  });

  it("escape Markdown in briefs and headings, and fence code spans", () => {
    assert.equal(escapeMarkdown("a_b *c* <d> [e](f) #1 & x"), "a\\_b \\*c\\* \\<d\\> \\[e\\](f) #1 &amp; x");
    assert.equal(codeSpan("plain"), "`plain`");
    assert.equal(codeSpan("a `b` c"), "``a `b` c``");
    assert.equal(codeSpan("`x"), "`` `x ``");
  });
});
