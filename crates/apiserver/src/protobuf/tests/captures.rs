//! Request bodies captured from kubectl, byte for byte, and the JSON each decodes to: the
//! end-to-end check of every mapping on what the real client sends.

use serde_json::json;

use super::RBAC_V1;
use super::decode_ok;

// Request bodies captured from kubectl v1.32.4 (`kubectl create ...` against
// a recording HTTP server), byte for byte.
const KUBECTL_CM_LITERAL: &[u8] =
    b"k8s\x00\x0a\x0f\x0a\x02v1\x12\x09ConfigMap\x12.\x0a\x1a\x0a\x03cm1\x12\x00\
      \x1a\x07default\x22\x00*\x002\x008\x00B\x00\x12\x06\x0a\x01a\x12\x011\x12\
      \x08\x0a\x01b\x12\x03two\x1a\x00\x22\x00";
const KUBECTL_CM_BINARY: &[u8] =
    b"k8s\x00\x0a\x0f\x0a\x02v1\x12\x09ConfigMap\x12(\x0a\x1a\x0a\x03cm2\x12\x00\
      \x1a\x07default\x22\x00*\x002\x008\x00B\x00\x1a\x0a\x0a\x03bin\x12\x03\x00\
      \x01\xff\x1a\x00\x22\x00";
const KUBECTL_SECRET_GENERIC: &[u8] =
    b"k8s\x00\x0a\x0c\x0a\x02v1\x12\x06Secret\x122\x0a\x19\x0a\x02s1\x12\x00\x1a\
      \x07default\x22\x00*\x002\x008\x00B\x00\x12\x0d\x0a\x02pw\x12\x07hunter2\x1a\
      \x06Opaque\x1a\x00\x22\x00";
const KUBECTL_NAMESPACE: &[u8] =
    b"k8s\x00\x0a\x0f\x0a\x02v1\x12\x09Namespace\x12\x1b\x0a\x13\x0a\x03ns1\x12\
      \x00\x1a\x00\x22\x00*\x002\x008\x00B\x00\x12\x00\x1a\x02\x0a\x00\x1a\x00\x22\
      \x00";
const KUBECTL_SERVICEACCOUNT: &[u8] =
    b"k8s\x00\x0a\x14\x0a\x02v1\x12\x0eServiceAccount\x12\x1c\x0a\x1a\x0a\x03sa1\
      \x12\x00\x1a\x07default\x22\x00*\x002\x008\x00B\x00\x1a\x00\x22\x00";
const KUBECTL_SVC_NODEPORT: &[u8] =
    b"k8s\x00\x0a\x0d\x0a\x02v1\x12\x07Service\x12t\x0a(\x0a\x04svc2\x12\x00\x1a\
      \x07default\x22\x00*\x002\x008\x00B\x00Z\x0b\x0a\x03app\x12\x04svc2\x12D\x0a\
      \x1d\x0a\x0780-8080\x12\x03TCP\x18P\x22\x07\x08\x00\x10\x90?\x1a\x00(\x80\
      \xeb\x01\x12\x0b\x0a\x03app\x12\x04svc2\x1a\x00\x22\x08NodePort:\x00B\x00R\
      \x00Z\x00`\x00h\x00\x1a\x02\x0a\x00\x1a\x00\x22\x00";
const KUBECTL_SVC_EXTERNAL: &[u8] =
    b"k8s\x00\x0a\x0d\x0a\x02v1\x12\x07Service\x12d\x0a(\x0a\x04svc4\x12\x00\x1a\
      \x07default\x22\x00*\x002\x008\x00B\x00Z\x0b\x0a\x03app\x12\x04svc4\x124\x12\
      \x0b\x0a\x03app\x12\x04svc4\x1a\x00\x22\x0cExternalName:\x00B\x00R\x0bexampl\
      e.comZ\x00`\x00h\x00\x1a\x02\x0a\x00\x1a\x00\x22\x00";
