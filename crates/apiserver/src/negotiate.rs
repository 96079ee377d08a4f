//! Accept-header negotiation: which representation a response takes.
//!
//! Clients ask for a converted representation with media-type parameters, e.g.
//! `application/json;as=Table;g=meta.k8s.io;v=v1` (kubectl get),
//! `application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1` (kube's metadata API) or
//! `application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList` (aggregated
//! discovery), usually followed by fallbacks in the same header. As kube-apiserver does, the
//! ranges are tried by descending `q` (then in order) and the first one this endpoint can
//! serve wins; when none can, the answer is 406 NotAcceptable. This module owns the parsing
//! and the metadata-only encoding; it knows nothing of routes, tables or the store.
//! Responses are always JSON: a range naming YAML or protobuf is served as JSON (see
//! ARCHITECTURE.md's deviations).

use bytes::Bytes;
use http::{HeaderMap, header};
use serde_json::{Map, Value, json};

use crate::error::{ApiError, ApiResult};

/// What an endpoint returns, which decides the conversions it offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `/api` and `/apis`: legacy documents or aggregated discovery.
    Discovery,
    /// GET of one object.
    Object,
    /// LIST of a collection.
    List,
    /// WATCH: each event's object is converted.
    Watch,
}

/// The representation negotiated for a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Representation {
    /// The resource itself (or the legacy discovery document).
    Plain,
    /// A `meta.k8s.io` Table of the given version.
    Table { version: String },
    /// `meta.k8s.io` `PartialObjectMetadata` (one object, or each watch event's object).
    Metadata { version: String },
    /// `meta.k8s.io` `PartialObjectMetadataList`.
    MetadataList { version: String },
    /// `apidiscovery.k8s.io` `APIGroupDiscoveryList` of the given version.
    AggregatedDiscovery { version: String },
}

impl Representation {
    /// The `Content-Type` kube-apiserver answers with: the media type and the parameters
    /// naming the conversion (client-go's discovery reads them to pick its decoder).
    pub fn content_type(&self) -> String {
        match self {
            Representation::Plain => "application/json".to_string(),
            Representation::Table { version } => {
                format!("application/json;as=Table;g=meta.k8s.io;v={version}")
            }
            Representation::Metadata { version } => {
                format!("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v={version}")
            }
            Representation::MetadataList { version } => {
                format!("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v={version}")
            }
            Representation::AggregatedDiscovery { version } => format!(
                "application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"
            ),
        }
    }
}

/// One media range of an Accept header.
#[derive(Debug)]
struct MediaRange<'a> {
    media_type: &'a str,
    quality: f32,
    conversion: Option<Conversion<'a>>,
}

/// The `as`, `g` and `v` parameters of a media range.
#[derive(Debug, Default)]
struct Conversion<'a> {
    kind: &'a str,
    group: &'a str,
    version: &'a str,
}

fn parse_range(range: &str) -> Option<MediaRange<'_>> {
    let mut parts = range.split(';').map(str::trim);
    let media_type = parts.next().filter(|t| !t.is_empty())?;
    let mut quality = 1.0;
    let mut conversion = Conversion::default();
    for param in parts {
        let Some((key, value)) = param.split_once('=') else {
            continue;
        };
        let value = value.trim().trim_matches('"');
        match key.trim() {
            "q" => quality = value.parse().unwrap_or(0.0),
            "as" => conversion.kind = value,
            "g" => conversion.group = value,
            "v" => conversion.version = value,
            _ => {}
        }
    }
    let wants_conversion = !(conversion.kind.is_empty()
        && conversion.group.is_empty()
        && conversion.version.is_empty());
    Some(MediaRange {
        media_type,
        quality,
        conversion: wants_conversion.then_some(conversion),
    })
}

/// Media types answered (as JSON): JSON itself, wildcards, and the other two encodings
/// kube-apiserver serves, which steady renders as JSON too.
fn servable(media_type: &str) -> bool {
    [
        "application/json",
        "*/*",
        "application/*",
        "application/yaml",
        "application/vnd.kubernetes.protobuf",
    ]
    .iter()
    .any(|t| media_type.eq_ignore_ascii_case(t))
}

fn meta_version(version: &str) -> Option<String> {
    matches!(version, "v1" | "v1beta1").then(|| version.to_string())
}

/// The representation a range asks for, if `endpoint` can produce it.
fn offered(range: &MediaRange<'_>, endpoint: Endpoint) -> Option<Representation> {
    if !servable(range.media_type) {
        return None;
    }
    let Some(c) = &range.conversion else {
        return Some(Representation::Plain);
    };
    use Endpoint::*;
    match (c.group, c.kind, endpoint) {
        ("meta.k8s.io", "Table", Object | List | Watch) => {
            meta_version(c.version).map(|version| Representation::Table { version })
        }
        ("meta.k8s.io", "PartialObjectMetadata", Object | Watch) => {
            meta_version(c.version).map(|version| Representation::Metadata { version })
        }
        ("meta.k8s.io", "PartialObjectMetadataList", List) => {
            meta_version(c.version).map(|version| Representation::MetadataList { version })
        }
        ("apidiscovery.k8s.io", "APIGroupDiscoveryList", Discovery) => {
            matches!(c.version, "v2" | "v2beta1").then(|| Representation::AggregatedDiscovery {
                version: c.version.to_string(),
            })
        }
        _ => None,
    }
}

/// kube-apiserver's answer when no range of the Accept header can be served.
fn not_acceptable() -> ApiError {
    ApiError::not_acceptable(
        "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf",
    )
}

