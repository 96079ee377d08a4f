//! The read side: GET and LIST with Kubernetes' resourceVersion semantics, selectors,
//! paging (`continue` tokens) and the wait for a revision the store has not reached yet.

use base64::Engine;
use bytes::Bytes;
use serde_json::{Value, json};
use steady_store::{ListOptions, Object, Revision, StoreError};

use super::{Target, parse_revision, parse_stored};
use crate::ApiServer;
use crate::error::{ApiError, ApiResult};
use crate::registry::ResourceType;
use crate::request::Params;
use crate::selector::{FieldSelector, LabelSelector};

/// A page of a list: its metadata (resourceVersion, continue) and the objects' bytes.
#[derive(Debug)]
pub struct Listed {
    pub metadata: Value,
    pub items: Vec<Bytes>,
}

impl Listed {
    /// The `<Kind>List` body.
    pub fn body(&self, rt: &ResourceType) -> Bytes {
        list_body(
            &rt.list_kind(),
            &rt.api_version(),
            &self.metadata,
            &self.items,
        )
    }
}

/// How long a read names a revision the store has not reached yet may wait for it,
/// kube-apiserver's watch cache `blockTimeout`.
const FRESHNESS_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

impl ApiServer {
    pub(crate) fn get_stored(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
    ) -> ApiResult<Object> {
        self.store()
            .get(&rt.key(ns, name), None)
            .map_err(|e| ApiError::from_store(e, &rt.qualified_name(), name))?
            .ok_or_else(|| ApiError::not_found(&rt.qualified_name(), name))
    }

    pub(crate) fn get_value(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
    ) -> ApiResult<(Value, Revision)> {
        let stored = self.get_stored(rt, ns, name)?;
        Ok((parse_stored(&stored)?, stored.revision))
    }

    /// Wait, at most 3 s, for the store to reach the `resourceVersion` a read
    /// names, as kube-apiserver's watch cache does before it answers "Too large resource
    /// version". The read itself then reports a revision still out of reach.
    pub async fn wait_for_revision(&self, params: &Params) {
        let Some(wanted) = params
            .non_empty("resourceVersion")
            .and_then(|rv| rv.parse::<Revision>().ok())
        else {
            return;
        };
        let store = self.store();
        if wanted <= store.revision() {
            return;
        }
        let Ok(mut watcher) = store.watch("", store.revision()) else {
            return;
        };
        let reached = async {
            while store.revision() < wanted {
                if !matches!(watcher.next().await, Some(Ok(_))) {
                    break;
                }
            }
        };
        // Not reaching it is reported by the read, which compares again.
        let _ = tokio::time::timeout(FRESHNESS_WAIT, reached).await;
    }

    /// `Ok` if the store has reached the resourceVersion `rv`; otherwise "Too large resource
    /// version" (504), what kube-apiserver answers once its freshness wait is over.
    pub(crate) fn reached(&self, rt: &ResourceType, name: &str, rv: &str) -> ApiResult<()> {
        let (requested, current) = (parse_revision(rv)?, self.store().revision());
        if requested <= current {
            return Ok(());
        }
        Err(ApiError::from_store(
            StoreError::TooLarge { requested, current },
            &rt.qualified_name(),
            name,
        ))
    }

    /// GET of one object (`resourceVersion` "", "0" or not-older-than N).
    pub async fn get(&self, target: Target<'_>, params: &Params) -> ApiResult<Bytes> {
        let Target { rt, ns, name, .. } = target;
        if let Some(rv) = params.non_empty("resourceVersion").filter(|rv| *rv != "0") {
            self.reached(rt, name, rv)?;
        }
        let stored = self.get_stored(rt, ns, name)?;
        self.present_converted(rt, stored.value).await
    }

    /// Every current object of a built-in kind (stored in the version it is served in), for
    /// the server's own bookkeeping (bootstrap, RBAC checks, storage protection): no
    /// selectors, no paging. Each is decoded as `T`, which may read only what it needs;
    /// one that does not decode is skipped.
    pub(crate) fn current_builtin_objects<T: serde::de::DeserializeOwned>(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
    ) -> ApiResult<Vec<T>> {
        let page = self
            .store()
            .list(&rt.list_prefix(ns), &ListOptions::default(), &|_| true)
            .map_err(|e| ApiError::from_store(e, &rt.qualified_name(), ""))?;
        Ok(page
            .items
            .iter()
            .filter_map(|object| serde_json::from_slice(&object.value).ok())
            .collect())
    }

