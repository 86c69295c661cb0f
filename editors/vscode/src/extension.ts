/**
 * The VS Code extension: runs `mem lsp` for every file, mirrors the server's settings,
 * adds the palette commands and a status bar item telling whether the store answers.
 */

import * as os from "os";
import * as vscode from "vscode";
import {
  DidChangeConfigurationNotification,
  ExecuteCommandRequest,
  LanguageClient,
  type LanguageClientOptions,
  type ServerOptions,
  State,
} from "vscode-languageclient/node";

import * as commands from "./commands";
import {
  ALLOW_WORKSPACE,
  type GuardedSettings,
  type JsonObject,
  PROMPTS,
  type Prompt,
  type Reader,
  SECTION,
  type StoreState,
  configurationChange,
  errorMessage,
  ignoredMessage,
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
} from "./logic";

const RECHECK_MS = 30_000;

/** The settings, with the store and the server's program as the user chose them. */
function settings(scope?: vscode.ConfigurationScope): GuardedSettings {
  const config = vscode.workspace.getConfiguration(SECTION, scope);
  return userChosen(
    (key) => config.get(key),
    (key) => config.inspect(key),
  );
}

function reader(scope?: vscode.ConfigurationScope): Reader {
  return settings(scope).read;
}

function hoverTexts(hover: vscode.Hover): string[] {
  return hover.contents.map((c) => (typeof c === "string" ? c : c.value));
}

