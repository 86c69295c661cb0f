"""The language server (pygls): hover, code lens, commands, live refresh."""