    /// LIST with selectors, paging and Kubernetes' resourceVersion semantics.
    pub async fn list(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        params: &Params,
    ) -> ApiResult<Listed> {
        let labels = LabelSelector::parse(params.get("labelSelector").unwrap_or(""))
            .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))?;
        let fields = rt
            .field_selector(params.get("fieldSelector").unwrap_or(""))
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        let limit = match params.number("limit")? {
            Some(n) if n > 0 => Some(n as usize),
            _ => None,
        };
        let continue_token = params
            .non_empty("continue")
            .map(ContinueToken::decode)
            .transpose()?;
        let at = list_revision(params, continue_token.as_ref(), self.store().revision())?;
        let prefix = rt.list_prefix(ns);
        let filter = selector_filter(labels, fields);
        let options = ListOptions {
            at,
            start_after: continue_token.as_ref().map(|t| t.start.as_str()),
            limit,
        };
        let page = self.store().list(&prefix, &options, &filter).map_err(|e| match e {
            StoreError::Expired { .. } if continue_token.is_some() => ApiError::expired(
                "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue value from the response to get a consistent snapshot.",
            ),
            other => ApiError::from_store(other, &rt.qualified_name(), ""),
        })?;
        let continue_value = page.next_key.as_ref().map(|key| {
            ContinueToken {
                revision: page.revision,
                start: key.to_string(),
            }
            .encode()
        });
        let mut metadata = json!({"resourceVersion": page.revision.to_string()});
        if let Some(token) = continue_value {
            metadata["continue"] = Value::String(token);
        }
        let mut items = Vec::with_capacity(page.items.len());
        for object in page.items {
            items.push(self.present_converted(rt, object.value).await?);
        }
        Ok(Listed { metadata, items })
    }
}

/// `{"kind":…,"apiVersion":…,"metadata":…,"items":[…]}` assembled from stored bytes without re-encoding them.
pub(super) fn list_body(kind: &str, api_version: &str, metadata: &Value, items: &[Bytes]) -> Bytes {
    let head = json!({"kind": kind, "apiVersion": api_version, "metadata": metadata}).to_string();
    let size: usize = items.iter().map(|i| i.len() + 1).sum::<usize>() + head.len() + 16;
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(&head.as_bytes()[..head.len() - 1]);
    out.extend_from_slice(b",\"items\":[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(item);
    }
    out.extend_from_slice(b"]}");
    Bytes::from(out)
}

/// Which revision a list reads, from `resourceVersion`, `resourceVersionMatch` and `continue`.
fn list_revision(
    params: &Params,
    token: Option<&ContinueToken>,
    current: Revision,
) -> ApiResult<Option<Revision>> {
    let rv = params.non_empty("resourceVersion");
    let rv_match = params.non_empty("resourceVersionMatch");
    if let Some(token) = token {
        if rv.is_some_and(|rv| rv != "0") {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        return Ok(Some(token.revision));
    }
    match (rv, rv_match) {
        (None, Some(_)) => Err(ApiError::unprocessable(
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
        )),
        (None, None) | (Some("0"), None | Some("NotOlderThan")) => Ok(None),
        (Some("0"), Some("Exact")) => Err(ApiError::unprocessable(
            "resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
        )),
        (Some(rv), Some("Exact")) => Ok(Some(parse_revision(rv)?)),
        (Some(rv), None | Some("NotOlderThan")) => {
            let wanted = parse_revision(rv)?;
            if wanted > current {
                return Err(ApiError::from_store(
                    StoreError::TooLarge {
                        requested: wanted,
                        current,
                    },
                    "",
                    "",
                ));
            }
            Ok(None)
        }
        (_, Some(other)) => Err(ApiError::unprocessable(format!(
            "resourceVersionMatch: Unsupported value: {other:?}: supported values: \"Exact\", \"NotOlderThan\""
        ))),
    }
}

/// A `continue` token: the snapshot revision and the last key returned.
struct ContinueToken {
    revision: Revision,
    start: String,
}

impl ContinueToken {
    fn encode(&self) -> String {
        let json = json!({"v": "meta.k8s.io/v1", "rv": self.revision, "start": self.start});
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json.to_string())
    }

    fn decode(token: &str) -> ApiResult<ContinueToken> {
        let invalid = || ApiError::bad_request(format!("continue key is not valid: {token:?}"));
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token.trim_end_matches('='))
            .map_err(|_| invalid())?;
        let value: Value = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
        Ok(ContinueToken {
            revision: value["rv"].as_u64().ok_or_else(invalid)?,
            start: value["start"].as_str().ok_or_else(invalid)?.to_string(),
        })
    }
}

/// A predicate over stored objects (see [`selects`]).
fn selector_filter(labels: LabelSelector, fields: FieldSelector) -> impl Fn(&Object) -> bool {
    move |object: &Object| selects(&labels, &fields, &object.labels, &object.value)
}

/// Whether the selectors select a stored object: its labels come from the store's decoded
/// label set; its bytes are parsed only when a field selector needs them.
pub(crate) fn selects(
    labels: &LabelSelector,
    fields: &FieldSelector,
    object_labels: &steady_store::Labels,
    bytes: &[u8],
) -> bool {
    labels.matches(object_labels)
        && (fields.is_empty()
            || serde_json::from_slice::<Value>(bytes).is_ok_and(|v| fields.matches(&v)))
}
