//! Resource quantities in built-in kinds, read as kube-apiserver decodes them: every
//! `resource.Quantity` field is parsed and written back in kube's canonical form (a
//! client that wrote `cpu: 1000m`, `cpu: 1` as a number or `memory: 1.5Gi` reads `"1"`,
//! `"1"` and `"1536Mi"`), and a malformed one refuses the body with kube's 400. Operators
//! that compare the quantities they asked for with what they read meet the same
//! normalisation as on a cluster. Custom resources keep their strings as given (kube has
//! no quantity format in CRD schemas).
//! Must not know: HTTP, the store; what quotas charge (`steady_quota`).

use serde_json::Value;
use steady_quota::Quantity;

use crate::error::{ApiError, ApiResult};

/// Where a pod spec holds quantities, relative to the spec. `name[]` steps into each
/// element of an array, a final `name{}` is a map of quantities, a final `name` one
/// quantity.
const POD_SPEC: &[&str] = &[
    "containers[].resources.limits{}",
    "containers[].resources.requests{}",
    "initContainers[].resources.limits{}",
    "initContainers[].resources.requests{}",
    "ephemeralContainers[].resources.limits{}",
    "ephemeralContainers[].resources.requests{}",
    "overhead{}",
    "resources.limits{}",
    "resources.requests{}",
    "volumes[].emptyDir.sizeLimit",
    "volumes[].ephemeral.volumeClaimTemplate.spec.resources.limits{}",
    "volumes[].ephemeral.volumeClaimTemplate.spec.resources.requests{}",
];

const POD_STATUS: &[&str] = &[
    "containerStatuses[].allocatedResources{}",
    "containerStatuses[].resources.limits{}",
    "containerStatuses[].resources.requests{}",
    "initContainerStatuses[].allocatedResources{}",
    "initContainerStatuses[].resources.limits{}",
    "initContainerStatuses[].resources.requests{}",
];

const CLAIM_SPEC: &[&str] = &["resources.limits{}", "resources.requests{}"];

/// Where quantities sit in one kind: a prefix and the paths under it.
type Places = &'static [(&'static str, &'static [&'static str])];

fn places(group: &str, plural: &str) -> Places {
    match (group, plural) {
        ("", "pods") => &[("spec", POD_SPEC), ("status", POD_STATUS)],
        ("", "podtemplates") => &[("template.spec", POD_SPEC)],
        ("", "replicationcontrollers")
        | ("apps", "replicasets" | "deployments" | "daemonsets")
        | ("batch", "jobs") => &[("spec.template.spec", POD_SPEC)],
        ("apps", "statefulsets") => &[
            ("spec.template.spec", POD_SPEC),
            ("spec.volumeClaimTemplates[].spec", CLAIM_SPEC),
        ],
        ("batch", "cronjobs") => &[("spec.jobTemplate.spec.template.spec", POD_SPEC)],
        ("", "persistentvolumeclaims") => &[
            ("spec", CLAIM_SPEC),
            ("status", &["capacity{}", "allocatedResources{}"]),
        ],
        ("", "persistentvolumes") => &[("spec", &["capacity{}"])],
        ("", "nodes") => &[("status", &["capacity{}", "allocatable{}"])],
        ("", "resourcequotas") => &[("spec", &["hard{}"]), ("status", &["hard{}", "used{}"])],
        ("", "limitranges") => &[(
            "spec.limits[]",
            &[
                "max{}",
                "min{}",
                "default{}",
                "defaultRequest{}",
                "maxLimitRequestRatio{}",
            ],
        )],
        ("autoscaling", "horizontalpodautoscalers") => &[
            (
                "spec.metrics[]",
                &[
                    "object.target.value",
                    "object.target.averageValue",
                    "pods.target.averageValue",
                    "resource.target.averageValue",
                    "containerResource.target.averageValue",
                    "external.target.value",
                    "external.target.averageValue",
                ],
            ),
            (
                "status.currentMetrics[]",
                &[
                    "object.current.value",
                    "object.current.averageValue",
                    "pods.current.averageValue",
                    "resource.current.averageValue",
                    "containerResource.current.averageValue",
                    "external.current.value",
                    "external.current.averageValue",
                ],
            ),
        ],
        ("node.k8s.io", "runtimeclasses") => &[("overhead", &["podFixed{}"])],
        ("storage.k8s.io", "csistoragecapacities") => &[("", &["capacity", "maximumVolumeSize"])],
        _ => &[],
    }
}