const KUBECTL_DEPLOYMENT: &[u8] =
    b"k8s\x00\x0a\x15\x0a\x07apps/v1\x12\x0aDeployment\x12\xae\x01\x0a$\x0a\x02d1\
      \x12\x00\x1a\x07default\x22\x00*\x002\x008\x00B\x00Z\x09\x0a\x03app\x12\x02d\
      1\x12x\x08\x01\x12\x0b\x0a\x09\x0a\x03app\x12\x02d1\x1a_\x0a\x1b\x0a\x00\x12\
      \x00\x1a\x00\x22\x00*\x002\x008\x00B\x00Z\x09\x0a\x03app\x12\x02d1\x12@\x12\
      \x22\x0a\x05nginx\x12\x05nginx*\x00B\x00j\x00r\x00\x80\x01\x00\x88\x01\x00\
      \x90\x01\x00\xa2\x01\x00\x1a\x002\x00B\x00J\x00R\x00X\x00`\x00h\x00\x82\x01\
      \x00\x8a\x01\x00\x9a\x01\x00\xc2\x01\x00\x22\x02\x0a\x00(\x008\x00\x1a\x0c\
      \x08\x00\x10\x00\x18\x00 \x00(\x008\x00\x1a\x00\x22\x00";

// Captured from kubectl v1.32.4 `-v=9` (`kubectl create job once --image=busybox -- date`,
// `create cronjob nightly ... --schedule="0 3 * * *" -- date`, `create role r3
// --verb=get,list --resource=pods`, `create rolebinding rb3 --role=r3
// --serviceaccount=default:bot`, `create clusterrole cr3 --verb=get --resource=nodes`,
// `create clusterrolebinding crb3 --clusterrole=cr3 --user=alice`).
const KUBECTL_JOB: &[u8] =
    b"k8s\x00\x0a\x0f\x0a\x08batch/v1\x12\x03Job\x12\x84\x01\x0a\x14\x0a\x04once\
      \x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12b2`\x0a\x10\x0a\x00\x12\x00\
      \x1a\x00\"\x00*\x002\x008\x00B\x00\x12L\x12)\x0a\x04once\x12\x07busybox\
      \x1a\x04date*\x00B\x00j\x00r\x00\x80\x01\x00\x88\x01\x00\x90\x01\x00\xa2\
      \x01\x00\x1a\x05Never2\x00B\x00J\x00R\x00X\x00`\x00h\x00\x82\x01\x00\x8a\
      \x01\x00\x9a\x01\x00\xc2\x01\x00\x1a\x08 \x00(\x000\x00:\x00\x1a\x00\"\x00";
const KUBECTL_CRONJOB: &[u8] =
    b"k8s\x00\x0a\x13\x0a\x08batch/v1\x12\x07CronJob\x12\xb2\x01\x0a\x17\x0a\x07\
      nightly\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12\x94\x01\x0a\x090 3 *\
      \x20* *\x1a\x00*\x84\x01\x0a\x17\x0a\x07nightly\x12\x00\x1a\x00\"\x00*\x00\
      2\x008\x00B\x00\x12i2g\x0a\x10\x0a\x00\x12\x00\x1a\x00\"\x00*\x002\x008\
      \x00B\x00\x12S\x12,\x0a\x07nightly\x12\x07busybox\x1a\x04date*\x00B\x00j\
      \x00r\x00\x80\x01\x00\x88\x01\x00\x90\x01\x00\xa2\x01\x00\x1a\x09OnFailure\
      2\x00B\x00J\x00R\x00X\x00`\x00h\x00\x82\x01\x00\x8a\x01\x00\x9a\x01\x00\
      \xc2\x01\x00\x1a\x00\x1a\x00\"\x00";
const KUBECTL_ROLE: &[u8] =
    b"k8s\x00\x0a$\x0a\x1crbac.authorization.k8s.io/v1\x12\x04Role\x12)\x0a\x12\
      \x0a\x02r3\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12\x13\x0a\x03get\
      \x0a\x04list\x12\x00\x1a\x04pods\x1a\x00\"\x00";
const KUBECTL_ROLEBINDING: &[u8] =
    b"k8s\x00\x0a+\x0a\x1crbac.authorization.k8s.io/v1\x12\x0bRoleBinding\x12^\
      \x0a\x13\x0a\x03rb3\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12 \x0a\x0e\
      ServiceAccount\x12\x00\x1a\x03bot\"\x07default\x1a%\x0a\x19rbac.authorizat\
      ion.k8s.io\x12\x04Role\x1a\x02r3\x1a\x00\"\x00";
