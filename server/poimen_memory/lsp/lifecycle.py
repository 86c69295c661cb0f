"""The server's life: initialize (workspace folders, settings, the lookup service), the
settings the client pulls or pushes later, live refresh after ingests, and shutdown."""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Final

from lsprotocol import types
from pygls.capabilities import get_capability

from poimen_memory.domain import ContentError
from poimen_memory.errors import ConfigError, StoreUnavailable
from poimen_memory.lookup import LookupService, NotInRepository
from poimen_memory.lsp.config import SECTION, names_section, parse_config
from poimen_memory.lsp.documents import workspace_roots
from poimen_memory.operations import Services, build_services
from poimen_memory.settings import Settings, load_settings, redact_dsn
from poimen_memory.wiring import IngestListener, open_store, settle_heap

if TYPE_CHECKING:
    from poimen_memory.lsp.server import PoimenServer

__all__ = [
    "apply_config",
    "did_change_configuration",
    "initialize",
    "initialized",
    "pull_configuration",
    "rebuild_service",
    "shutdown",
    "start_listener",
]

log = logging.getLogger("poimen_memory.lsp")

# The store connects on first use; an editor request waits at most 1.5 s for it.
_open_store = partial(open_store, timeout=1.5, statement_timeout_ms=1500, lazy=True, warm=True)

# Each workspace folder's repository is found in a daemon thread of its own, never on the
# event loop: a read of a file in .git can block for ever (a FIFO), and a thread stuck in
# open() cannot be stopped. initialize waits this long for them, then answers anyway...
FOLDER_WAIT: Final = 2.0
# ... and a folder still not found after this long is reported (once) and left out.
FOLDER_REPORT_AFTER: Final = 5.0
# A repository below a folder, found when a file of it is first asked about, likewise in a
# thread: the request waits this long, later ones for its directory not at all.
FIND_WAIT: Final = 3.0


async def initialize(ls: PoimenServer, params: types.InitializeParams) -> None:
    """The workspace folders and initializationOptions; then the lookup service. Answers
    within FOLDER_WAIT seconds, whatever the folders' repositories do."""
    ls.loop = asyncio.get_running_loop()
    ls.state.roots = workspace_roots(params)
    apply_config(ls, params.initialization_options, base=_machine_settings(ls))
    searches = rebuild_service(ls)
    settle_heap()  # the server is built: what start-up made is never collected again
    if searches:
        await asyncio.wait([asyncio.wrap_future(f) for f in searches], timeout=FOLDER_WAIT)


async def initialized(ls: PoimenServer, params: types.InitializedParams) -> None:
    """Ask for the configuration section (it replaces the initializationOptions)."""
    ls.loop = asyncio.get_running_loop()
    await pull_configuration(ls)


async def pull_configuration(ls: PoimenServer) -> None:
    """Take the "poimenMemory" section from workspace/configuration, where the client has it."""
    if not get_capability(ls.client_capabilities, "workspace.configuration", False):
        return
    try:
        values = await ls.workspace_configuration_async(
            types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
        )
    except Exception as exc:  # a client that cannot answer keeps its settings
        log.info("workspace/configuration failed: %s", exc)
        return
    if values and values[0] is not None:
        apply_config(ls, values[0])


async def did_change_configuration(
    ls: PoimenServer, params: types.DidChangeConfigurationParams
) -> None:
    """New settings, pushed with the notification or else pulled; lenses are recomputed."""
    settings = params.settings
    if names_section(settings):
        apply_config(ls, settings)
    else:
        await pull_configuration(ls)
    ls.refresh_lenses()


def shutdown(ls: PoimenServer, params: None) -> None:
    """Stop listening for ingests."""
    if ls.state.listener is not None:
        ls.state.listener.stop()


def _machine_settings(ls: PoimenServer) -> Settings:
    """The settings of this machine (``POIMEN_*``, the config file), under the client's; a
    bad one is shown and the defaults are used instead."""
    try:
        return load_settings()
    except ConfigError as exc:
        shown = redact_dsn(str(exc))
        ls.window_show_message(types.ShowMessageParams(types.MessageType.Warning, shown))
        return Settings()


