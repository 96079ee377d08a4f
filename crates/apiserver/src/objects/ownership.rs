//! The glue between the write rules and `apply/`'s field ownership: who a write's manager
//! is, which entry of `managedFields` it records, and how a refused apply is answered.

use serde_json::{Value, json};

use crate::ApiServer;
use crate::apply::{self, ApplyError, Shape, Writer};
use crate::error::ApiError;
use crate::registry::ResourceType;
use crate::request::WriteOptions;

impl ApiServer {
    /// Records in `new`'s `managedFields` what a non-apply write changed (an apply has
    /// recorded its own).
    pub(super) fn record_ownership(
        &self,
        rt: &ResourceType,
        old: Option<&Value>,
        new: &mut Value,
        opts: &WriteOptions,
        ownership: Ownership,
    ) {
        if let Ownership::Update { subresource } = ownership {
            let (now, api_version) = (self.timestamp(), rt.api_version());
            let writer = writer(&api_version, opts, subresource, &now);
            apply::record_update(old, new, &writer, shape(rt));
        }
    }
}

/// How a write's field ownership is recorded.
#[derive(Clone, Copy)]
pub(super) enum Ownership<'a> {
    /// A create, update or non-apply patch, through `subresource` ("" for the object).
    Update { subresource: &'a str },
    /// An apply, whose `managedFields` are already in the object.
    Applied,
    /// A write kube-apiserver makes straight to storage, recording no owner (`pods/binding`).
    Untracked,
}

pub(super) fn shape(rt: &ResourceType) -> Shape<'_> {
    Shape {
        kind: &rt.kind,
        schema: rt.schema.as_ref(),
    }
}

pub(super) fn writer<'a>(
    api_version: &'a str,
    opts: &'a WriteOptions,
    subresource: &'a str,
    now: &'a str,
) -> Writer<'a> {
    Writer {
        manager: opts.manager(),
        api_version,
        subresource,
        now,
    }
}

/// kube-apiserver's answers to a refused apply: a 409 naming each conflicting manager
/// and field (cause `FieldManagerConflict`), or a 400.
pub(super) fn apply_error(e: ApplyError) -> ApiError {
    match &e {
        ApplyError::Conflicts(conflicts) => {
            let causes: Vec<Value> = conflicts
                .fields
                .iter()
                .map(|(manager, field)| {
                    json!({"reason": "FieldManagerConflict", "message": format!("conflict with {manager}"), "field": field})
                })
                .collect();
            ApiError::conflict("", "", "")
                .with_message(e.to_string())
                .with_details(json!({"causes": causes}))
        }
        ApplyError::ManagedFieldsInConfig => ApiError::bad_request(e.to_string()),
    }
}