const KUBECTL_CLUSTERROLE: &[u8] =
    b"k8s\x00\x0a+\x0a\x1crbac.authorization.k8s.io/v1\x12\x0bClusterRole\x12%\
      \x0a\x13\x0a\x03cr3\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12\x0e\x0a\
      \x03get\x12\x00\x1a\x05nodes\x1a\x00\"\x00";
const KUBECTL_CLUSTERROLEBINDING: &[u8] =
    b"k8s\x00\x0a2\x0a\x1crbac.authorization.k8s.io/v1\x12\x12ClusterRoleBinding\
      \x12q\x0a\x14\x0a\x04crb3\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12*\
      \x0a\x04User\x12\x19rbac.authorization.k8s.io\x1a\x05alice\"\x00\x1a-\x0a\
      \x19rbac.authorization.k8s.io\x12\x0bClusterRole\x1a\x03cr3\x1a\x00\"\x00";

// Captured from kubectl v1.32.4 `-v=9`: `create priorityclass high --value=1000
// --description=urgent`, `create poddisruptionbudget pdb1 --selector=app=web
// --min-available=1`, `create quota q1 --hard=cpu=1,pods=2`, `create ingress ing1
// --rule=foo.com/bar=svc1:8080`, `create token default`.
const KUBECTL_PRIORITYCLASS: &[u8] =
    b"k8s\x00\x0a%\x0a\x14scheduling.k8s.io/v1\x12\x0dPriorityClass\x129\x0a\x14\
      \x0a\x04high\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x10\xe8\x07\x18\x00\
      \"\x06urgent*\x14PreemptLowerPriority\x1a\x00\"\x00";
const KUBECTL_PDB: &[u8] =
    b"k8s\x00\x0a \x0a\x09policy/v1\x12\x13PodDisruptionBudget\x12:\x0a\x14\x0a\
      \x04pdb1\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12\x16\x0a\x06\x08\x00\
      \x10\x01\x1a\x00\x12\x0c\x0a\x0a\x0a\x03app\x12\x03web\x1a\x0a\x08\x00\x18\
      \x00 \x00(\x000\x00\x1a\x00\"\x00";
const KUBECTL_QUOTA: &[u8] =
    b"k8s\x00\x0a\x13\x0a\x02v1\x12\x0dResourceQuota\x121\x0a\x12\x0a\x02q1\x12\
      \x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12\x19\x0a\x0a\x0a\x03cpu\x12\x03\
      \x0a\x011\x0a\x0b\x0a\x04pods\x12\x03\x0a\x012\x1a\x00\x1a\x00\"\x00";
const KUBECTL_INGRESS: &[u8] =
    b"k8s\x00\x0a\x1f\x0a\x14networking.k8s.io/v1\x12\x07Ingress\x12K\x0a\x14\
      \x0a\x04ing1\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12/\x1a-\x0a\x07fo\
      o.com\x12\"\x0a \x0a\x1e\x0a\x04/bar\x12\x0f\"\x0d\x0a\x04svc1\x12\x05\x0a\
      \x00\x10\x90?\x1a\x05Exact\x1a\x02\x0a\x00\x1a\x00\"\x00";
const KUBECTL_TOKEN: &[u8] =
    b"k8s\x00\x0a(\x0a\x18authentication.k8s.io/v1\x12\x0cTokenRequest\x12\x1a\
      \x0a\x10\x0a\x00\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12\x00\x1a\x04\
      \x0a\x00\x12\x00\x1a\x00\"\x00";

// Captured from kubectl v1.32.4 `-v=9` against `steady server`: `auth can-i create
// deployments`, `auth can-i get pods --subresource=log -n kube-system`, `auth can-i get
// /logs`, `auth can-i --list`, `auth whoami`.
const KUBECTL_CAN_I_CREATE_DEPLOYMENTS: &[u8] =
    b"k8s\x00\x0a2\x0a\x17authorization.k8s.io/v1\x12\x17SelfSubjectAccessReview\x12J\
      \x0a\x10\x0a\x00\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12,\x0a*\x0a\x07defa\
      ult\x12\x06create\x1a\x04apps\"\x00*\x0bdeployments2\x00:\x00\x1a\x08\x08\x00\
      \x12\x00\x1a\x00 \x00\x1a\x00\"\x00";
