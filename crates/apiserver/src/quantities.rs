//! Resource quantities in built-in kinds, read as kube-apiserver decodes them: every
//! `resource.Quantity` field is parsed and written back in kube's canonical form (a
//! client that wrote `cpu: 1000m`, `cpu: 1` as a number or `memory: 1.5Gi` reads `"1"`,
//! `"1"` and `"1536Mi"`), and a malformed one refuses the body with kube's 400. Operators
//! that compare the quantities they asked for with what they read meet the same
//! normalisation as on a cluster; a resource list's quantities are also rounded up to
//! thousandths as kube's defaulting rounds them (`cpu: 0.1234` reads `124m`). Custom
//! resources keep their strings as given (kube has
//! no quantity format in CRD schemas).
//! Must not know: HTTP, the store; what quotas charge (`steady_quota`).

use serde_json::Value;
use steady_quota::{Quantity, QuantityError};

use crate::error::{ApiError, ApiResult};

/// Where quantities sit in an object, as a tree walked once: into a field, into each
/// element of an array field, to each value of a map of quantities, to one quantity.
enum Node {
    Field(&'static str, &'static [Node]),
    Each(&'static str, &'static [Node]),
    Map(&'static str),
    One(&'static str),
}

use Node::{Each, Field, Map, One};

/// `resources.limits` and `resources.requests`.
const RESOURCES: &[Node] = &[Field("resources", &[Map("limits"), Map("requests")])];

/// A pod spec's quantities: its containers', its overhead, its own resources, its
/// volumes' size limits and ephemeral claims.
const POD_SPEC: &[Node] = &[
    Each("containers", RESOURCES),
    Each("initContainers", RESOURCES),
    Each("ephemeralContainers", RESOURCES),
    Map("overhead"),
    Field("resources", &[Map("limits"), Map("requests")]),
    Each(
        "volumes",
        &[
            Field("emptyDir", &[One("sizeLimit")]),
            Field(
                "ephemeral",
                &[Field("volumeClaimTemplate", &[Field("spec", RESOURCES)])],
            ),
        ],
    ),
];

const CONTAINER_STATUS: &[Node] = &[
    Map("allocatedResources"),
    Field("resources", &[Map("limits"), Map("requests")]),
];

const POD_STATUS: &[Node] = &[
    Each("containerStatuses", CONTAINER_STATUS),
    Each("initContainerStatuses", CONTAINER_STATUS),
];

const POD: &[Node] = &[Field("spec", POD_SPEC), Field("status", POD_STATUS)];
const TEMPLATE: &[Node] = &[Field("template", &[Field("spec", POD_SPEC)])];
const WORKLOAD: &[Node] = &[Field("spec", TEMPLATE)];
const STATEFUL_SET: &[Node] = &[Field(
    "spec",
    &[
        Field("template", &[Field("spec", POD_SPEC)]),
        Each("volumeClaimTemplates", &[Field("spec", RESOURCES)]),
    ],
)];
const CRON_JOB: &[Node] = &[Field("spec", &[Field("jobTemplate", WORKLOAD)])];
const CLAIM: &[Node] = &[
    Field("spec", RESOURCES),
    Field("status", &[Map("capacity"), Map("allocatedResources")]),
];
const QUOTA: &[Node] = &[
    Field("spec", &[Map("hard")]),
    Field("status", &[Map("hard"), Map("used")]),
];
const LIMIT_RANGE: &[Node] = &[Field(
    "spec",
    &[Each(
        "limits",
        &[
            Map("max"),
            Map("min"),
            Map("default"),
            Map("defaultRequest"),
            Map("maxLimitRequestRatio"),
        ],
    )],
)];
/// An HPA v2 metric's values (one `MetricTarget` / `MetricValueStatus` shape for every
/// source), under `target` in the spec and `current` in the status.
const TARGET: &[Node] = &[Field("target", &[One("value"), One("averageValue")])];
const CURRENT: &[Node] = &[Field("current", &[One("value"), One("averageValue")])];
const HPA: &[Node] = &[
    Field(
        "spec",
        &[Each(
            "metrics",
            &[
                Field("object", TARGET),
                Field("pods", TARGET),
                Field("resource", TARGET),
                Field("containerResource", TARGET),
                Field("external", TARGET),
            ],
        )],
    ),
    Field(
        "status",
        &[Each(
            "currentMetrics",
            &[
                Field("object", CURRENT),
                Field("pods", CURRENT),
                Field("resource", CURRENT),
                Field("containerResource", CURRENT),
                Field("external", CURRENT),
            ],
        )],
    ),
];

fn places(group: &str, plural: &str) -> &'static [Node] {
    match (group, plural) {
        ("", "pods") => POD,
        ("", "podtemplates") => TEMPLATE,
        ("", "replicationcontrollers")
        | ("apps", "replicasets" | "deployments" | "daemonsets")
        | ("batch", "jobs") => WORKLOAD,
        ("apps", "statefulsets") => STATEFUL_SET,
        ("batch", "cronjobs") => CRON_JOB,
        ("", "persistentvolumeclaims") => CLAIM,
        ("", "persistentvolumes") => &[Field("spec", &[Map("capacity")])],
        ("", "nodes") => &[Field("status", &[Map("capacity"), Map("allocatable")])],
        ("", "resourcequotas") => QUOTA,
        ("", "limitranges") => LIMIT_RANGE,
        ("autoscaling", "horizontalpodautoscalers") => HPA,
        ("node.k8s.io", "runtimeclasses") => &[Field("overhead", &[Map("podFixed")])],
        ("storage.k8s.io", "csistoragecapacities") => &[One("capacity"), One("maximumVolumeSize")],
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
    visit(obj, places(group, plural)).map_err(|why| {
        ApiError::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: {why}"
        ))
    })
}

