#!/usr/bin/env bash
# The project's one test command: builds the workspace, runs the Rust tests, then the
# Python-client suite (tests/python) against the freshly built `steady` binary.
# Works from a clean clone: creates .venv and installs tests/python/requirements.txt.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

PYTHON="${PYTHON:-python3}"
VENV="$ROOT/.venv"
REQS="$ROOT/tests/python/requirements.txt"
STAMP="$VENV/.requirements.sha256"

step() { printf '\n==> %s\n' "$*"; }

# --- Python virtualenv (recreated if missing or broken) ---------------------------------
if ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
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

step "cargo test --workspace"
cargo test --workspace

# --- Python client suite ----------------------------------------------------------------
step "pytest tests/python"
STEADY_BIN="${STEADY_BIN:-target/debug/steady}" "$VENV/bin/python" -m pytest -q tests/python