def apply_config(ls: PoimenServer, raw: object, *, base: Settings | None = None) -> None:
    """Take new settings; report invalid ones (name and value) and use their defaults. A
    problem is shown once: clients send the same settings as initializationOptions and again
    on workspace/configuration."""
    old = ls.state.config
    config, problems = parse_config(raw, base or old)
    ls.state.config = config
    logging.getLogger("poimen_memory").setLevel(config.log_level.upper())
    shown_before, ls.state.config_problems = ls.state.config_problems, frozenset(problems)
    for problem in dict.fromkeys(problems):  # a bad dsn value is shown without its password
        if problem in shown_before:
            continue
        shown = redact_dsn(problem)
        ls.window_show_message(types.ShowMessageParams(types.MessageType.Warning, shown))
    # The service is built from these; a new value builds a new one.
    built_from = ("dsn", "project", "repo", "pending_days", "blame")
    if ls.state.services is not None and any(
        getattr(config, name) != getattr(old, name) for name in built_from
    ):
        rebuild_service(ls)
    ls.state.lenses.clear()


def rebuild_service(ls: PoimenServer) -> list[Future[None]]:
    """(Re)create the store and the services from the current settings; the searches for
    the workspace folders' repositories it starts (they run on in the background)."""
    config = ls.state.config
    old = ls.state.services
    try:
        store = _open_store(config)
    except (ConfigError, ContentError, StoreUnavailable) as exc:
        message = redact_dsn(f"{SECTION}.dsn: {exc}", config.dsn)
        ls.window_show_message(types.ShowMessageParams(types.MessageType.Error, message))
        store = _open_store(config.model_copy(update={"dsn": None}))
    services = build_services(store, config, serving=True)
    services.service.checkouts.find_timeout = FIND_WAIT
    ls.state.services = services
    searches = [search for root in ls.state.roots if (search := _find_folder(ls, services, root))]
    if searches:
        timer = threading.Timer(FOLDER_REPORT_AFTER, ls.call_soon, (partial(_report_folders, ls),))
        timer.daemon = True
        timer.start()
    # Connect now, in the background, so the first hover does not pay for it.
    threading.Thread(target=store.warm_up, name="poimen-connect", daemon=True).start()
    if old is not None:
        threading.Thread(target=old.store.close, daemon=True).start()
    start_listener(ls)
    return searches


def _find_folder(ls: PoimenServer, services: Services, root: Path) -> Future[None] | None:
    """Register the work tree of workspace folder ``root`` in a daemon thread (it holds no
    lock while it reads, and exit does not wait for it); None when a search for it is still
    under way (its files are left out until that one ends; a later file finds its tree)."""
    if not ls.state.pending_roots.begin(root):
        return None
    done: Future[None] = Future()

    def find() -> None:
        problem = None
        try:
            _, blamer = services.service.checkouts.add(root)
            blamer.repo.warm()  # its git process up before the first lookup needs it
        except NotInRepository as exc:  # a folder of several repositories, or of none
            log.info("workspace folder %s: %s", root, exc)
        except Exception as exc:  # git failed: said once; never takes the server down
            problem = f"{str(exc).rstrip('.')}; no memories are shown for this folder"
        finally:
            ls.state.pending_roots.end(root)
            done.set_result(None)
        if problem is not None:
            ls.call_soon(partial(_report_folder, ls, root, problem))

    threading.Thread(target=find, name="poimen-folder", daemon=True).start()
    return done


def _report_folder(ls: PoimenServer, root: Path, problem: str) -> None:
    """Show, once for each folder, why its memories are not shown (one line)."""
    if root in ls.state.roots_reported:
        return
    ls.state.roots_reported.add(root)
    message = " ".join(f"workspace folder {root}: {problem}".split())
    log.info("%s", message)
    ls.window_show_message(types.ShowMessageParams(types.MessageType.Warning, message))


def _report_folders(ls: PoimenServer) -> None:
    """Report the folders whose repository has not answered yet; they stay left out."""
    for root in ls.state.roots:
        if root in ls.state.pending_roots:
            _report_folder(
                ls,
                root,
                f"its git repository did not answer within {FOLDER_REPORT_AFTER:g} s (a file "
                "in .git that never ends, such as a FIFO?); no memories are shown for this "
                "folder",
            )


def start_listener(ls: PoimenServer) -> None:
    """LISTEN for ingests; drop what is cached for the repository and refresh lenses."""
    if ls.state.listener is not None:
        ls.state.listener.stop()
    if ls.state.services is None:
        return
    service = ls.state.services.service

    def on_ingest(project: str, repo: str) -> None:
        ls.call_soon(lambda: _ingested(ls, service, project, repo))

    ls.state.listener = IngestListener(service.store.dsn, on_ingest)
    ls.state.listener.start()


def _ingested(ls: PoimenServer, service: LookupService, project: str, repo: str) -> None:
    """On the event loop, after an ingest into ``repo``: forget its answers, refresh lenses."""
    if repo not in {r.value for r in service.checkouts.identities()}:
        return
    dropped = service.invalidate()
    log.info("ingest into %s (%s): dropped %d cached documents", project, repo, dropped)
    ls.refresh_lenses()
