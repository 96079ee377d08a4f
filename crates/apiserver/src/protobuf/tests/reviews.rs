//! The access and rules reviews, TokenReview: bodies built as Go encodes them.

use k8s_pb::api::authentication::v1 as authentication;
use k8s_pb::api::authorization::v1 as authorization;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::json;

use crate::protobuf::tests::{assert_decodes, decoded, go_meta, s};

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
    assert_decodes(
        &cluster_wide,
        json!({"metadata": {},
            "spec": spec,
        }),
    );
    let local = authorization::LocalSubjectAccessReview {
        metadata: Some(go_meta("", "team")),
        spec: Some(go_subject_access_spec()),
        status: None,
    };
    assert_decodes(
        &local,
        json!({"metadata": {"namespace": "team"},
            "spec": spec,
        }),
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
    assert_decodes(
        &review,
        json!({"metadata": {},
            "spec": {
                "token": "eyJhbGciOi.payload.sig",
                "audiences": ["https://kubernetes.default.svc.cluster.local"],
            },
        }),
    );
}

/// A cluster-wide review of `spec`, without a status.
fn review_of(spec: authorization::SubjectAccessReviewSpec) -> authorization::SubjectAccessReview {
    authorization::SubjectAccessReview {
        metadata: Some(go_meta("", "")),
        spec: Some(spec),
        status: None,
    }
}

#[test]
fn non_resource_subject_access_review_decodes() {
    let review = review_of(authorization::SubjectAccessReviewSpec {
        non_resource_attributes: Some(authorization::NonResourceAttributes {
            path: s("/healthz"),
            verb: s("get"),
        }),
        user: s("bob"),
        uid: s("42"),
        ..Default::default()
    });
    assert_eq!(
        decoded(&review)["spec"],
        json!({
            "nonResourceAttributes": {"path": "/healthz", "verb": "get"},
            "user": "bob",
            "uid": "42",
        })
    );
}
