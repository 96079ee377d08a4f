//! Requests the server answers rather than stores: the access reviews and rules review
//! (authorization.k8s.io/v1, `kubectl auth can-i`), TokenReview, SelfSubjectReview
//! (`kubectl auth whoami`) and TokenRequest (`kubectl create token`). Their `status` is
//! what the server answers, so a client's is ignored.

use std::collections::BTreeMap;

use k8s_pb::api::authentication::v1 as authentication;
use k8s_pb::api::authorization::v1 as authorization;
use serde_json::{Map, Value};

use super::{Obj, label_requirement, requirement, with_meta};

pub(super) fn self_subject_access_review(
    r: authorization::SelfSubjectAccessReview,
) -> Map<String, Value> {
    let mut o = with_meta(r.metadata);
    if let Some(spec) = r.spec {
        let mut s = Obj::default();
        access_attributes(
            &mut s,
            spec.resource_attributes,
            spec.non_resource_attributes,
        );
        o.object("spec", s.0);
    }
    o.0
}

pub(super) fn subject_access_review(r: authorization::SubjectAccessReview) -> Map<String, Value> {
    let mut o = with_meta(r.metadata);
    o.object("spec", subject_access_review_spec(r.spec));
    o.0
}

/// The namespaced kind has the cluster-wide one's spec (the server checks its namespace).
pub(super) fn local_subject_access_review(
    r: authorization::LocalSubjectAccessReview,
) -> Map<String, Value> {
    let mut o = with_meta(r.metadata);
    o.object("spec", subject_access_review_spec(r.spec));
    o.0
}

fn subject_access_review_spec(
    spec: Option<authorization::SubjectAccessReviewSpec>,
) -> Map<String, Value> {
    let Some(spec) = spec else {
        return Map::new();
    };
    let mut s = Obj::default();
    access_attributes(
        &mut s,
        spec.resource_attributes,
        spec.non_resource_attributes,
    );
    s.omit_empty("user", spec.user);
    s.strings("groups", spec.groups);
    s.object("extra", extra(spec.extra));
    s.omit_empty("uid", spec.uid);
    s.0
}

/// What is asked about, shared by every access review: both are Go pointers, kept whenever
/// present.
fn access_attributes(
    o: &mut Obj,
    resource: Option<authorization::ResourceAttributes>,
    non_resource: Option<authorization::NonResourceAttributes>,
) {
    if let Some(r) = resource {
        let mut a = Obj::default();
        a.omit_empty("namespace", r.namespace);
        a.omit_empty("verb", r.verb);
        a.omit_empty("group", r.group);
        a.omit_empty("version", r.version);
        a.omit_empty("resource", r.resource);
        a.omit_empty("subresource", r.subresource);
        a.omit_empty("name", r.name);
        if let Some(field) = r.field_selector {
            let requirements = field
                .requirements
                .into_iter()
                .map(|e| requirement("key", e.key, e.operator, e.values))
                .collect();
            a.0.insert(
                "fieldSelector".into(),
                selector_attributes(field.raw_selector, requirements),
            );
        }
        if let Some(label) = r.label_selector {
            let requirements = label
                .requirements
                .into_iter()
                .map(label_requirement)
                .collect();
            a.0.insert(
                "labelSelector".into(),
                selector_attributes(label.raw_selector, requirements),
            );
        }
        o.0.insert("resourceAttributes".into(), Value::Object(a.0));
    }
    if let Some(n) = non_resource {
        let mut a = Obj::default();
        a.omit_empty("path", n.path);
        a.omit_empty("verb", n.verb);
        o.0.insert("nonResourceAttributes".into(), Value::Object(a.0));
    }
}

/// A field or label selector of a review, as written or parsed into requirements.
fn selector_attributes(raw_selector: Option<String>, requirements: Vec<Value>) -> Value {
    let mut o = Obj::default();
    o.omit_empty("rawSelector", raw_selector);
    o.list("requirements", requirements);
    Value::Object(o.0)
}

/// `extra` of a user: a map of string lists.
fn extra(values: BTreeMap<String, authorization::ExtraValue>) -> Map<String, Value> {
    values
        .into_iter()
        .map(|(key, value)| (key, Value::from(value.items)))
        .collect()
}

pub(super) fn self_subject_rules_review(
    r: authorization::SelfSubjectRulesReview,
) -> Map<String, Value> {
    let mut o = with_meta(r.metadata);
    if let Some(spec) = r.spec {
        let mut s = Obj::default();
        s.omit_empty("namespace", spec.namespace);
        o.object("spec", s.0);
    }
    o.0
}

pub(super) fn token_review(r: authentication::TokenReview) -> Map<String, Value> {
    let mut o = with_meta(r.metadata);
    if let Some(spec) = r.spec {
        let mut s = Obj::default();
        s.omit_empty("token", spec.token);
        s.strings("audiences", spec.audiences);
        o.object("spec", s.0);
    }
    o.0
}

/// `kubectl auth whoami`: nothing but metadata is asked.
pub(super) fn self_subject_review(r: authentication::SelfSubjectReview) -> Map<String, Value> {
    with_meta(r.metadata).0
}

