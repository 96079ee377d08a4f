"""A small kopf operator, run by test_kopf.py against `steady server` as kopf users run
theirs (`kopf run`): a Greeting owns a ConfigMap with its message, reports in status,
posts an Event, keeps a timer, and cleans up behind kopf's finalizer."""

import kopf
import kubernetes

GROUP, VERSION, PLURAL = "demo.steady.dev", "v1", "greetings"


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_):
    kubernetes.config.load_kube_config()
    settings.watching.server_timeout = 30
    settings.persistence.finalizer = "demo.steady.dev/greetings"


@kopf.on.create(GROUP, VERSION, PLURAL)
def create_message(spec, name, namespace, body, **_):
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-message"},
        "data": {"message": spec.get("message", "")},
    }
    kopf.adopt(configmap)
    kubernetes.client.CoreV1Api().create_namespaced_config_map(namespace, configmap)
    kopf.info(body, reason="Created", message=f"configmap {name}-message")
    return {"configmap": f"{name}-message"}


@kopf.on.field(GROUP, VERSION, PLURAL, field="spec.message")
def message_changed(old, new, name, namespace, **_):
    if old is None:
        return None
    kubernetes.client.CoreV1Api().patch_namespaced_config_map(
        f"{name}-message", namespace, {"data": {"message": new}})
    return {"message": new}


@kopf.timer(GROUP, VERSION, PLURAL, interval=1.0)
def heartbeat(patch, **_):
    patch.status["heartbeat"] = True


@kopf.on.delete(GROUP, VERSION, PLURAL)
def say_goodbye(name, namespace, **_):
    kubernetes.client.CoreV1Api().create_namespaced_config_map(namespace, {
        "metadata": {"name": f"{name}-goodbye"},
        "data": {"from": name},
    })