/// Canonicalise every quantity of a built-in object; `kind` and `version` name it in the
/// error, as kube's decoder does.
pub(crate) fn canonicalize(
    group: &str,
    plural: &str,
    kind: &str,
    version: &str,
    obj: &mut Value,
) -> ApiResult<()> {
    for (prefix, paths) in places(group, plural) {
        for path in *paths {
            let steps = prefix
                .split('.')
                .chain(path.split('.'))
                .filter(|s| !s.is_empty());
            visit(obj, &steps.collect::<Vec<_>>(), &mut canonical).map_err(|why| {
                ApiError::bad_request(format!(
                    "{kind} in version \"{version}\" cannot be handled as a {kind}: {why}"
                ))
            })?;
        }
    }
    Ok(())
}

/// A JSON quantity (a string, or a number as YAML writes `cpu: 1`) in canonical form.
fn canonical(value: &mut Value) -> Result<(), String> {
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Null => "0".to_string(),
        _ => value.to_string(),
    };
    let quantity = Quantity::parse(&text).map_err(|e| e.to_string())?;
    *value = Value::String(quantity.to_string());
    Ok(())
}

fn visit(
    value: &mut Value,
    steps: &[&str],
    leaf: &mut impl FnMut(&mut Value) -> Result<(), String>,
) -> Result<(), String> {
    let Some((step, rest)) = steps.split_first() else {
        return leaf(value);
    };
    let (field, shape) = match step.len().checked_sub(2).map(|i| step.split_at(i)) {
        Some((field, "[]")) => (field, "[]"),
        Some((field, "{}")) => (field, "{}"),
        _ => (*step, ""),
    };
    let Some(inner) = value.as_object_mut().and_then(|o| o.get_mut(field)) else {
        return Ok(());
    };
    match shape {
        "[]" => {
            for element in inner.as_array_mut().into_iter().flatten() {
                visit(element, rest, leaf)?;
            }
            Ok(())
        }
        "{}" => {
            for quantity in inner
                .as_object_mut()
                .into_iter()
                .flat_map(|m| m.values_mut())
            {
                leaf(quantity)?;
            }
            Ok(())
        }
        _ if rest.is_empty() && inner.is_null() => Ok(()),
        _ => visit(inner, rest, leaf),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_deployments_pod_template_quantities_are_canonical() {
        let mut deployment = json!({"spec": {"template": {"spec": {
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": 1, "memory": "1.5Gi"},
                                            "limits": {"cpu": "1000m", "memory": "1536Mi"}}},
                {"name": "b"}
            ],
            "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "0.5Gi"}}]
        }}}});
        canonicalize("apps", "deployments", "Deployment", "v1", &mut deployment)
            .expect("canonical");
        let spec = &deployment["spec"]["template"]["spec"];
        assert_eq!(
            spec["containers"][0]["resources"],
            json!({"requests": {"cpu": "1", "memory": "1536Mi"}, "limits": {"cpu": "1", "memory": "1536Mi"}})
        );
        assert_eq!(spec["volumes"][0]["emptyDir"]["sizeLimit"], json!("512Mi"));
    }

    #[test]
    fn a_malformed_quantity_refuses_the_object_as_kube_does() {
        let mut pod = json!({"spec": {"containers": [{"name": "a", "resources": {"limits": {"cpu": "one"}}}]}});
        let err = canonicalize("", "pods", "Pod", "v1", &mut pod).expect_err("refused");
        assert_eq!(err.code, 400);
        assert_eq!(
            err.message,
            "Pod in version \"v1\" cannot be handled as a Pod: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
        let mut quota = json!({"spec": {"hard": {"pods": "10K"}}});
        let err = canonicalize("", "resourcequotas", "ResourceQuota", "v1", &mut quota)
            .expect_err("refused");
        assert!(
            err.message.ends_with("unable to parse quantity's suffix"),
            "{}",
            err.message
        );
    }
}
