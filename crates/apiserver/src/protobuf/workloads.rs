//! What runs and how it is scheduled: the mapped subset of Pod and pod templates,
//! Deployment, Job, CronJob, PriorityClass and PodDisruptionBudget.

use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::batch::v1 as batch;
use k8s_pb::api::core::v1 as core;
use k8s_pb::api::policy::v1 as policy;
use k8s_pb::api::scheduling::v1 as scheduling;
use serde_json::{Map, Value};

use super::config::local_object_reference;
use super::{Obj, int_or_string_pointer, label_selector, template_meta, with_meta, with_spec};

/// Pods are mapped for a common subset of fields only. Every mapped field is
/// moved out of the decoded message; if anything but zero values is left
/// afterwards, the Pod uses fields we would silently drop, so `None` is
/// returned and the caller reports the kind as unsupported. `status` is
/// server-owned and ignored.
pub(super) fn pod(p: core::Pod) -> Option<Map<String, Value>> {
    with_spec(with_meta(p.metadata), p.spec, pod_spec)
}

fn pod_spec(mut s: core::PodSpec) -> Option<Map<String, Value>> {
    let mut o = Obj::default();
    let init_containers = take_containers(&mut s.init_containers)?;
    o.list("initContainers", init_containers);
    let containers = take_containers(&mut s.containers)?;
    o.list("containers", containers);
    o.omit_empty("restartPolicy", s.restart_policy.take());
    o.pointer(
        "terminationGracePeriodSeconds",
        s.termination_grace_period_seconds.take(),
    );
    o.pointer("activeDeadlineSeconds", s.active_deadline_seconds.take());
    o.omit_empty("dnsPolicy", s.dns_policy.take());
    o.string_map("nodeSelector", std::mem::take(&mut s.node_selector));
    o.omit_empty("serviceAccountName", s.service_account_name.take());
    o.omit_empty("serviceAccount", s.service_account.take());
    o.pointer(
        "automountServiceAccountToken",
        s.automount_service_account_token.take(),
    );
    o.omit_empty("nodeName", s.node_name.take());
    o.omit_empty("hostNetwork", s.host_network.take());
    o.omit_empty("hostPID", s.host_pid.take());
    o.omit_empty("hostIPC", s.host_ipc.take());
    o.pointer("shareProcessNamespace", s.share_process_namespace.take());
    o.list(
        "imagePullSecrets",
        std::mem::take(&mut s.image_pull_secrets)
            .into_iter()
            .map(local_object_reference)
            .collect(),
    );
    o.omit_empty("hostname", s.hostname.take());
    o.omit_empty("subdomain", s.subdomain.take());
    o.omit_empty("schedulerName", s.scheduler_name.take());
    o.omit_empty("priorityClassName", s.priority_class_name.take());
    o.pointer("priority", s.priority.take());
    o.pointer("runtimeClassName", s.runtime_class_name.take());
    o.pointer("enableServiceLinks", s.enable_service_links.take());
    o.pointer("preemptionPolicy", s.preemption_policy.take());
    o.pointer("setHostnameAsFQDN", s.set_hostname_as_fqdn.take());
    o.pointer("hostUsers", s.host_users.take());
    o.pointer("hostnameOverride", s.hostname_override.take());
    (s == core::PodSpec::default()).then_some(o.0)
}

fn take_containers(containers: &mut Vec<core::Container>) -> Option<Vec<Value>> {
    std::mem::take(containers)
        .into_iter()
        .map(container)
        .collect()
}

fn container(mut c: core::Container) -> Option<Value> {
    let mut o = Obj::default();
    o.always("name", c.name.take());
    o.omit_empty("image", c.image.take());
    o.strings("command", std::mem::take(&mut c.command));
    o.strings("args", std::mem::take(&mut c.args));
    o.omit_empty("workingDir", c.working_dir.take());
    let ports = std::mem::take(&mut c.ports)
        .into_iter()
        .map(container_port)
        .collect();
    o.list("ports", ports);
    let env = std::mem::take(&mut c.env)
        .into_iter()
        .map(env_var)
        .collect::<Option<Vec<_>>>()?;
    o.list("env", env);
    if let Some(mut resources) = c.resources.take() {
        let mut r = Obj::default();
        r.quantity_map("limits", std::mem::take(&mut resources.limits));
        r.quantity_map("requests", std::mem::take(&mut resources.requests));
        if resources != core::ResourceRequirements::default() {
            return None;
        }
        o.object("resources", r.0);
    }
    o.pointer("restartPolicy", c.restart_policy.take());
    o.omit_empty("terminationMessagePath", c.termination_message_path.take());
    o.omit_empty(
        "terminationMessagePolicy",
        c.termination_message_policy.take(),
    );
    o.omit_empty("imagePullPolicy", c.image_pull_policy.take());
    o.omit_empty("stdin", c.stdin.take());
    o.omit_empty("stdinOnce", c.stdin_once.take());
    o.omit_empty("tty", c.tty.take());
    (c == core::Container::default()).then_some(Value::Object(o.0))
}