/// The representation of a response from `endpoint` for the request's Accept header (none,
/// or an empty one, means the plain resource).
pub fn negotiate(headers: &HeaderMap, endpoint: Endpoint) -> ApiResult<Representation> {
    let accept: Vec<&str> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let mut ranges: Vec<MediaRange<'_>> = accept
        .iter()
        .flat_map(|v| v.split(','))
        .filter_map(parse_range)
        .collect();
    if ranges.is_empty() {
        return Ok(Representation::Plain);
    }
    // Stable: equal qualities keep the client's order.
    ranges.sort_by(|a, b| b.quality.total_cmp(&a.quality));
    ranges
        .iter()
        .filter(|r| r.quality > 0.0)
        .find_map(|r| offered(r, endpoint))
        .ok_or_else(not_acceptable)
}

/// `PartialObjectMetadata`: the object's metadata under `meta.k8s.io/<version>`.
pub(crate) fn partial_object_metadata(object: &Value, version: &str) -> Value {
    let metadata = object
        .get("metadata")
        .filter(|m| m.is_object())
        .cloned()
        .unwrap_or_else(|| Value::Object(Map::new()));
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": metadata,
    })
}

fn parse(object: &[u8]) -> ApiResult<Value> {
    serde_json::from_slice(object)
        .map_err(|e| ApiError::internal(format!("stored object is corrupt: {e}")))
}

/// One object's bytes as `PartialObjectMetadata`.
pub fn metadata_of(object: &[u8], version: &str) -> ApiResult<Bytes> {
    let partial = partial_object_metadata(&parse(object)?, version);
    Ok(Bytes::from(partial.to_string()))
}

/// A list's items as `PartialObjectMetadataList`, keeping the list's own metadata
/// (resourceVersion, continue, remainingItemCount).
pub fn metadata_list(list_metadata: &Value, items: &[Bytes], version: &str) -> ApiResult<Bytes> {
    let items = items
        .iter()
        .map(|item| parse(item).map(|o| partial_object_metadata(&o, version)))
        .collect::<ApiResult<Vec<_>>>()?;
    let list = json!({
        "kind": "PartialObjectMetadataList",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": list_metadata,
        "items": items,
    });
    Ok(Bytes::from(list.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn with_accept(accept: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_str(accept).unwrap());
        headers
    }

    fn negotiated(accept: &str, endpoint: Endpoint) -> ApiResult<Representation> {
        negotiate(&with_accept(accept), endpoint)
    }

    const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

    #[test]
    fn no_accept_is_plain() {
        assert_eq!(
            negotiate(&HeaderMap::new(), Endpoint::Object),
            Ok(Representation::Plain)
        );
        assert_eq!(negotiated("*/*", Endpoint::List), Ok(Representation::Plain));
    }

    #[test]
    fn aggregated_discovery_with_fallbacks() {
        let v2 = Representation::AggregatedDiscovery {
            version: "v2".into(),
        };
        assert_eq!(negotiated(AGGREGATED, Endpoint::Discovery), Ok(v2.clone()));
        assert_eq!(
            v2.content_type(),
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        );
        assert_eq!(
            negotiated(
                "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList",
                Endpoint::Discovery
            ),
            Ok(Representation::AggregatedDiscovery {
                version: "v2beta1".into()
            })
        );
        // An unknown version falls through to the plain fallback.
        assert_eq!(
            negotiated(
                "application/json;g=apidiscovery.k8s.io;v=v9;as=APIGroupDiscoveryList, application/json",
                Endpoint::Discovery
            ),
            Ok(Representation::Plain)
        );
        // Aggregated discovery is not a representation of objects.
        assert_eq!(
            negotiated(AGGREGATED, Endpoint::Object),
            Ok(Representation::Plain)
        );
    }

    #[test]
    fn quality_orders_ranges() {
        assert_eq!(
            negotiated(
                "application/json;q=0.5, application/json;as=Table;g=meta.k8s.io;v=v1",
                Endpoint::List
            ),
            Ok(Representation::Table {
                version: "v1".into()
            })
        );
    }

    #[test]
    fn metadata_only_per_endpoint() {
        let one = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
        let list = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
        let metadata = Ok(Representation::Metadata {
            version: "v1".into(),
        });
        assert_eq!(negotiated(one, Endpoint::Object), metadata);
        assert_eq!(negotiated(one, Endpoint::Watch), metadata);
        assert_eq!(
            negotiated(list, Endpoint::List),
            Ok(Representation::MetadataList {
                version: "v1".into()
            })
        );
        assert_eq!(negotiated(one, Endpoint::List).unwrap_err().code, 406);
        assert_eq!(negotiated(list, Endpoint::Object).unwrap_err().code, 406);
    }

    #[test]
    fn unsupported_conversion_is_not_acceptable() {
        let err = negotiated(
            "application/json;as=Widget;g=example.com;v=v1",
            Endpoint::Object,
        )
        .unwrap_err();
        assert_eq!((err.code, err.reason), (406, "NotAcceptable"));
        assert_eq!(
            negotiated("text/plain", Endpoint::Object).unwrap_err().code,
            406
        );
    }

    #[test]
    fn metadata_list_keeps_list_metadata() {
        let items = [Bytes::from_static(
            br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"3"},"data":{"k":"v"}}"#,
        )];
        let body = metadata_list(&json!({"resourceVersion": "7"}), &items, "v1").unwrap();
        let list: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            list,
            json!({
                "kind": "PartialObjectMetadataList",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": {"resourceVersion": "7"},
                "items": [{
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": {"name": "a", "resourceVersion": "3"},
                }],
            })
        );
    }
}
