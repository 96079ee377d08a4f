#!/usr/bin/env bash
# The project's one test command: builds the workspace, runs the Rust tests, then the
# Python-client suite (tests/python) against the freshly built `steady` binary.
# Works from a clean clone: creates .venv and installs tests/python/requirements.txt.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# The Python suite runs under the newest CPython the machine has (pyenv's 3.13 where it is
# installed): Python 3.13 verifies certificates strictly, and clients on it must work.
newest_python() {
    local candidate
    local pyenv="${PYENV_ROOT:-$HOME/.pyenv}/versions"
    for candidate in python3.14 "$pyenv"/3.14*/bin/python3 python3.13 "$pyenv"/3.13*/bin/python3 \
        python3.12; do
        if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import venv, ensurepip' 2>/dev/null; then
            echo "$candidate"
            return
        fi
    done
    echo python3
}
PYTHON="${PYTHON:-$(newest_python)}"
VENV="$ROOT/.venv"
REQS="$ROOT/tests/python/requirements.txt"
STAMP="$VENV/.requirements.sha256"

step() { printf '\n==> %s\n' "$*"; }

# --- Python virtualenv (recreated if missing or broken) ---------------------------------
if ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1 \
    || [[ "$("$VENV/bin/python" --version 2>&1)" != "$("$PYTHON" --version 2>&1)" ]]; then
    step "creating $VENV with $("$PYTHON" --version 2>&1)"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
fi

want_hash="$( (cat "$REQS"; "$VENV/bin/python" --version) | sha256sum | cut -d' ' -f1)"
if [[ "$(cat "$STAMP" 2>/dev/null || true)" != "$want_hash" ]]; then
    step "installing tests/python/requirements.txt"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$REQS"
    echo "$want_hash" > "$STAMP"
fi

# --- Rust ---------------------------------------------------------------------------------
step "cargo build --workspace --all-targets"
cargo build --workspace --all-targets

step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

# The runtime's and the simulator's public API is what operator authors read: every public
# item is documented (#![deny(missing_docs)] in each crate) and the docs build without
# broken links.
step "cargo doc (steady-runtime, steady-sim) -D warnings"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -p steady-runtime -p steady-sim

step "cargo test --workspace"
cargo test --workspace

# --- Python client suite ----------------------------------------------------------------
step "pytest tests/python"
STEADY_BIN="${STEADY_BIN:-target/debug/steady}" "$VENV/bin/python" -m pytest -q tests/python
