//! The fuzzer's whole-store checks: before the run, the namespaces and the CRD it fuzzes;
//! during and after it, every served resource (from discovery) listed cluster-wide and in
//! every namespace, every listed object read by name, every resource watched from its
//! initial state; and a few watches held open for the whole run.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use futures::StreamExt;
use http::Method;
use serde::Deserialize;
use serde_json::Value;

use super::fuzz::{Answer, NoAnswer, send};
use super::generate::{self, FuzzRequest, encode_segment};

const TIMEOUT: Duration = Duration::from_secs(60);

fn request(method: Method, path: &str, query: &str) -> FuzzRequest {
    FuzzRequest {
        method,
        path: path.to_string(),
        query: query.to_string(),
        content_type: None,
        body: Vec::new(),
        watch: false,
    }
}

async fn call(client: &kube::Client, request: &FuzzRequest) -> Result<Answer, String> {
    send(client, request, TIMEOUT, None)
        .await
        .map_err(|e| match e {
            NoAnswer::Unsendable(e) => {
                format!("{} {}: cannot send: {e}", request.method, request.path)
            }
            NoAnswer::Dropped(e) => format!("{} {}: no answer: {e}", request.method, request.path),
            NoAnswer::TimedOut => format!(
                "{} {}: no answer within {TIMEOUT:?}",
                request.method, request.path
            ),
        })
}

/// GET `path` and decode the JSON answer; an error names the request and the answer.
async fn get_json<T: serde::de::DeserializeOwned>(
    client: &kube::Client,
    path: &str,
    query: &str,
) -> Result<T, String> {
    let answer = call(client, &request(Method::GET, path, query)).await?;
    if answer.status != http::StatusCode::OK {
        return Err(format!(
            "GET {path}?{query}: {} {}",
            answer.status,
            String::from_utf8_lossy(&answer.body[..answer.body.len().min(300)])
        ));
    }
    serde_json::from_slice(&answer.body)
        .map_err(|e| format!("GET {path}?{query}: undecodable answer: {e}"))
}

