//! Pods, Deployments, Jobs and CronJobs built as Go encodes them, and the fields
//! that refuse a body.

use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::batch::v1 as batch;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::Value;
use serde_json::json;

use crate::protobuf::tests::{assert_decodes, body, decode_ok, decoded, go_meta, s};
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
    assert_decodes(
        &pod,
        json!({"metadata": {"name": "web", "namespace": "default"},
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
        }),
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

#[test]
fn an_empty_security_context_decodes_and_a_set_one_is_unsupported() {
    // kube's defaults write `securityContext: {}`, so a Job kubectl makes from a stored
    // CronJob (`create job --from=cronjob/x`) carries one.
    let pod = |context: core::PodSecurityContext| core::Pod {
        metadata: Some(go_meta("p", "")),
        spec: Some(core::PodSpec {
            security_context: Some(context),
            ..go_pod_spec(vec![go_container("app", "busybox")])
        }),
        status: None,
    };
    let empty = decoded(&pod(core::PodSecurityContext::default()));
    assert_eq!(empty["spec"]["securityContext"], json!({}));
    let run_as = core::PodSecurityContext {
        run_as_user: Some(1000),
        ..Default::default()
    };
    let refused = decode(&body("v1", "Pod", pod(run_as).encode_to_vec()));
    assert!(
        matches!(refused, Err(ProtobufError::UnsupportedKind { .. })),
        "{refused:?}"
    );
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
    assert_decodes(
        &job,
        json!({"metadata": {"name": "once", "namespace": "default"},
            "spec": {"template": template},
        }),
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
    assert_decodes(
        &cron,
        json!({"metadata": {"name": "nightly", "namespace": "default"},
            "spec": {
                "schedule": "0 3 * * *",
                "jobTemplate": {"metadata": {"name": "nightly"}, "spec": {"template": template}},
            },
        }),
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