fn container_port(p: core::ContainerPort) -> Value {
    let mut o = Obj::default();
    o.omit_empty("name", p.name);
    o.omit_empty("hostPort", p.host_port);
    o.always("containerPort", p.container_port);
    o.omit_empty("protocol", p.protocol);
    o.omit_empty("hostIP", p.host_ip);
    Value::Object(o.0)
}

fn env_var(e: core::EnvVar) -> Option<Value> {
    if e.value_from.is_some() {
        return None;
    }
    let mut o = Obj::default();
    o.always("name", e.name);
    o.omit_empty("value", e.value);
    Some(Value::Object(o.0))
}

/// A pod template (Deployment, Job): its metadata and the [`pod_spec`] subset.
fn pod_template(template: core::PodTemplateSpec) -> Option<Map<String, Value>> {
    with_spec(template_meta(template.metadata), template.spec, pod_spec)
}

pub(super) fn deployment(d: apps::Deployment) -> Option<Map<String, Value>> {
    with_spec(with_meta(d.metadata), d.spec, deployment_spec)
}

fn deployment_spec(s: apps::DeploymentSpec) -> Option<Map<String, Value>> {
    let mut o = Obj::default();
    o.pointer("replicas", s.replicas);
    o.value("selector", s.selector.map(label_selector));
    if let Some(template) = s.template {
        o.object("template", pod_template(template)?);
    }
    if let Some(strategy) = s.strategy {
        let mut st = Obj::default();
        st.omit_empty("type", strategy.r#type);
        if let Some(rolling) = strategy.rolling_update {
            let mut r = Obj::default();
            r.value(
                "maxUnavailable",
                int_or_string_pointer(rolling.max_unavailable),
            );
            r.value("maxSurge", int_or_string_pointer(rolling.max_surge));
            st.0.insert("rollingUpdate".into(), Value::Object(r.0));
        }
        o.object("strategy", st.0);
    }
    o.omit_empty("minReadySeconds", s.min_ready_seconds);
    o.pointer("revisionHistoryLimit", s.revision_history_limit);
    o.omit_empty("paused", s.paused);
    o.pointer("progressDeadlineSeconds", s.progress_deadline_seconds);
    Some(o.0)
}

pub(super) fn job(j: batch::Job) -> Option<Map<String, Value>> {
    with_spec(with_meta(j.metadata), j.spec, job_spec)
}

/// The Job spec without `podFailurePolicy` and `successPolicy`, which refuse the body.
fn job_spec(mut s: batch::JobSpec) -> Option<Map<String, Value>> {
    let mut o = Obj::default();
    o.pointer("parallelism", s.parallelism.take());
    o.pointer("completions", s.completions.take());
    o.pointer("activeDeadlineSeconds", s.active_deadline_seconds.take());
    o.pointer("backoffLimit", s.backoff_limit.take());
    o.pointer("backoffLimitPerIndex", s.backoff_limit_per_index.take());
    o.pointer("maxFailedIndexes", s.max_failed_indexes.take());
    o.value("selector", s.selector.take().map(label_selector));
    o.pointer("manualSelector", s.manual_selector.take());
    if let Some(template) = s.template.take() {
        o.object("template", pod_template(template)?);
    }
    o.pointer(
        "ttlSecondsAfterFinished",
        s.ttl_seconds_after_finished.take(),
    );
    o.pointer("completionMode", s.completion_mode.take());
    o.pointer("suspend", s.suspend.take());
    o.pointer("podReplacementPolicy", s.pod_replacement_policy.take());
    o.pointer("managedBy", s.managed_by.take());
    (s == batch::JobSpec::default()).then_some(o.0)
}

pub(super) fn cron_job(c: batch::CronJob) -> Option<Map<String, Value>> {
    with_spec(with_meta(c.metadata), c.spec, cron_job_spec)
}

fn cron_job_spec(spec: batch::CronJobSpec) -> Option<Map<String, Value>> {
    let mut s = Obj::default();
    s.always("schedule", spec.schedule);
    s.pointer("timeZone", spec.time_zone);
    s.pointer("startingDeadlineSeconds", spec.starting_deadline_seconds);
    s.omit_empty("concurrencyPolicy", spec.concurrency_policy);
    s.pointer("suspend", spec.suspend);
    if let Some(template) = spec.job_template {
        let template = with_spec(template_meta(template.metadata), template.spec, job_spec)?;
        s.0.insert("jobTemplate".into(), Value::Object(template));
    }
    s.pointer(
        "successfulJobsHistoryLimit",
        spec.successful_jobs_history_limit,
    );
    s.pointer("failedJobsHistoryLimit", spec.failed_jobs_history_limit);
    Some(s.0)
}

pub(super) fn priority_class(p: scheduling::PriorityClass) -> Map<String, Value> {
    let mut o = with_meta(p.metadata);
    o.always("value", p.value);
    o.omit_empty("globalDefault", p.global_default);
    o.omit_empty("description", p.description);
    o.pointer("preemptionPolicy", p.preemption_policy);
    o.0
}

/// Status is server-owned and ignored.
pub(super) fn pod_disruption_budget(b: policy::PodDisruptionBudget) -> Map<String, Value> {
    let mut o = with_meta(b.metadata);
    if let Some(spec) = b.spec {
        let mut s = Obj::default();
        s.value("minAvailable", int_or_string_pointer(spec.min_available));
        s.value("selector", spec.selector.map(label_selector));
        s.value(
            "maxUnavailable",
            int_or_string_pointer(spec.max_unavailable),
        );
        s.pointer(
            "unhealthyPodEvictionPolicy",
            spec.unhealthy_pod_eviction_policy,
        );
        o.object("spec", s.0);
    }
    o.0
}

#[cfg(test)]
mod tests {
    use k8s_pb::apimachinery::pkg::api::resource::Quantity;
    use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
    use prost::Message;
    use serde_json::json;

    use super::*;
    use crate::protobuf::tests::{body, decode_ok, go_meta, s};
    use crate::protobuf::{ProtobufError, decode};

    fn go_container(name: &str, image: &str) -> core::Container {
        core::Container {
            name: s(name),
            image: s(image),
            working_dir: s(""),
            resources: Some(core::ResourceRequirements::default()),
            termination_message_path: s(""),
            termination_message_policy: s(""),
            image_pull_policy: s(""),
            stdin: Some(false),
            stdin_once: Some(false),
            tty: Some(false),
            ..Default::default()
        }
    }

    fn go_pod_spec(containers: Vec<core::Container>) -> core::PodSpec {
        core::PodSpec {
            containers,
            restart_policy: s("Always"),
            dns_policy: s("ClusterFirst"),
            service_account_name: s(""),
            service_account: s(""),
            node_name: s(""),
            host_network: Some(false),
            host_pid: Some(false),
            host_ipc: Some(false),
            hostname: s(""),
            subdomain: s(""),
            scheduler_name: s(""),
            priority_class_name: s(""),
            ..Default::default()
        }
    }

    #[test]
    fn pod_decodes() {
        let quantity = |v: &str| Quantity { string: s(v) };
        let mut c = go_container("app", "nginx:1.27");
        c.command = vec!["/bin/sh".to_string()];
        c.args = vec!["-c".to_string(), "echo hi".to_string()];
        c.ports = vec![core::ContainerPort {
            name: s(""),
            host_port: Some(0),
            container_port: Some(80),
            protocol: s("TCP"),
            host_ip: s(""),
        }];
        c.env = vec![core::EnvVar {
            name: s("MODE"),
            value: s("prod"),
            value_from: None,
        }];
        c.resources = Some(core::ResourceRequirements {
            limits: [("memory".to_string(), quantity("128Mi"))].into(),
            requests: [("cpu".to_string(), quantity("100m"))].into(),
            claims: vec![],
        });
        let pod = core::Pod {
            metadata: Some(go_meta("web", "default")),
            spec: Some(go_pod_spec(vec![c])),
            status: Some(core::PodStatus::default()),
        };
        assert_eq!(
            decode_ok(&body("v1", "Pod", pod.encode_to_vec())),
            json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {
                    "containers": [{
                        "name": "app",
                        "image": "nginx:1.27",
                        "command": ["/bin/sh"],
                        "args": ["-c", "echo hi"],
                        "ports": [{"containerPort": 80, "protocol": "TCP"}],
                        "env": [{"name": "MODE", "value": "prod"}],
                        "resources": {
                            "limits": {"memory": "128Mi"},
                            "requests": {"cpu": "100m"},
                        },
                    }],
                    "restartPolicy": "Always",
                    "dnsPolicy": "ClusterFirst",
                },
            })
        );
    }

    #[test]
    fn pod_with_unmapped_fields_is_unsupported() {
        let with_volume = core::PodSpec {
            volumes: vec![core::Volume {
                name: s("data"),
                ..Default::default()
            }],
            ..go_pod_spec(vec![go_container("app", "busybox")])
        };
        let mut probed = go_container("app", "busybox");
        probed.liveness_probe = Some(core::Probe::default());
        let mut env_from = go_container("app", "busybox");
        env_from.env = vec![core::EnvVar {
            name: s("POD"),
            value: s(""),
            value_from: Some(core::EnvVarSource::default()),
        }];
        for spec in [
            with_volume,
            go_pod_spec(vec![probed]),
            go_pod_spec(vec![env_from]),
        ] {
            let pod = core::Pod {
                metadata: Some(go_meta("p", "")),
                spec: Some(spec),
                status: None,
            };
            match decode(&body("v1", "Pod", pod.encode_to_vec())) {
                Err(ProtobufError::UnsupportedKind { api_version, kind }) => {
                    assert_eq!((api_version.as_str(), kind.as_str()), ("v1", "Pod"));
                }
                other => panic!("expected UnsupportedKind, got {other:?}"),
            }
        }
    }

    /// A pod template as Go encodes kubectl's: one container, every value field written.
    fn go_template(labels: &[(&str, &str)]) -> core::PodTemplateSpec {
        let mut metadata = go_meta("", "");
        metadata.labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        core::PodTemplateSpec {
            metadata: Some(metadata),
            spec: Some(core::PodSpec {
                containers: vec![core::Container {
                    name: s("job"),
                    image: s("busybox"),
                    command: vec!["date".to_string()],
                    working_dir: s(""),
                    termination_message_path: s(""),
                    image_pull_policy: s(""),
                    stdin: Some(false),
                    tty: Some(false),
                    ..Default::default()
                }],
                restart_policy: s("Never"),
                dns_policy: s(""),
                service_account_name: s(""),
                node_name: s(""),
                host_network: Some(false),
                ..Default::default()
            }),
        }
    }

    fn go_job_spec() -> batch::JobSpec {
        batch::JobSpec {
            template: Some(go_template(&[])),
            ..Default::default()
        }
    }

    const JOB_TEMPLATE_JSON: &str = r#"{
        "spec": {
            "containers": [{"name": "job", "image": "busybox", "command": ["date"]}],
            "restartPolicy": "Never"
        }
    }"#;

    #[test]
    fn job_and_cron_job_decode() {
        let template: Value = serde_json::from_str(JOB_TEMPLATE_JSON).unwrap();
        let job = batch::Job {
            metadata: Some(go_meta("once", "default")),
            spec: Some(go_job_spec()),
            status: Some(batch::JobStatus::default()),
        };
        assert_eq!(
            decode_ok(&body("batch/v1", "Job", job.encode_to_vec())),
            json!({
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "once", "namespace": "default"},
                "spec": {"template": template},
            })
        );
        let cron = batch::CronJob {
            metadata: Some(go_meta("nightly", "default")),
            spec: Some(batch::CronJobSpec {
                schedule: s("0 3 * * *"),
                concurrency_policy: s(""),
                job_template: Some(batch::JobTemplateSpec {
                    metadata: Some(go_meta("nightly", "")),
                    spec: Some(go_job_spec()),
                }),
                ..Default::default()
            }),
            status: Some(batch::CronJobStatus::default()),
        };
        assert_eq!(
            decode_ok(&body("batch/v1", "CronJob", cron.encode_to_vec())),
            json!({
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "metadata": {"name": "nightly", "namespace": "default"},
                "spec": {
                    "schedule": "0 3 * * *",
                    "jobTemplate": {"metadata": {"name": "nightly"}, "spec": {"template": template}},
                },
            })
        );
    }

    #[test]
    fn job_with_a_pod_failure_policy_is_unsupported() {
        let job = batch::Job {
            metadata: Some(go_meta("j", "default")),
            spec: Some(batch::JobSpec {
                pod_failure_policy: Some(batch::PodFailurePolicy::default()),
                ..go_job_spec()
            }),
            status: None,
        };
        assert!(matches!(
            decode(&body("batch/v1", "Job", job.encode_to_vec())),
            Err(ProtobufError::UnsupportedKind { .. })
        ));
    }

    #[test]
    fn deployment_keeps_an_explicit_zero_max_unavailable() {
        let deployment = apps::Deployment {
            metadata: Some(go_meta("d", "default")),
            spec: Some(apps::DeploymentSpec {
                strategy: Some(apps::DeploymentStrategy {
                    r#type: s("RollingUpdate"),
                    rolling_update: Some(apps::RollingUpdateDeployment {
                        max_unavailable: Some(IntOrString {
                            r#type: Some(0),
                            int_val: Some(0),
                            str_val: s(""),
                        }),
                        max_surge: Some(IntOrString {
                            r#type: Some(1),
                            int_val: Some(0),
                            str_val: s("50%"),
                        }),
                    }),
                }),
                min_ready_seconds: Some(0),
                paused: Some(false),
                ..Default::default()
            }),
            status: None,
        };
        let v = decode_ok(&body("apps/v1", "Deployment", deployment.encode_to_vec()));
        assert_eq!(
            v["spec"],
            json!({"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "50%"}}})
        );
    }
}