/// `kubectl create token`: the request's spec; status is what the server answers.
pub(super) fn token_request(t: authentication::TokenRequest) -> Map<String, Value> {
    let mut o = with_meta(t.metadata);
    if let Some(spec) = t.spec {
        let mut s = Obj::default();
        s.strings("audiences", spec.audiences);
        s.pointer("expirationSeconds", spec.expiration_seconds);
        if let Some(bound) = spec.bound_object_ref {
            let mut b = Obj::default();
            b.omit_empty("kind", bound.kind);
            b.omit_empty("apiVersion", bound.api_version);
            b.omit_empty("name", bound.name);
            b.omit_empty("uid", bound.u_id);
            s.0.insert("boundObjectRef".into(), Value::Object(b.0));
        }
        o.object("spec", s.0);
    }
    o.0
}

#[cfg(test)]
mod tests {
    use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
    use prost::Message;
    use serde_json::json;

    use super::*;
    use crate::protobuf::tests::{body, decode_ok, go_meta, s};
    use crate::protobuf::{AUTHENTICATION_V1, AUTHORIZATION_V1};

    /// A SubjectAccessReviewSpec as Go encodes it, with every field kube-apiserver 1.32 reads.
    fn go_subject_access_spec() -> authorization::SubjectAccessReviewSpec {
        authorization::SubjectAccessReviewSpec {
            resource_attributes: Some(authorization::ResourceAttributes {
                namespace: s("team"),
                verb: s("list"),
                group: s(""),
                version: s("v1"),
                resource: s("pods"),
                subresource: s(""),
                name: s(""),
                field_selector: Some(authorization::FieldSelectorAttributes {
                    raw_selector: s(""),
                    requirements: vec![meta::FieldSelectorRequirement {
                        key: s("spec.nodeName"),
                        operator: s("In"),
                        values: vec!["node-1".to_string()],
                    }],
                }),
                label_selector: Some(authorization::LabelSelectorAttributes {
                    raw_selector: s("app=web"),
                    requirements: vec![],
                }),
            }),
            non_resource_attributes: None,
            user: s("alice"),
            groups: vec!["dev".to_string()],
            extra: [(
                "scopes".to_string(),
                authorization::ExtraValue {
                    items: vec!["read".to_string()],
                },
            )]
            .into(),
            uid: s(""),
        }
    }

    #[test]
    fn subject_access_reviews_decode() {
        let spec = json!({
            "resourceAttributes": {
                "namespace": "team",
                "verb": "list",
                "version": "v1",
                "resource": "pods",
                "fieldSelector": {"requirements": [
                    {"key": "spec.nodeName", "operator": "In", "values": ["node-1"]},
                ]},
                "labelSelector": {"rawSelector": "app=web"},
            },
            "user": "alice",
            "groups": ["dev"],
            "extra": {"scopes": ["read"]},
        });
        let cluster_wide = authorization::SubjectAccessReview {
            metadata: Some(go_meta("", "")),
            spec: Some(go_subject_access_spec()),
            status: Some(authorization::SubjectAccessReviewStatus {
                allowed: Some(false),
                denied: Some(false),
                reason: s(""),
                evaluation_error: s(""),
            }),
        };
        assert_eq!(
            decode_ok(&body(
                AUTHORIZATION_V1,
                "SubjectAccessReview",
                cluster_wide.encode_to_vec()
            )),
            json!({
                "apiVersion": AUTHORIZATION_V1,
                "kind": "SubjectAccessReview",
                "metadata": {},
                "spec": spec,
            })
        );
        let local = authorization::LocalSubjectAccessReview {
            metadata: Some(go_meta("", "team")),
            spec: Some(go_subject_access_spec()),
            status: None,
        };
        assert_eq!(
            decode_ok(&body(
                AUTHORIZATION_V1,
                "LocalSubjectAccessReview",
                local.encode_to_vec()
            )),
            json!({
                "apiVersion": AUTHORIZATION_V1,
                "kind": "LocalSubjectAccessReview",
                "metadata": {"namespace": "team"},
                "spec": spec,
            })
        );
    }

    #[test]
    fn non_resource_subject_access_review_decodes() {
        let review = authorization::SubjectAccessReview {
            metadata: Some(go_meta("", "")),
            spec: Some(authorization::SubjectAccessReviewSpec {
                non_resource_attributes: Some(authorization::NonResourceAttributes {
                    path: s("/healthz"),
                    verb: s("get"),
                }),
                user: s("bob"),
                uid: s("42"),
                ..Default::default()
            }),
            status: None,
        };
        assert_eq!(
            decode_ok(&body(
                AUTHORIZATION_V1,
                "SubjectAccessReview",
                review.encode_to_vec()
            ))["spec"],
            json!({
                "nonResourceAttributes": {"path": "/healthz", "verb": "get"},
                "user": "bob",
                "uid": "42",
            })
        );
    }

    #[test]
    fn token_review_decodes_without_its_status() {
        let review = authentication::TokenReview {
            metadata: Some(go_meta("", "")),
            spec: Some(authentication::TokenReviewSpec {
                token: s("eyJhbGciOi.payload.sig"),
                audiences: vec!["https://kubernetes.default.svc.cluster.local".to_string()],
            }),
            status: Some(authentication::TokenReviewStatus {
                authenticated: Some(true),
                error: s("forged"),
                ..Default::default()
            }),
        };
        assert_eq!(
            decode_ok(&body(
                AUTHENTICATION_V1,
                "TokenReview",
                review.encode_to_vec()
            )),
            json!({
                "apiVersion": AUTHENTICATION_V1,
                "kind": "TokenReview",
                "metadata": {},
                "spec": {
                    "token": "eyJhbGciOi.payload.sig",
                    "audiences": ["https://kubernetes.default.svc.cluster.local"],
                },
            })
        );
    }
}
