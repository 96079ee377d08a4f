"""kopf (the Python operator framework) against a live `steady server`: a real
`kopf run` of kopf_operator/greetings.py, checked through the official client."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from test_client import wait_for, wait_gone

OPERATOR = Path(__file__).parent / "kopf_operator" / "greetings.py"
GROUP, VERSION, PLURAL = "demo.steady.dev", "v1", "greetings"


def greeting_crd():
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": PLURAL, "singular": "greeting", "kind": "Greeting"},
            "versions": [{
                "name": VERSION, "served": True, "storage": True,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object",
                                 "properties": {"message": {"type": "string"}}},
                        "status": {"type": "object",
                                   "x-kubernetes-preserve-unknown-fields": True},
                    },
                }},
            }],
        },
    }


@pytest.fixture(scope="module")
def kopf_namespace(api_client, steady_server, tmp_path_factory):
    """A namespace of its own, the Greeting CRD, and `kopf run` serving that namespace
    until the module's tests are done."""
    core = client.CoreV1Api(api_client)
    ext = client.ApiextensionsV1Api(api_client)
    name = "kopf-greetings"
    core.create_namespace({"metadata": {"name": name}})
    try:
        ext.create_custom_resource_definition(greeting_crd())
    except ApiException as e:
        if e.status != 409:
            raise
    wait_for(lambda: any(c.type == "Established" and c.status == "True"
                         for c in (ext.read_custom_resource_definition(
                             f"{PLURAL}.{GROUP}").status.conditions or [])),
             "the Greeting CRD established")
    log_path = tmp_path_factory.mktemp("kopf") / "kopf.log"
    proc = start_kopf(steady_server, log_path, "--standalone", "--namespace", name)
    try:
        yield name, proc, log_path
    finally:
        stop_kopf(proc)


def start_kopf(steady_server, log_path, *args):
    """`kopf run ARGS kopf_operator/greetings.py` with the server's kubeconfig."""
    env = dict(os.environ, KUBECONFIG=str(steady_server.kubeconfig))
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "kopf", "run", *args, str(OPERATOR)],
            env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def stop_kopf(proc):
    """SIGTERM, as Kubernetes stops a pod: kopf shuts down gracefully."""
    proc.terminate()
    try:
        return proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
        raise


def _operator_alive(proc, log_path):
    if proc.poll() is not None:
        pytest.fail(f"kopf exited ({proc.returncode}):\n{log_path.read_text(errors='replace')}")


def _eventually(proc, log_path, fn, what, timeout=30.0):
    def check():
        _operator_alive(proc, log_path)
        return fn()
    try:
        return wait_for(check, what, timeout=timeout)
    except AssertionError:
        pytest.fail(f"{what}; kopf's log:\n{log_path.read_text(errors='replace')[-6000:]}")


def test_kopf_runs_an_operator_unchanged(api_client, kopf_namespace, unique):
    namespace, proc, log_path = kopf_namespace
    core = client.CoreV1Api(api_client)
    custom = client.CustomObjectsApi(api_client)
    name = f"hello-{unique}"
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "Greeting",
        "metadata": {"name": name}, "spec": {"message": "hi"},
    })

    def read():
        return custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)

    # The create handler ran once, its result kept in status, kopf's finalizer added.
    greeting = _eventually(
        proc, log_path,
        lambda: (g := read()).get("status", {}).get("create_message") and g,
        "the create handler's result in status")
    assert greeting["status"]["create_message"] == {"configmap": f"{name}-message"}
    assert "demo.steady.dev/greetings" in greeting["metadata"]["finalizers"]
    configmap = core.read_namespaced_config_map(f"{name}-message", namespace)
    assert configmap.data == {"message": "hi"}
    owner = configmap.metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.uid, owner.controller) == (
        "Greeting", name, greeting["metadata"]["uid"], True)
    _eventually(proc, log_path, lambda: read().get("status", {}).get("heartbeat"),
                "the timer's status patch")

    # kopf.info posts a core/v1 Event about the Greeting.
    def created_event():
        events = core.list_namespaced_event(
            namespace, field_selector=f"involvedObject.name={name}").items
        return [e for e in events if e.reason == "Created"]
    event = _eventually(proc, log_path, created_event, "kopf's Event")[0]
    assert event.involved_object.kind == "Greeting"
    assert event.message == f"configmap {name}-message"

    # A change to the field is handled by the field handler, diffed against kopf's
    # last-handled-configuration annotation.
    custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name,
                                          {"spec": {"message": "hello again"}})
    _eventually(proc, log_path,
                lambda: core.read_namespaced_config_map(
                    f"{name}-message", namespace).data == {"message": "hello again"},
                "the field handler's patch")
    annotations = read()["metadata"]["annotations"]
    assert '"hello again"' in annotations["kopf.zalando.org/last-handled-configuration"]

    # Deleting runs the delete handler, then kopf removes its finalizer; the garbage
    # collector takes the owned ConfigMap.
    custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    def goodbye():
        try:
            return core.read_namespaced_config_map(f"{name}-goodbye", namespace)
        except ApiException as e:
            if e.status != 404:
                raise
            return None
    assert _eventually(proc, log_path, goodbye, "the delete handler's ConfigMap").data == {
        "from": name}
    wait_gone(custom.get_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, name,
              timeout=30.0)
    wait_gone(core.read_namespaced_config_map, f"{name}-message", namespace, timeout=30.0)
    _operator_alive(proc, log_path)
    errors = [line for line in log_path.read_text(errors="replace").splitlines()
              if "[ERROR" in line or "Traceback" in line]
    assert not errors, "\n".join(errors)


def peering_crd():
    """kopf's namespaced peering resource, as its documentation installs it."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "kopfpeerings.kopf.dev"},
        "spec": {
            "group": "kopf.dev", "scope": "Namespaced",
            "names": {"plural": "kopfpeerings", "singular": "kopfpeering",
                      "kind": "KopfPeering"},
            "versions": [{
                "name": "v1", "served": True, "storage": True,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"status": {
                        "type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }},
            }],
        },
    }


def test_kopf_peering_announces_and_withdraws_the_operator(
        api_client, steady_server, kopf_namespace, tmp_path):
    """Without --standalone, kopf keeps its presence in a KopfPeering's status (merge
    patches with nulls to remove keys) and removes it when it stops."""
    namespace, _, _ = kopf_namespace
    ext = client.ApiextensionsV1Api(api_client)
    custom = client.CustomObjectsApi(api_client)
    ext.create_custom_resource_definition(peering_crd())
    wait_for(lambda: any(c.type == "Established" and c.status == "True"
                         for c in (ext.read_custom_resource_definition(
                             "kopfpeerings.kopf.dev").status.conditions or [])),
             "the KopfPeering CRD established")
    custom.create_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfpeerings", {
        "apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": {"name": "steady"},
    })

    def peers():
        peering = custom.get_namespaced_custom_object(
            "kopf.dev", "v1", namespace, "kopfpeerings", "steady")
        return peering.get("status") or {}

    log_path = tmp_path / "kopf-peering.log"
    proc = start_kopf(steady_server, log_path, "--peering", "steady", "--priority", "7",
                      "--namespace", namespace)
    try:
        announced = _eventually(proc, log_path, peers, "kopf's entry in the peering")
        [(identity, entry)] = announced.items()
        assert entry["priority"] == 7 and entry["lifetime"] > 0, announced
        assert entry["lastseen"]
    finally:
        assert stop_kopf(proc) == 0, log_path.read_text(errors="replace")
    assert identity not in peers(), "kopf withdraws its entry when it stops"
