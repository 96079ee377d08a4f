//! Manifests that install the operator on a real cluster: the CRD, a ServiceAccount, a
//! least-privilege ClusterRole and its binding, and a Deployment with probes and a metrics
//! port. Rendered as one multi-document YAML stream for `kubectl apply -f -`.

use serde_json::{Value, json};

use crate::types::crd;

/// Where and how the operator is deployed.
#[derive(Debug, Clone)]
pub struct ManifestOptions {
    /// Namespace of the ServiceAccount and Deployment.
    pub namespace: String,
    /// The operator's container image (runs `steady operator`).
    pub image: String,
    /// Port of `/metrics`, `/healthz` and `/readyz`.
    pub metrics_port: u16,
}

impl Default for ManifestOptions {
    fn default() -> Self {
        ManifestOptions {
            namespace: "steady-system".into(),
            image: "ghcr.io/steady-dev/steady:latest".into(),
            metrics_port: 8080,
        }
    }
}

/// The operator's name: its ServiceAccount, ClusterRole, binding and Deployment.
pub const NAME: &str = "steady-cache-operator";

/// The rules the operator needs, and no more.
pub fn cluster_role_rules() -> Value {
    json!([
        {"apiGroups": ["steady.dev"], "resources": ["caches"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["steady.dev"], "resources": ["caches/status"], "verbs": ["get", "patch", "update"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "create", "delete"]},
        {"apiGroups": [""], "resources": ["services"], "verbs": ["get", "list", "watch", "create", "update", "patch"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]}
    ])
}

/// Every object, in apply order (the CRD first).
pub fn objects(options: &ManifestOptions) -> Result<Vec<Value>, serde_json::Error> {
    let ns = options.namespace.as_str();
    let labels = json!({"app.kubernetes.io/name": NAME});
    let probe = |path: &str| {
        json!({
            "httpGet": {"path": path, "port": "metrics"},
            "periodSeconds": 10,
            "failureThreshold": 3
        })
    };
    Ok(vec![
        serde_json::to_value(crd())?,
        json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns}
        }),
        json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": NAME, "namespace": ns, "labels": labels}
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": NAME, "labels": labels},
            "rules": cluster_role_rules()
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": NAME, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": ns}]
        }),
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": NAME, "namespace": ns, "labels": labels},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": NAME,
                        "securityContext": {"runAsNonRoot": true},
                        "containers": [{
                            "name": "operator",
                            "image": options.image,
                            "args": ["operator", "--leader-elect", "--metrics-addr", format!("0.0.0.0:{}", options.metrics_port)],
                            "ports": [{"name": "metrics", "containerPort": options.metrics_port, "protocol": "TCP"}],
                            "livenessProbe": probe("/healthz"),
                            "readinessProbe": probe("/readyz"),
                            "resources": {
                                "requests": {"cpu": "50m", "memory": "64Mi"},
                                "limits": {"memory": "256Mi"}
                            },
                            "securityContext": {
                                "allowPrivilegeEscalation": false,
                                "readOnlyRootFilesystem": true,
                                "capabilities": {"drop": ["ALL"]}
                            }
                        }]
                    }
                }
            }
        }),
    ])
}

/// Why manifests could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("encoding a manifest as JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("encoding a manifest as YAML: {0}")]
    Yaml(#[from] serde_yaml::Error),
}

/// All manifests as one YAML stream (`---` separated).
pub fn manifests_yaml(options: &ManifestOptions) -> Result<String, ManifestError> {
    let objects = objects(options)?;
    let mut out = String::new();
    for object in objects {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&object)?);
    }
    Ok(out)
}
