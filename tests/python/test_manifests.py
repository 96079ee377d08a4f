"""`steady manifests` output is valid Kubernetes for a real cluster: every built-in kind
passes the kubernetes-validate schemas of Kubernetes 1.32 in strict mode (no unknown
fields), and the operator's RBAC grants only what the reconciler uses."""

import os
import subprocess

import kubernetes_validate
import yaml

STEADY_BIN = os.environ.get(
    "STEADY_BIN",
    os.path.join(os.path.dirname(__file__), "..", "..", "target", "debug", "steady"),
)


def manifests():
    out = subprocess.run([STEADY_BIN, "manifests"], check=True, capture_output=True, text=True).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def test_every_builtin_manifest_validates_against_kubernetes_1_32():
    docs = manifests()
    kinds = [d["kind"] for d in docs]
    assert kinds == [
        "CustomResourceDefinition",
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
    ]
    for doc in docs:
        kubernetes_validate.validate(doc, "1.32.0", strict=True)


def test_the_deployment_runs_the_operator_with_probes_and_metrics():
    deployment = next(d for d in manifests() if d["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][0] == "operator"
    assert "--leader-elect" in container["args"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert any(p["name"] == "metrics" for p in container["ports"])


def test_rbac_is_least_privilege():
    role = next(d for d in manifests() if d["kind"] == "ClusterRole")
    granted = {(g, r): set(rule["verbs"]) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert granted[("steady.dev", "caches")] == {"get", "list", "watch"}
    assert "delete" not in granted[("", "services")]
    assert all("*" not in verbs for verbs in granted.values())
