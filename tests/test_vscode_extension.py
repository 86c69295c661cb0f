"""The VS Code extension (editors/vscode): it builds, lints, passes its own tests and packages
to a .vsix; its settings and command ids mirror the server's; and the arguments, settings
payloads and rendering its pure logic produces work against the real language server. The
.vsix in a real VS Code (code-server, looked at through Chromium) is tests/test_vscode_real.py."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from poimen_memory.lsp import commands
from poimen_memory.lsp.config import LOG_LEVELS, MARKUP, SECTION, SETTINGS

from .editors import missing, require_program
from .lsp.conftest import PROJECT, World, server_env, world  # noqa: F401  (world: a fixture)

ROOT = Path(__file__).resolve().parent.parent
EXT = ROOT / "editors" / "vscode"
MANIFEST = json.loads((EXT / "package.json").read_text("utf-8"))
PROPERTIES: dict[str, dict[str, Any]] = MANIFEST["contributes"]["configuration"]["properties"]
LAUNCH_KEYS = {f"{SECTION}.server.command", f"{SECTION}.server.args", f"{SECTION}.server.python"}
ALLOW_WORKSPACE = f"{SECTION}.allowWorkspaceStore"
# What a workspace may not choose: the store and the server's program (user settings only).
USER_ONLY_KEYS = {f"{SECTION}.dsn", *LAUNCH_KEYS}

# Loads the bundle with a stand-in for the "vscode" module (which only VS Code provides):
# every import the bundle needs must resolve and activate/deactivate must be exported.
LOAD_BUNDLE_JS = r"""
const Module = require("module");
function fake(name) {
  const fn = function () {};
  return new Proxy(fn, {
    get: (_t, prop) => (prop === "prototype" ? fn.prototype : fake(`${name}.${String(prop)}`)),
    construct: () => ({}),
    apply: () => undefined,
  });
}
const load = Module._load;
Module._load = function (request, ...rest) {
  return request === "vscode" ? fake("vscode") : load.call(this, request, ...rest);
};
const ext = require(process.argv[1]);
process.stdout.write(JSON.stringify(Object.keys(ext).sort()));
"""

# Runs the extension's compiled pure logic (out/logic.js, built by `npm test`) on JSON input.
LOGIC_JS = r"""
const [logicPath, manifestPath] = process.argv.slice(1);
const logic = require(logicPath);
const manifest = require(manifestPath);
const props = manifest.contributes.configuration.properties;
const input = JSON.parse(require("fs").readFileSync(0, "utf-8"));
const reader = (over) => (key) => (key in over ? over[key] : props[`${logic.SECTION}.${key}`]?.default);
let out;
if (input.op === "settings") {
  const prompts = {};
  for (const [name, text] of Object.entries(input.inputs)) {
    const p = logic.PROMPTS[name];
    prompts[name] = { command: p.command, valid: p.validate(text) === undefined, argument: p.argument(text), heading: p.heading(text) };
  }
  out = {
    init: logic.initializationOptions(reader(input.init)),
    pulled: logic.serverSettings(reader(input.pulled)),
    change: logic.configurationChange(reader(input.change)),
    launch: logic.serverLaunch(reader(input.init), "/home/u"),
    probe: logic.probeArgument(),
    prompts,
  };
} else if (input.op === "render") {
  out = { markdown: logic.renderResult(input.heading, logic.parseResult(input.result)) };
} else if (input.op === "unreachable") {
  out = { unreachable: logic.isUnreachable(input.error), status: logic.statusFor("unreachable").text };
}
process.stdout.write(JSON.stringify(out));
"""


@dataclass
class Build:
    steps: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def check(self, name: str) -> None:
        done = self.steps[name]
        assert done.returncode == 0, (
            f"{name} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
        )


def _run(
    cmd: list[str], timeout: float = 600, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd, cwd=EXT, capture_output=True, text=True, timeout=timeout, check=False,
        input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL,
    )  # fmt: skip


@pytest.fixture(scope="module")
def build() -> Build:
    """`npm ci`, compile, lint, test, bundle and package, in that order, each once."""
    require_program("node")
    require_program("npm")
    for stale in (EXT / "dist", EXT / "out"):
        shutil.rmtree(stale, ignore_errors=True)
    (EXT / "poimen-memory.vsix").unlink(missing_ok=True)
    result = Build()
    steps = {
        "ci": ["npm", "ci", "--no-audit", "--no-fund", "--prefer-offline", "--fetch-retries=1"],
        "compile": ["npm", "run", "compile"],
        "lint": ["npm", "run", "lint"],
        "test": ["npm", "test"],
        "bundle": ["npm", "run", "bundle"],
        "package": ["npm", "run", "package"],
    }
    for name, cmd in steps.items():
        started = time.monotonic()
        result.steps[name] = _run(cmd)
        result.seconds[name] = time.monotonic() - started
        if result.steps[name].returncode != 0:
            break  # later steps need this one
    ci = result.steps["ci"]
    if ci.returncode != 0 and _NO_REGISTRY.search(ci.stdout + ci.stderr):
        missing("the npm registry cannot be reached and npm's cache lacks the dependencies")
    return result


# npm's words for "no network" (the build itself needs the registry or a warm cache).
_NO_REGISTRY = re.compile(r"ENOTFOUND|EAI_AGAIN|ENETUNREACH|ECONNREFUSED|ETIMEDOUT")


def node(script: str, *args: str, data: object = None) -> Any:
    done = subprocess.run(
        ["node", "-e", script, *args], capture_output=True, text=True, timeout=60, check=False,
        input=json.dumps(data),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def logic(data: dict[str, Any]) -> Any:
    return node(LOGIC_JS, str(EXT / "out" / "logic.js"), str(EXT / "package.json"), data=data)


# -- the build ---------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("step", ["ci", "compile", "lint", "test", "bundle", "package"])
def test_npm_step_succeeds(build: Build, step: str) -> None:
    assert step in build.steps, f"not run: an earlier step failed ({sorted(build.steps)})"
    build.check(step)


@pytest.mark.slow
def test_unit_tests_ran_and_passed(build: Build) -> None:
    build.check("test")
    out = build.steps["test"].stdout
    passed = re.search(r"^# pass (\d+)$", out, re.MULTILINE)
    failed = re.search(r"^# fail (\d+)$", out, re.MULTILINE)
    assert passed, out
    assert failed, out
    assert int(passed.group(1)) >= 20, out
    assert int(failed.group(1)) == 0, out


@pytest.mark.slow
def test_vsix_holds_the_manifest_and_the_bundle(build: Build) -> None:
    build.check("package")
    vsix = EXT / "poimen-memory.vsix"
    assert vsix.is_file()
    with zipfile.ZipFile(vsix) as z:
        names = set(z.namelist())
        packaged = json.loads(z.read("extension/package.json"))
        bundle = z.read("extension/dist/extension.js")
    assert {"extension/package.json", "extension/dist/extension.js"} <= names, names
    assert packaged["main"] == "./dist/extension.js"
    assert packaged["contributes"] == MANIFEST["contributes"]
    # Bundled: no node_modules, no sources, and the language client inside the one file.
    assert not [n for n in names if "node_modules/" in n or n.endswith(".ts")], names
    assert b"workspace/executeCommand" in bundle


@pytest.mark.slow
def test_bundle_loads_and_exports_activate(build: Build) -> None:
    build.check("bundle")
    exported = node(LOAD_BUNDLE_JS, str(EXT / "dist" / "extension.js"))
    assert exported == ["activate", "deactivate"]


# -- what mirrors the server -------------------------------------------------------------


def test_configuration_keys_are_the_server_settings_plus_launch() -> None:
    server = {f"{SECTION}.{key}" for key in SETTINGS}
    assert set(PROPERTIES) - LAUNCH_KEYS - {ALLOW_WORKSPACE} == server
    assert set(PROPERTIES) >= LAUNCH_KEYS


def test_configuration_defaults_types_and_ranges_match_the_server() -> None:
    # The manifest's properties are JSON Schema, like the server's model of its settings.
    for key, setting in SETTINGS.items():
        spec = PROPERTIES[f"{SECTION}.{key}"]
        assert spec["default"] == setting.default, key
        kinds = spec["type"] if isinstance(spec["type"], list) else [spec["type"]]
        server_kinds = [s["type"] for s in setting.schema.get("anyOf", [setting.schema])]
        assert sorted(kinds) == sorted(server_kinds), key
        for bound in ("minimum", "maximum", "enum"):
            assert spec.get(bound) == setting.schema.get(bound), (key, bound)
    assert PROPERTIES[f"{SECTION}.hover.markup"]["enum"] == list(MARKUP)
    assert PROPERTIES[f"{SECTION}.logLevel"]["enum"] == list(LOG_LEVELS)
    assert PROPERTIES[f"{SECTION}.hover.excerptLength"]["default"] == 400
    assert PROPERTIES[f"{SECTION}.blame.maxFileBytes"]["default"] == 2_000_000


def test_launch_settings_defaults() -> None:
    assert PROPERTIES[f"{SECTION}.server.command"]["default"] == "mem"
    assert PROPERTIES[f"{SECTION}.server.args"]["default"] == ["lsp"]
    assert PROPERTIES[f"{SECTION}.server.python"]["default"] is None
    restricted = MANIFEST["capabilities"]["untrustedWorkspaces"]["restrictedConfigurations"]
    assert set(restricted) == USER_ONLY_KEYS | {ALLOW_WORKSPACE}


def test_a_workspace_cannot_choose_the_store_or_the_server_in_the_manifest() -> None:
    restricted = MANIFEST["capabilities"]["untrustedWorkspaces"]["restrictedConfigurations"]
    assert set(restricted) >= USER_ONLY_KEYS
    allow = PROPERTIES[ALLOW_WORKSPACE]
    assert allow["default"] is False
    assert allow["scope"] == "application"  # never from a workspace's settings
    source = (EXT / "src" / "extension.ts").read_text("utf-8")
    # every read of the settings goes through userChosen: no config.get of its own elsewhere
    assert source.count("config.get(") == 1
    assert "userChosen(" in source


# Runs userChosen (out/logic.js) on settings layered as VS Code's inspect() reports them.
CHOSEN_JS = r"""
const [logicPath, manifestPath] = process.argv.slice(1);
const logic = require(logicPath);
const props = require(manifestPath).contributes.configuration.properties;
const { user, workspace } = JSON.parse(require("fs").readFileSync(0, "utf-8"));
const inspect = (key) => {
  const declared = props[`${logic.SECTION}.${key}`];
  return declared && { defaultValue: declared.default, globalValue: user[key], workspaceValue: workspace[key] };
};
const read = (key) => {
  const seen = inspect(key);
  if (!seen) return undefined;
  return [seen.workspaceValue, seen.globalValue, seen.defaultValue].find((v) => v !== undefined);
};
const chosen = logic.userChosen(read, inspect);
process.stdout.write(JSON.stringify({
  init: logic.initializationOptions(chosen.read),
  launch: logic.serverLaunch(chosen.read, "/home/u"),
  ignored: chosen.ignored,
  message: logic.ignoredMessage(chosen.ignored) ?? null,
}));
"""


@pytest.mark.slow
@pytest.mark.parametrize("allowed", [False, True])
def test_a_repositorys_settings_choose_neither_the_store_nor_the_server(
    build: Build, allowed: bool
) -> None:
    build.check("test")
    hostile = {
        "dsn": "postgresql://attacker.example/notes",
        "server.command": "/tmp/evil",
        "server.python": "/tmp/evil-python",
        "project": "app",
        "allowWorkspaceStore": True,  # a workspace cannot allow itself
    }
    user = {"dsn": "postgresql://mine/notes", **({"allowWorkspaceStore": True} if allowed else {})}
    out = node(
        CHOSEN_JS, str(EXT / "out" / "logic.js"), str(EXT / "package.json"),
        data={"user": user, "workspace": hostile},
    )  # fmt: skip
    settings = out["init"][SECTION]
    assert settings["project"] == "app"  # the rest is the workspace's to choose
    if allowed:
        assert settings["dsn"] == hostile["dsn"]
        assert out["launch"]["command"] == "/tmp/evil-python"
        assert out["ignored"] == []
        return
    assert settings["dsn"] == "postgresql://mine/notes"
    assert out["launch"] == {"command": "mem", "args": ["lsp"], "problems": []}
    assert sorted(out["ignored"]) == sorted(
        [f"{SECTION}.dsn", f"{SECTION}.server.command", f"{SECTION}.server.python"]
    )
    assert f"{SECTION}.dsn" in out["message"]
    assert ALLOW_WORKSPACE in out["message"]


def test_types_vscode_pinned_to_engines() -> None:
    engine = MANIFEST["engines"]["vscode"]
    assert re.fullmatch(r"\^\d+\.\d+\.\d+", engine), engine
    assert MANIFEST["devDependencies"]["@types/vscode"] == engine.removeprefix("^")


def test_command_ids_mirror_the_server() -> None:
    source = (EXT / "src" / "commands.ts").read_text("utf-8")
    constants = dict(re.findall(r'^export const (\w+) = "([^"]+)";$', source, re.MULTILINE))
    listed = re.search(r"^export const ALL = \[([^\]]*)\] as const;$", source, re.MULTILINE)
    assert listed, "commands.ts has no ALL list"
    names = [n.strip() for n in listed.group(1).split(",") if n.strip()]
    assert tuple(constants[n] for n in names) == commands.ALL
    for name in dir(commands):
        if name.isupper() and name != "ALL":
            assert constants.get(name) == getattr(commands, name), name


def test_palette_commands_are_contributed() -> None:
    titles = {
        c["command"]: (c["category"], c["title"]) for c in MANIFEST["contributes"]["commands"]
    }
    assert titles["poimenMemory.byCommit"] == ("Memories", "by commit…")
    assert titles["poimenMemory.byAuthor"] == ("Memories", "by author…")
    assert titles["poimenMemory.query"] == ("Memories", "search…")
    # The palette's ids never collide with the server's (the language client registers those).
    assert not set(titles) & set(commands.ALL)


def test_packaging_leaves_out_sources_and_dependencies() -> None:
    ignore = (EXT / ".vscodeignore").read_text().split()
    for pattern in ("src/**", "node_modules/**", "out/**", "*.vsix"):
        assert pattern in ignore, pattern
    tracked = subprocess.run(
        ["git", "ls-files", "--", "editors/vscode"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert not [t for t in tracked if "node_modules/" in t or t.endswith(".vsix")], tracked
    for path in ("editors/vscode/node_modules/x/index.js", "editors/vscode/poimen-memory.vsix"):
        ignored = subprocess.run(
            ["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT, check=False
        )
        assert ignored.returncode == 0, f"{path} is not ignored by git"


# -- the logic against the real server ---------------------------------------------------


async def _client(w: World, init: object, pulled: object) -> LanguageClient:
    """A client with VS Code's capabilities that answers workspace/configuration as the
    extension's middleware does."""
    config = ClientServerConfig(
        server_command=[sys.executable, "-m", "poimen_memory.cli", "lsp"],
        server_env=server_env(w),
    )
    client = await config.start()
    assert isinstance(client, LanguageClient)
    client.set_configuration(pulled, section=SECTION)
    await client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            root_uri=w.kong.root.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=w.kong.root.as_uri(), name="kong")],
            initialization_options=init,
        )
    )
    return client