const KUBECTL_CAN_I_GET_POD_LOGS: &[u8] =
    b"k8s\x00\x0a2\x0a\x17authorization.k8s.io/v1\x12\x17SelfSubjectAccessReview\x12C\
      \x0a\x10\x0a\x00\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12%\x0a#\x0a\x0bkube\
      -system\x12\x03get\x1a\x00\"\x00*\x04pods2\x03log:\x00\x1a\x08\x08\x00\x12\x00\
      \x1a\x00 \x00\x1a\x00\"\x00";
const KUBECTL_CAN_I_GET_LOGS_PATH: &[u8] =
    b"k8s\x00\x0a2\x0a\x17authorization.k8s.io/v1\x12\x17SelfSubjectAccessReview\x12,\
      \x0a\x10\x0a\x00\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12\x0e\x12\x0c\x0a\
      \x05/logs\x12\x03get\x1a\x08\x08\x00\x12\x00\x1a\x00 \x00\x1a\x00\"\x00";
const KUBECTL_CAN_I_LIST: &[u8] =
    b"k8s\x00\x0a1\x0a\x17authorization.k8s.io/v1\x12\x16SelfSubjectRulesReview\x12#\
      \x0a\x10\x0a\x00\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12\x09\x0a\x07defaul\
      t\x1a\x04\x18\x00\"\x00\x1a\x00\"\x00";
const KUBECTL_WHOAMI: &[u8] =
    b"k8s\x00\x0a-\x0a\x18authentication.k8s.io/v1\x12\x11SelfSubjectReview\x12\x1a\
      \x0a\x10\x0a\x00\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12\x06\x0a\x04\x0a\
      \x00\x12\x00\x1a\x00\"\x00";

#[test]
fn kubectl_captures_decode() {
    let cases = [
        (
            KUBECTL_CM_LITERAL,
            json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "cm1", "namespace": "default"},
                "data": {"a": "1", "b": "two"},
            }),
        ),
        (
            KUBECTL_CM_BINARY,
            json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "cm2", "namespace": "default"},
                "binaryData": {"bin": "AAH/"},
            }),
        ),
        (
            KUBECTL_SECRET_GENERIC,
            json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "s1", "namespace": "default"},
                "data": {"pw": "aHVudGVyMg=="},
                "type": "Opaque",
            }),
        ),
        (
            KUBECTL_NAMESPACE,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns1"}}),
        ),
        (
            KUBECTL_SERVICEACCOUNT,
            json!({
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "sa1", "namespace": "default"},
            }),
        ),
        (
            KUBECTL_SVC_NODEPORT,
            json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "svc2", "namespace": "default", "labels": {"app": "svc2"}},
                "spec": {
                    "ports": [{
                        "name": "80-8080",
                        "protocol": "TCP",
                        "port": 80,
                        "targetPort": 8080,
                        "nodePort": 30080,
                    }],
                    "selector": {"app": "svc2"},
                    "type": "NodePort",
                },
            }),
        ),
        (
            KUBECTL_SVC_EXTERNAL,
            json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "svc4", "namespace": "default", "labels": {"app": "svc4"}},
                "spec": {
                    "selector": {"app": "svc4"},
                    "type": "ExternalName",
                    "externalName": "example.com",
                },
            }),
        ),
    ];
    for (body, expected) in cases {
        assert_eq!(decode_ok(body), expected);
    }
}