class MemoryExtension implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private readonly output = vscode.window.createOutputChannel("poimen-memory");
  private readonly status = vscode.window.createStatusBarItem(
    "poimenMemory.status",
    vscode.StatusBarAlignment.Left,
    0,
  );
  private state: StoreState = "starting";
  private recheck: NodeJS.Timeout | undefined;
  private restarting: Promise<void> = Promise.resolve();

  constructor() {
    this.status.name = "poimen-memory";
    this.status.command = commands.PALETTE.checkStore;
    this.show("starting");
    this.status.show();
  }

  // -- the client --------------------------------------------------------------------

  async start(): Promise<void> {
    const launch = serverLaunch(reader(), os.homedir());
    const ignored = ignoredMessage(settings().ignored);
    if (ignored !== undefined) {
      this.output.appendLine(ignored);
      void vscode.window.showWarningMessage(ignored);
    }
    for (const problem of launch.problems) {
      void vscode.window.showWarningMessage(`poimen-memory: ${problem}`);
    }
    const serverOptions: ServerOptions = { command: launch.command, args: launch.args };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [{ scheme: "file" }],
      initializationOptions: () => initializationOptions(reader()),
      synchronize: { configurationSection: SECTION },
      outputChannel: this.output,
      middleware: {
        workspace: {
          // Only the server's own keys go to the server (server.* are the extension's).
          configuration: async (params, token, next) => {
            const answer = await next(params, token);
            if (!Array.isArray(answer)) {
              return answer;
            }
            return answer.map((value: unknown, i: number) => {
              const item = params.items[i];
              if (item?.section !== SECTION) {
                return value;
              }
              const scope = item.scopeUri ? vscode.Uri.parse(item.scopeUri) : undefined;
              return serverSettings(reader(scope));
            });
          },
          didChangeConfiguration: async () => {
            const client = this.client;
            if (client !== undefined && client.isRunning()) {
              await client.sendNotification(
                DidChangeConfigurationNotification.type,
                configurationChange(reader()),
              );
            }
          },
        },
        provideHover: async (document, position, token, next) => {
          const hover = await next(document, position, token);
          if (hover && mentionsUnreachable(hoverTexts(hover))) {
            this.unreachable("a hover said so");
          }
          return hover;
        },
      },
    };
    const client = new LanguageClient("poimenMemory", "poimen-memory", serverOptions, clientOptions);
    client.onDidChangeState((event) => {
      if (event.newState === State.Stopped && this.client === client) {
        this.show("stopped");
      }
    });
    this.client = client;
    this.show("starting", `${launch.command} ${launch.args.join(" ")}`);
    try {
      await client.start();
    } catch (error) {
      this.show("stopped", errorMessage(error));
      const choice = await vscode.window.showErrorMessage(
        `poimen-memory: could not start \`${launch.command} ${launch.args.join(" ")}\` (${errorMessage(error)}). ` +
          `Install poimen-memory (pip install poimen-memory) or set ${SECTION}.server.command or ${SECTION}.server.python.`,
        "Open settings",
      );
      if (choice === "Open settings") {
        await vscode.commands.executeCommand("workbench.action.openSettings", `${SECTION}.server`);
      }
      return;
    }
    await this.checkStore();
  }

  async stop(): Promise<void> {
    this.clearRecheck();
    const client = this.client;
    this.client = undefined;
    if (client !== undefined) {
      try {
        await client.dispose(5000);
      } catch (error) {
        this.output.appendLine(`poimen-memory: stopping the server: ${errorMessage(error)}`);
      }
    }
  }

  restart(): Promise<void> {
    this.restarting = this.restarting.then(async () => {
      await this.stop();
      await this.start();
    });
    return this.restarting;
  }

  // -- the status bar ----------------------------------------------------------------

  private show(state: StoreState, detail?: string): void {
    this.state = state;
    const status = statusFor(state, detail);
    this.status.text = status.text;
    this.status.tooltip = status.tooltip;
    this.status.backgroundColor =
      state === "unreachable" ? new vscode.ThemeColor("statusBarItem.warningBackground") : undefined;
  }

  private clearRecheck(): void {
    if (this.recheck !== undefined) {
      clearInterval(this.recheck);
      this.recheck = undefined;
    }
  }

  private unreachable(detail: string): void {
    this.show("unreachable", detail);
    if (this.recheck === undefined) {
      this.recheck = setInterval(() => void this.checkStore(), RECHECK_MS);
    }
  }

  private reachable(): void {
    this.clearRecheck();
    this.show("reachable");
  }

  /** Ask the store something cheap; the answer sets the status bar item. */
  async checkStore(): Promise<void> {
    const client = this.client;
    if (client === undefined || !client.isRunning()) {
      this.show("stopped");
      return;
    }
    try {
      await client.sendRequest(ExecuteCommandRequest.type, {
        command: commands.QUERY,
        arguments: [probeArgument()],
      });
      this.reachable();
    } catch (error) {
      if (isUnreachable(error)) {
        this.unreachable(errorMessage(error));
      } else {
        // The server answered, so the store was asked or the request was refused: say so.
        this.output.appendLine(`poimen-memory: store check: ${errorMessage(error)}`);
        this.show("reachable", errorMessage(error));
      }
    }
  }

  // -- commands ----------------------------------------------------------------------

  /** Run a server command with one argument; errors are shown and undefined returned. */
  async execute(command: commands.ServerCommand, argument: JsonObject): Promise<unknown> {
    const client = this.client;
    if (client === undefined || !client.isRunning()) {
      void vscode.window.showErrorMessage(
        "poimen-memory: the language server is not running (Memories: restart server).",
      );
      return undefined;
    }
    try {
      const answer: unknown = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Window, title: `poimen-memory: ${command}` },
        () => client.sendRequest(ExecuteCommandRequest.type, { command, arguments: [argument] }),
      );
      if (this.state === "unreachable") {
        this.reachable();
      }
      return answer;
    } catch (error) {
      if (isUnreachable(error)) {
        this.unreachable(errorMessage(error));
      }
      void vscode.window.showErrorMessage(`poimen-memory: ${errorMessage(error)}`);
      return undefined;
    }
  }

  async ask(prompt: Prompt): Promise<void> {
    const input = await vscode.window.showInputBox({
      title: prompt.title,
      prompt: prompt.prompt,
      placeHolder: prompt.placeHolder,
      ignoreFocusOut: true,
      validateInput: (value) => prompt.validate(value),
    });
    if (input === undefined || prompt.validate(input) !== undefined) {
      return;
    }
    const answer = await this.execute(prompt.command, prompt.argument(input));
    if (answer === undefined) {
      return;
    }
    let markdown: string;
    try {
      markdown = renderResult(prompt.heading(input), parseResult(answer));
    } catch (error) {
      void vscode.window.showErrorMessage(`poimen-memory: ${errorMessage(error)}`);
      return;
    }
    await showMarkdown(markdown);
  }

  async refresh(): Promise<void> {
    const answer = await this.execute(commands.REFRESH, {});
    if (answer !== undefined) {
      void vscode.window.setStatusBarMessage("poimen-memory: caches dropped, lenses refreshed", 4000);
    }
  }

  register(context: vscode.ExtensionContext): void {
    const { PALETTE } = commands;
    context.subscriptions.push(
      this,
      vscode.commands.registerCommand(PALETTE.byCommit, () => this.ask(PROMPTS.byCommit)),
      vscode.commands.registerCommand(PALETTE.byAuthor, () => this.ask(PROMPTS.byAuthor)),
      vscode.commands.registerCommand(PALETTE.query, () => this.ask(PROMPTS.query)),
      vscode.commands.registerCommand(PALETTE.refresh, () => this.refresh()),
      vscode.commands.registerCommand(PALETTE.checkStore, () =>
        this.state === "stopped" ? this.restart() : this.checkStore(),
      ),
      vscode.commands.registerCommand(PALETTE.restartServer, () => this.restart()),
      vscode.commands.registerCommand(PALETTE.showOutput, () => this.output.show(true)),
      vscode.workspace.onDidChangeConfiguration((event) => {
        if (
          event.affectsConfiguration(`${SECTION}.server`) ||
          event.affectsConfiguration(`${SECTION}.${ALLOW_WORKSPACE}`)
        ) {
          void this.restart();
        }
      }),
    );
  }

  dispose(): void {
    this.clearRecheck();
    this.status.dispose();
    this.output.dispose();
  }
}

/** Show Markdown in the preview (an untitled document; the editor if there is no preview). */
async function showMarkdown(markdown: string): Promise<void> {
  const document = await vscode.workspace.openTextDocument({ language: "markdown", content: markdown });
  try {
    await vscode.commands.executeCommand("markdown.showPreview", document.uri);
  } catch {
    await vscode.window.showTextDocument(document, { preview: true });
  }
}

let extension: MemoryExtension | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  extension = new MemoryExtension();
  extension.register(context);
  await extension.start();
}

export async function deactivate(): Promise<void> {
  const current = extension;
  extension = undefined;
  await current?.stop();
}