async def _hover(client: LanguageClient, uri: str, line: int) -> types.Hover | None:
    return await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(line - 1, 0))
    )


@pytest.mark.slow
async def test_extension_logic_drives_the_real_server(build: Build, world: World) -> None:  # noqa: F811
    build.check("test")  # out/logic.js
    sha = world.kong.commits["abc123"]
    data = logic({
        "op": "settings",
        # server.* must stay with the extension; the server would call them unknown.
        "init": {"dsn": world.dsn, "project": PROJECT, "server.command": "/opt/mem", "server.args": ["lsp", "-v"]},
        "pulled": {"dsn": world.dsn, "project": PROJECT, "hover.markup": "plaintext", "server.python": "/venv/bin/python"},
        "change": {"dsn": world.dsn, "project": PROJECT, "hover.enabled": False},
        "inputs": {"byCommit": f" {sha[:10].upper()} ", "byAuthor": "ALICE@org.test", "query": "BODY_BUFFER"},
    })  # fmt: skip
    assert data["launch"] == {"command": "/opt/mem", "args": ["lsp", "-v"], "problems": []}
    assert set(data["init"]) == {SECTION}
    assert "server" not in data["init"][SECTION]
    assert "server" not in data["pulled"]
    assert data["init"][SECTION]["hover"] == {
        "enabled": True,
        "excerptLength": 400,
        "markup": "auto",
        "history": 0,
    }

    client = await _client(world, data["init"], data["pulled"])
    try:
        uri = world.uri("src/kong/buffer.rs")
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                types.TextDocumentItem(
                    uri, "rust", 1, (world.kong.root / "src/kong/buffer.rs").read_text()
                )
            )
        )
        # The pulled configuration (markup plaintext) replaces the initializationOptions
        # (markdown, as VS Code asks for) once the server has asked for it.
        deadline = time.monotonic() + 5
        while True:
            shown = await _hover(client, uri, 42)
            assert shown is not None
            assert isinstance(shown.contents, types.MarkupContent)
            if shown.contents.kind == types.MarkupKind.PlainText or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
        assert shown.contents.kind == types.MarkupKind.PlainText
        assert "Raised BODY_BUFFER from 8MB to 16MB" in shown.contents.value

        probe = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(commands.QUERY, [data["probe"]])
        )
        assert probe == {"repo": [], "nodes": [], "truncated": False}

        for name, prompt in data["prompts"].items():
            assert prompt["valid"], name
            answer = await client.workspace_execute_command_async(
                types.ExecuteCommandParams(prompt["command"], [prompt["argument"]])
            )
            markdown = logic({"op": "render", "heading": prompt["heading"], "result": answer})[
                "markdown"
            ]
            # The brief as a heading (Markdown-escaped), then the rest of the text.
            assert "### Raised BODY\\_BUFFER from 8MB to 16MB" in markdown, (name, markdown)
            assert "\nUploads of 16MB now pass; larger ones get a 413.\n" in markdown, markdown
            if name != "query":
                assert (
                    f'src/kong/buffer.rs:42 (commit {sha[:7]}) "Increase buffer" — Alice Smith'
                    in markdown
                ), markdown
                assert "## Evidence (L0)" in markdown
                assert "## Memories (L1)" in markdown

        # The didChangeConfiguration payload the middleware sends: hovers off.
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings=data["change"]["settings"])
        )
        await asyncio.sleep(0.3)
        assert await _hover(client, uri, 42) is None

        complaints = [m.message for m in client.messages if SECTION in m.message]
        assert complaints == [], complaints
    finally:
        await client.shutdown_session()
        await client.stop()


@pytest.mark.slow
async def test_unreachable_store_is_recognised(build: Build, world: World) -> None:  # noqa: F811
    build.check("test")
    probe = logic({"op": "settings", "init": {}, "pulled": {}, "change": {}, "inputs": {}})["probe"]
    dead = "postgresql://postgres@127.0.0.1:1/none?connect_timeout=1"
    client = await _client(world, {SECTION: {"dsn": dead}}, {"dsn": dead})
    try:
        with pytest.raises(JsonRpcException) as caught:
            await client.workspace_execute_command_async(
                types.ExecuteCommandParams(commands.QUERY, [probe])
            )
        error = {"code": caught.value.code, "message": caught.value.message}
        verdict = logic({"op": "unreachable", "error": error})
        assert verdict == {"unreachable": True, "status": "$(warning) store unreachable"}, error
    finally:
        await client.shutdown_session()
        await client.stop()