#[test]
fn kubectl_workload_and_rbac_captures_decode() {
    let container = |name: &str| json!({"name": name, "image": "busybox", "command": ["date"]});
    let role_ref = |kind: &str, name: &str| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name});
    let cases = [
        (
            KUBECTL_JOB,
            json!({
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "once"},
                "spec": {"template": {"spec": {
                    "containers": [container("once")],
                    "restartPolicy": "Never",
                }}},
            }),
        ),
        (
            KUBECTL_CRONJOB,
            json!({
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "metadata": {"name": "nightly"},
                "spec": {
                    "schedule": "0 3 * * *",
                    "jobTemplate": {
                        "metadata": {"name": "nightly"},
                        "spec": {"template": {"spec": {
                            "containers": [container("nightly")],
                            "restartPolicy": "OnFailure",
                        }}},
                    },
                },
            }),
        ),
        (
            KUBECTL_ROLE,
            json!({
                "apiVersion": RBAC_V1,
                "kind": "Role",
                "metadata": {"name": "r3"},
                "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}],
            }),
        ),
        (
            KUBECTL_ROLEBINDING,
            json!({
                "apiVersion": RBAC_V1,
                "kind": "RoleBinding",
                "metadata": {"name": "rb3"},
                "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": "default"}],
                "roleRef": role_ref("Role", "r3"),
            }),
        ),
        (
            KUBECTL_CLUSTERROLE,
            json!({
                "apiVersion": RBAC_V1,
                "kind": "ClusterRole",
                "metadata": {"name": "cr3"},
                "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["nodes"]}],
            }),
        ),
        (
            KUBECTL_CLUSTERROLEBINDING,
            json!({
                "apiVersion": RBAC_V1,
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "crb3"},
                "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}],
                "roleRef": role_ref("ClusterRole", "cr3"),
            }),
        ),
    ];
    for (body, expected) in cases {
        assert_eq!(decode_ok(body), expected);
    }
}

#[test]
fn kubectl_policy_networking_and_token_captures_decode() {
    let cases = [
        (
            KUBECTL_PRIORITYCLASS,
            json!({
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": "high"},
                "value": 1000,
                "description": "urgent",
                "preemptionPolicy": "PreemptLowerPriority",
            }),
        ),
        (
            KUBECTL_PDB,
            json!({
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "pdb1"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
            }),
        ),
        (
            KUBECTL_QUOTA,
            json!({
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": "q1"},
                "spec": {"hard": {"cpu": "1", "pods": "2"}},
            }),
        ),
        (
            KUBECTL_INGRESS,
            json!({
                "apiVersion": "networking.k8s.io/v1",
                "kind": "Ingress",
                "metadata": {"name": "ing1"},
                "spec": {"rules": [{
                    "host": "foo.com",
                    "http": {"paths": [{
                        "path": "/bar",
                        "pathType": "Exact",
                        "backend": {"service": {"name": "svc1", "port": {"number": 8080}}},
                    }]},
                }]},
            }),
        ),
        (
            KUBECTL_TOKEN,
            json!({
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "metadata": {},
            }),
        ),
    ];
    for (body, expected) in cases {
        assert_eq!(decode_ok(body), expected);
    }
}

#[test]
fn kubectl_deployment_capture_decodes() {
    assert_eq!(
        decode_ok(KUBECTL_DEPLOYMENT),
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d1", "namespace": "default", "labels": {"app": "d1"}},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "d1"}},
                "template": {
                    "metadata": {"labels": {"app": "d1"}},
                    "spec": {"containers": [{"name": "nginx", "image": "nginx"}]},
                },
            },
        })
    );
}

#[test]
fn kubectl_auth_captures_decode() {
    let access_review = |attributes: serde_json::Value| {
        json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "metadata": {},
            "spec": attributes,
        })
    };
    let cases = [
        (
            KUBECTL_CAN_I_CREATE_DEPLOYMENTS,
            access_review(json!({"resourceAttributes": {
                "namespace": "default",
                "verb": "create",
                "group": "apps",
                "resource": "deployments",
            }})),
        ),
        (
            KUBECTL_CAN_I_GET_POD_LOGS,
            access_review(json!({"resourceAttributes": {
                "namespace": "kube-system",
                "verb": "get",
                "resource": "pods",
                "subresource": "log",
            }})),
        ),
        (
            KUBECTL_CAN_I_GET_LOGS_PATH,
            access_review(json!({"nonResourceAttributes": {"path": "/logs", "verb": "get"}})),
        ),
        (
            KUBECTL_CAN_I_LIST,
            json!({
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SelfSubjectRulesReview",
                "metadata": {},
                "spec": {"namespace": "default"},
            }),
        ),
        (
            KUBECTL_WHOAMI,
            json!({
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "SelfSubjectReview",
                "metadata": {},
            }),
        ),
    ];
    for (body, expected) in cases {
        assert_eq!(decode_ok(body), expected);
    }
}