/// Create the stable namespaces and the widgets CRD, and wait until widgets are served.
pub async fn prepare(client: &kube::Client) -> anyhow::Result<()> {
    let mut creates: Vec<(String, Value)> = generate::STABLE_NAMESPACES
        .iter()
        .filter(|ns| **ns != "default")
        .map(|ns| {
            (
                "/api/v1/namespaces".to_string(),
                serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            )
        })
        .collect();
    creates.push((
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions".to_string(),
        generate::widget_crd(),
    ));
    for (path, object) in creates {
        let mut create = request(Method::POST, &path, "");
        create.content_type = Some("application/json".to_string());
        create.body = serde_json::to_vec(&object)?;
        let answer = call(client, &create).await.map_err(anyhow::Error::msg)?;
        if !answer.status.is_success() && answer.status != http::StatusCode::CONFLICT {
            bail!("setting up: POST {path}: {}", answer.status);
        }
    }
    let served = format!("/apis/{}/v1", generate::CRD_GROUP);
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let resources: Result<ResourceList, String> = get_json(client, &served, "").await;
        if resources.is_ok_and(|list| {
            list.resources
                .iter()
                .any(|r| r.name == generate::CRD_PLURAL)
        }) {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            bail!("the fuzz CRD is not served after {TIMEOUT:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[derive(Deserialize)]
struct ResourceList {
    #[serde(default)]
    resources: Vec<ResourceEntry>,
}

#[derive(Deserialize)]
struct ResourceEntry {
    name: String,
    #[serde(default)]
    namespaced: bool,
    #[serde(default)]
    verbs: Vec<String>,
}

#[derive(Deserialize)]
struct GroupList {
    #[serde(default)]
    groups: Vec<Group>,
}

#[derive(Deserialize)]
struct Group {
    #[serde(default)]
    versions: Vec<GroupVersion>,
}

#[derive(Deserialize)]
struct GroupVersion {
    #[serde(rename = "groupVersion")]
    group_version: String,
}

/// Only the names of a list's items: the rest is skipped without building it (and
/// without a depth limit, so deep objects are listed too).
#[derive(Deserialize)]
struct ObjectList {
    #[serde(default)]
    items: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    #[serde(default)]
    metadata: ItemMeta,
}

#[derive(Deserialize, Default)]
struct ItemMeta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: Option<String>,
}

/// A resource that can be listed and watched: `/api/v1` or `/apis/G/V`, plural, scope.
struct Served {
    prefix: String,
    plural: String,
    namespaced: bool,
}

async fn discover(client: &kube::Client) -> Result<Vec<Served>, String> {
    let mut prefixes = vec!["/api/v1".to_string()];
    let groups: GroupList = get_json(client, "/apis", "").await?;
    for group in groups.groups {
        prefixes.extend(
            group
                .versions
                .into_iter()
                .map(|v| format!("/apis/{}", v.group_version)),
        );
    }
    let mut served = Vec::new();
    for prefix in prefixes {
        let list: ResourceList = get_json(client, &prefix, "").await?;
        served.extend(
            list.resources
                .into_iter()
                // Every resource the check lists it also watches (componentstatuses, say,
                // can be listed but not watched).
                .filter(|r| {
                    let serves = |verb: &str| r.verbs.iter().any(|v| v == verb);
                    !r.name.contains('/') && serves("list") && serves("watch")
                })
                .map(|r| Served {
                    prefix: prefix.clone(),
                    plural: r.name,
                    namespaced: r.namespaced,
                }),
        );
    }
    Ok(served)
}

/// What one whole-store check found.
pub struct Report {
    pub objects: u64,
    pub problems: Vec<String>,
}

/// List every served resource cluster-wide and in every namespace, GET every listed
/// object (and patch it with nothing, see [`still_writable`]), and watch every resource from its initial state to the initial-events-end
/// bookmark. An object may vanish between the LIST and the GET (a fuzzed delete, or the
/// garbage collector and namespace controller finishing earlier deletions): a 404 fails
/// only if the object is still listed.
pub async fn check(client: &kube::Client, concurrency: usize) -> Report {
    let mut report = Report {
        objects: 0,
        problems: Vec::new(),
    };
    let served = match discover(client).await {
        Ok(served) => served,
        Err(problem) => {
            report
                .problems
                .push(format!("read-back: discovery failed: {problem}"));
            return report;
        }
    };
    let namespaces: Vec<String> =
        match get_json::<ObjectList>(client, "/api/v1/namespaces", "").await {
            Ok(list) => list.items.into_iter().map(|i| i.metadata.name).collect(),
            Err(problem) => {
                report.problems.push(format!("read-back: {problem}"));
                Vec::new()
            }
        };
    let mut lists = Vec::new();
    for resource in &served {
        lists.push(format!("{}/{}", resource.prefix, resource.plural));
        if resource.namespaced {
            lists.extend(namespaces.iter().map(|ns| {
                format!(
                    "{}/namespaces/{}/{}",
                    resource.prefix,
                    encode_segment(ns),
                    resource.plural
                )
            }));
        }
    }
    let problems = Arc::new(Mutex::new(Vec::new()));
    let note = |problem: String| {
        problems
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(problem)
    };
    // Lists: every item's path, from the cluster-wide lists (the per-namespace ones only
    // have to answer).
    let listed: Vec<Result<(String, ObjectList), String>> = futures::stream::iter(lists)
        .map(|path| async move {
            get_json::<ObjectList>(client, &path, "")
                .await
                .map(|l| (path, l))
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    let mut objects = Vec::new();
    for result in listed {
        match result {
            Err(problem) => note(format!("read-back: {problem}")),
            Ok((path, list)) => {
                let Some(resource) = served
                    .iter()
                    .find(|r| path == format!("{}/{}", r.prefix, r.plural))
                else {
                    continue;
                };
                objects.extend(list.items.into_iter().map(|item| {
                    let collection = match (&item.metadata.namespace, resource.namespaced) {
                        (Some(ns), true) => format!(
                            "{}/namespaces/{}/{}",
                            resource.prefix,
                            encode_segment(ns),
                            resource.plural
                        ),
                        _ => path.clone(),
                    };
                    let path = format!("{collection}/{}", encode_segment(&item.metadata.name));
                    (collection, item.metadata.name, path)
                }));
            }
        }
    }
    report.objects = objects.len() as u64;
    let reads: Vec<Option<String>> = futures::stream::iter(objects)
        .map(|(collection, name, path)| async move {
            match call(client, &request(Method::GET, &path, "")).await {
                Err(problem) => Some(format!("read-back: {problem}")),
                Ok(answer) if answer.status == http::StatusCode::OK => {
                    match serde_json::from_slice::<serde::de::IgnoredAny>(&answer.body) {
                        Err(e) => Some(format!("read-back: GET {path}: undecodable object: {e}")),
                        Ok(_) => still_writable(client, &collection, &name, &path).await,
                    }
                }
                Ok(answer)
                    if answer.status == http::StatusCode::NOT_FOUND
                        && !still_listed(client, &collection, &name).await =>
                {
                    None
                }
                Ok(answer) => Some(format!(
                    "read-back: a listed object does not read back: GET {path}: {} {}",
                    answer.status,
                    String::from_utf8_lossy(&answer.body[..answer.body.len().min(200)])
                )),
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    reads.into_iter().flatten().for_each(note);
    // Watches from the initial state: every object is sent once, then the bookmark.
    let collections: Vec<String> = served
        .iter()
        .map(|resource| format!("{}/{}", resource.prefix, resource.plural))
        .collect();
    let watches: Vec<Option<String>> = futures::stream::iter(collections)
        .map(|path| async move { initial_events(client, &path).await.err() })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    watches.into_iter().flatten().for_each(note);
    report.problems = std::mem::take(
        &mut *problems
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    report
}

/// An empty merge patch changes nothing (no write, no event) but makes the server decode
/// the stored object, as any update or delete of it would: an object that reads back as
/// bytes but cannot be decoded any more fails here.
async fn still_writable(
    client: &kube::Client,
    collection: &str,
    name: &str,
    path: &str,
) -> Option<String> {
    let mut patch = request(Method::PATCH, path, "");
    patch.content_type = Some("application/merge-patch+json".to_string());
    patch.body = b"{}".to_vec();
    match call(client, &patch).await {
        Err(problem) => Some(format!("read-back: {problem}")),
        Ok(answer) if answer.status.is_success() => None,
        Ok(answer)
            if answer.status == http::StatusCode::NOT_FOUND
                && !still_listed(client, collection, name).await =>
        {
            None
        }
        Ok(answer) => Some(format!(
            "read-back: a stored object cannot be updated: PATCH {path} {{}}: {} {}",
            answer.status,
            String::from_utf8_lossy(&answer.body[..answer.body.len().min(200)])
        )),
    }
}

/// Whether `collection` still lists an object named `name` (a failed LIST counts as
/// listed, so the 404 that led here is reported).
async fn still_listed(client: &kube::Client, collection: &str, name: &str) -> bool {
    match get_json::<ObjectList>(client, collection, "").await {
        Ok(list) => list.items.iter().any(|item| item.metadata.name == name),
        Err(_) => true,
    }
}

/// Watch `path` with `sendInitialEvents` until the initial-events-end bookmark.
async fn initial_events(client: &kube::Client, path: &str) -> Result<(), String> {
    let query = "watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=30";
    let watch = request(Method::GET, path, query);
    let mut builder = http::Request::builder()
        .method(Method::GET)
        .uri(watch.uri());
    builder = builder.header(http::header::ACCEPT, "application/json");
    let http_request = builder
        .body(kube::client::Body::empty())
        .map_err(|e| format!("watch {path}: {e}"))?;
    let response = tokio::time::timeout(TIMEOUT, client.send(http_request))
        .await
        .map_err(|_| format!("read-back: watch {path}: no answer within {TIMEOUT:?}"))?
        .map_err(|e| format!("read-back: watch {path}: no answer: {e}"))?;
    if response.status() != http::StatusCode::OK {
        return Err(format!("read-back: watch {path}: {}", response.status()));
    }
    let mut events = EventReader::new(response.into_body());
    let found = tokio::time::timeout(TIMEOUT, async {
        while let Some(event) = events.next().await? {
            match event["type"].as_str() {
                Some("ERROR") => return Err(format!("ERROR event {}", event["object"])),
                Some("BOOKMARK")
                    if event["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"]
                        == "true" =>
                {
                    return Ok(());
                }
                _ => {}
            }
        }
        Err("the stream ended before the initial-events-end bookmark".to_string())
    })
    .await;
    match found {
        Ok(Ok(())) => Ok(()),
        Ok(Err(problem)) => Err(format!("read-back: watch {path}: {problem}")),
        Err(_) => Err(format!(
            "read-back: watch {path}: no initial-events-end bookmark within {TIMEOUT:?}"
        )),
    }
}

/// Newline-delimited JSON events from a response body.
struct EventReader {
    body: kube::client::Body,
    buffer: Vec<u8>,
}

impl EventReader {
    fn new(body: kube::client::Body) -> EventReader {
        EventReader {
            body,
            buffer: Vec::new(),
        }
    }

    /// The next event; `None` at the end of the stream.
    async fn next(&mut self) -> Result<Option<Value>, String> {
        use http_body_util::BodyExt;
        loop {
            if let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                // Events are read only for their type, code and annotations: skip objects
                // too deep for a Value.
                return match serde_json::from_slice::<Value>(&line) {
                    Ok(event) => Ok(Some(event)),
                    Err(e) if e.to_string().contains("recursion limit") => {
                        Ok(Some(serde_json::json!({"type": "DEEP"})))
                    }
                    Err(e) => Err(format!("undecodable event: {e}")),
                };
            }
            match self.body.frame().await {
                None => return Ok(None),
                Some(Err(e)) => return Err(format!("the stream broke: {e}")),
                Some(Ok(frame)) => {
                    if let Some(data) = frame.data_ref() {
                        self.buffer.extend_from_slice(data);
                    }
                }
            }
        }
    }
}

/// Watches opened before the run and expected to stay open through it (their
/// `timeoutSeconds` is an hour): each is read by a task that records how it ended.
pub struct LongWatches {
    watches: Vec<(String, Arc<Mutex<Option<String>>>)>,
}

const LONG_WATCHES: [&str; 3] = [
    "/api/v1/configmaps",
    "/api/v1/namespaces/fuzz-a/configmaps",
    "/apis/fuzz.steady.dev/v1/widgets",
];

impl LongWatches {
    pub async fn open(client: &kube::Client) -> anyhow::Result<Arc<LongWatches>> {
        let mut watches = Vec::new();
        for path in LONG_WATCHES {
            let ended = Arc::new(Mutex::new(None));
            Self::start(client, path, ended.clone()).await?;
            watches.push((path.to_string(), ended));
        }
        Ok(Arc::new(LongWatches { watches }))
    }

    async fn start(
        client: &kube::Client,
        path: &str,
        ended: Arc<Mutex<Option<String>>>,
    ) -> anyhow::Result<()> {
        let uri = format!("{path}?watch=1&timeoutSeconds=3600&allowWatchBookmarks=true");
        let http_request = http::Request::builder()
            .uri(uri)
            .body(kube::client::Body::empty())?;
        let response = tokio::time::timeout(TIMEOUT, client.send(http_request))
            .await
            .with_context(|| format!("watch {path}: no answer"))?
            .with_context(|| format!("watch {path}"))?;
        if response.status() != http::StatusCode::OK {
            bail!("watch {path}: {}", response.status());
        }
        let mut events = EventReader::new(response.into_body());
        tokio::spawn(async move {
            let end = loop {
                match events.next().await {
                    Ok(Some(event)) if event["type"] == "ERROR" => {
                        break format!("ERROR event {}", event["object"]);
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => break "the stream ended".to_string(),
                    Err(e) => break e,
                }
            };
            *ended
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(end);
        });
        Ok(())
    }

    /// Watches that ended since the last look. One that ended with 410 `Expired` (the
    /// server compacted past it, which it may) is reopened instead.
    pub async fn problems(&self, client: &kube::Client) -> Vec<String> {
        let mut problems = Vec::new();
        for (path, ended) in &self.watches {
            let end = ended
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
            let Some(end) = end else { continue };
            if !end.contains("\"code\":410") {
                problems.push(format!(
                    "the watch on {path} held since the start ended: {end}"
                ));
            }
            if let Err(e) = Self::start(client, path, ended.clone()).await {
                problems.push(format!("the watch on {path} cannot be reopened: {e:#}"));
            }
        }
        problems
    }
}