fn visit(value: &mut Value, nodes: &[Node]) -> Result<(), QuantityError> {
    let Some(object) = value.as_object_mut() else {
        return Ok(());
    };
    for node in nodes {
        let (Field(name, _) | Each(name, _) | Map(name) | One(name)) = node;
        let Some(inner) = object.get_mut(*name) else {
            continue;
        };
        match node {
            Field(_, below) => visit(inner, below)?,
            Each(_, below) => {
                for element in inner.as_array_mut().into_iter().flatten() {
                    visit(element, below)?;
                }
            }
            Map(_) => {
                for quantity in inner
                    .as_object_mut()
                    .into_iter()
                    .flat_map(|m| m.values_mut())
                {
                    canonical(quantity, Rounding::ToMilli)?;
                }
            }
            One(_) if inner.is_null() => {}
            One(_) => canonical(inner, Rounding::None)?,
        }
    }
    Ok(())
}

/// A JSON quantity (a string, or a number as YAML writes `cpu: 1`) in canonical form;
/// an already canonical string (nearly every one: clients send back what they read) is
/// left as it is, compared without allocating.
fn canonical(value: &mut Value, rounding: Rounding) -> Result<(), QuantityError> {
    let quantity = match value {
        Value::String(s) => Quantity::parse(s)?,
        Value::Number(n) => Quantity::parse(&n.to_string())?,
        Value::Null => Quantity::default(),
        _ => return Err(QuantityError::FormatWrong),
    };
    let quantity = match rounding {
        Rounding::ToMilli => quantity.round_up_to_milli(),
        Rounding::None => quantity,
    };
    let mut written = StackText::default();
    let fits = quantity.write_canonical(&mut written).is_ok();
    if fits
        && value
            .as_str()
            .is_some_and(|s| s.as_bytes() == written.as_bytes())
    {
        return Ok(());
    }
    *value = Value::String(quantity.to_string());
    Ok(())
}

/// kube's `SetDefaults_ResourceList` rounds every quantity of a resource list (a map of
/// them: requests, limits, capacities, quota) up to thousandths; a lone quantity (an
/// empty dir's size limit, an autoscaler's target) keeps its precision.
#[derive(Clone, Copy)]
enum Rounding {
    ToMilli,
    None,
}

/// A short text written on the stack; writing past its capacity fails.
struct StackText {
    bytes: [u8; 48],
    len: usize,
}

impl Default for StackText {
    fn default() -> Self {
        StackText {
            bytes: [0; 48],
            len: 0,
        }
    }
}

impl StackText {
    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl std::fmt::Write for StackText {
    fn write_str(&mut self, text: &str) -> std::fmt::Result {
        let end = self.len + text.len();
        let slot = self.bytes.get_mut(self.len..end).ok_or(std::fmt::Error)?;
        slot.copy_from_slice(text.as_bytes());
        self.len = end;
        Ok(())
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
    fn resource_lists_round_up_to_thousandths_and_lone_quantities_do_not() {
        let mut pod = json!({"spec": {
            "containers": [{"name": "a", "resources": {
                "requests": {"cpu": "0.1234", "memory": "100u"},
                "limits": {"cpu": "1e-4", "example.com/gpu": "1"}}}],
            "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "100u"}}]
        }});
        canonicalize("", "pods", "Pod", "v1", &mut pod).expect("canonical");
        let resources = &pod["spec"]["containers"][0]["resources"];
        assert_eq!(
            resources,
            &json!({"requests": {"cpu": "124m", "memory": "1m"}, "limits": {"cpu": "1e-3", "example.com/gpu": "1"}})
        );
        assert_eq!(pod["spec"]["volumes"][0]["emptyDir"]["sizeLimit"], "100u");
    }

    #[test]
    fn claim_templates_and_autoscaler_targets_are_canonical_too() {
        let mut set = json!({"spec": {
            "template": {"spec": {"containers": [{"name": "a"}]}},
            "volumeClaimTemplates": [{"spec": {"resources": {"requests": {"storage": "1024Mi"}}}}],
        }});
        canonicalize("apps", "statefulsets", "StatefulSet", "v1", &mut set).expect("canonical");
        assert_eq!(
            set["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"],
            json!("1Gi")
        );
        let mut hpa = json!({
            "spec": {"metrics": [{"type": "Pods", "pods": {"target": {"averageValue": "1000m"}}}]},
            "status": {"currentMetrics": [{"type": "External", "external": {"current": {"value": 2000}}}]},
        });
        canonicalize(
            "autoscaling",
            "horizontalpodautoscalers",
            "HorizontalPodAutoscaler",
            "v2",
            &mut hpa,
        )
        .expect("canonical");
        assert_eq!(
            hpa["spec"]["metrics"][0]["pods"]["target"]["averageValue"],
            json!("1")
        );
        assert_eq!(
            hpa["status"]["currentMetrics"][0]["external"]["current"]["value"],
            json!("2k")
        );
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
