"""Fixtures for the Python-client tests: one fresh `steady server` per test session, and
`launch` for tests that start the binary their own way (`steady up` for the web view).

The binary comes from $STEADY_BIN (default: <repo>/target/debug/steady). The server gets a
temporary data dir, listens on a free loopback port and writes a kubeconfig that the
official `kubernetes` client loads.
"""

import os
import queue
import re
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
from kubernetes import client, config

REPO = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT = 30.0
LISTEN_RE = re.compile(r"steady server listening on (https://\S+)")


class SteadyServer:
    def __init__(self, proc, url, kubeconfig, data_dir, log_path):
        self.proc = proc
        self.url = url
        self.kubeconfig = kubeconfig
        self.data_dir = data_dir
        self.log_path = log_path

    def log_tail(self, n=60):
        try:
            lines = Path(self.log_path).read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])


def _steady_bin():
    path = Path(os.environ.get("STEADY_BIN") or REPO / "target" / "debug" / "steady")
    if not path.is_absolute():
        path = REPO / path
    if not path.exists():
        pytest.exit(f"steady binary not found at {path}: run `cargo build -p steady` "
                    f"or set STEADY_BIN", returncode=2)
    return path


def _stop(proc):
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def launch(base, args, patterns):
    """Start `steady ARGS` in `base` and wait until its stdout has matched every regex in
    `patterns` (name -> compiled regex with one group). Returns (proc, {name: group}, log
    file, log path); fails the test with the output if it exits or times out first."""
    log_path = base / "steady.log"
    log = open(log_path, "wb")
    proc = subprocess.Popen(
        [str(_steady_bin()), *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=log,
        cwd=str(base),
    )

    # Read stdout on a thread so the startup wait can time out and the pipe never fills.
    lines = queue.Queue()

    def pump():
        for raw in proc.stdout:
            lines.put(raw.decode(errors="replace"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()

    found = {}
    seen = []
    deadline = time.monotonic() + STARTUP_TIMEOUT
    try:
        while len(found) < len(patterns):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RuntimeError(f"timed out waiting for {sorted(set(patterns) - set(found))}")
            try:
                line = lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise RuntimeError(f"steady {args[0]} exited early (code {proc.wait()})")
            seen.append(line)
            for name, pattern in patterns.items():
                m = pattern.search(line)
                if m:
                    found[name] = m.group(1)
    except Exception as e:
        _stop(proc)
        log.close()
        pytest.fail(f"{e}\nstdout:\n{''.join(seen)}\nstderr:\n{log_path.read_text(errors='replace')}",
                    pytrace=False)
    return proc, found, log, log_path


@pytest.fixture(scope="session")
def steady_server(tmp_path_factory):
    base = tmp_path_factory.mktemp("steady")
    data_dir = base / "data"
    kubeconfig = base / "kubeconfig"
    proc, found, log, log_path = launch(
        base,
        ["server", "--data-dir", str(data_dir), "--listen", "127.0.0.1:0",
         "--write-kubeconfig", str(kubeconfig)],
        {"url": LISTEN_RE},
    )
    if not kubeconfig.exists():
        _stop(proc)
        log.close()
        pytest.fail(f"kubeconfig {kubeconfig} missing after startup", pytrace=False)
    server = SteadyServer(proc, found["url"], kubeconfig, data_dir, log_path)
    try:
        yield server
    finally:
        _stop(proc)
        log.close()


@pytest.fixture(scope="session")
def api_client(steady_server):
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(steady_server.kubeconfig),
                            client_configuration=configuration)
    api = client.ApiClient(configuration)
    try:
        yield api
    finally:
        api.close()


@pytest.fixture(scope="session")
def namespace():
    return "default"


@pytest.fixture
def unique():
    """A short DNS-1123-safe suffix so tests never collide on names."""
    return uuid.uuid4().hex[:8]


@pytest.fixture(autouse=True)
def _server_alive_check(request, steady_server):
    yield
    if steady_server.proc.poll() is not None:
        pytest.fail(f"steady server died (code {steady_server.proc.returncode}); log tail:\n"
                    f"{steady_server.log_tail()}", pytrace=False)
