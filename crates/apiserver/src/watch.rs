//! Watch: a newline-delimited JSON stream of `{"type":…,"object":…}` events.
//!
//! Events come from a [`steady_store::Follow`] of the kind's prefix, filtered by the
//! selectors (so selection changes turn into ADDED / DELETED as kube-apiserver does); the
//! stored bytes are sent as they are (no re-encoding) unless the client asked for another
//! version, a Table or metadata only. The follow does not re-list: the client does, after
//! the 410.
//!
//! A stream ends when its `timeoutSeconds` pass, when the store shuts down, or with an
//! in-stream `ERROR` event carrying a 410 `Expired` Status (then the stream ends) when its
//! position is no longer valid: its start revision, or the revision it had reached, was
//! compacted away, or [`ApiServer::expire_watches`] was called while it was open.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use serde_json::json;
use steady_store::{Change, ChangeKind, Filter, Follow, Revision, StoreError};
use tokio::sync::Notify;
use tokio::time::{Instant, Interval};

use crate::ApiServer;
use crate::Clock;
use crate::error::{ApiError, ApiResult};
use crate::negotiate;
use crate::objects::selects;
use crate::registry::ResourceType;
use crate::request::Params;
use crate::selector::{FieldSelector, LabelSelector};
use crate::table::{self, IncludeObject};

/// kube-apiserver's default watch lifetime when the client sets none (--min-request-timeout).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);
/// The longest `timeoutSeconds` honoured: a day. kube-apiserver takes any value; a bound
/// keeps the deadline (`now + timeout`) from overflowing.
const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// How long a watch lasts, from `timeoutSeconds` (absent, zero or negative: the default).
fn watch_timeout(params: &Params) -> ApiResult<Duration> {
    Ok(match params.number("timeoutSeconds")? {
        Some(seconds) if seconds > 0 => {
            Duration::from_secs(seconds.unsigned_abs()).min(MAX_TIMEOUT)
        }
        _ => DEFAULT_TIMEOUT,
    })
}

/// Ends every watch open when it fires ([`ApiServer::expire_watches`]).
///
/// Each stream remembers the generation it was opened in and checks it with one atomic load
/// per event; a stream waiting for events also waits on the `Notify`. As in the store's
/// watcher signal, `Notify::notify_waiters` (not a `tokio::sync::watch` channel, which
/// wakes its receivers in a random order) keeps a seeded simulation reproducible.
#[derive(Default)]
pub(crate) struct Expiry {
    notify: Notify,
    generation: AtomicU64,
    /// The store's revision when it last fired, for the 410's message.
    revision: AtomicU64,
}

impl Expiry {
    /// Expire every stream opened before now; `current` is the store's revision.
    pub(crate) fn fire(&self, current: Revision) {
        self.revision.store(current, Ordering::SeqCst);
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }
}

/// The in-stream error for a watch whose position (`requested`) is no longer served;
/// `oldest` is the oldest revision it could resume from. kube-apiserver's wording.
fn too_old(requested: Revision, oldest: Revision) -> ApiError {
    ApiError::expired(format!("too old resource version: {requested} ({oldest})"))
}

/// What each event carries, as the client's Accept header negotiated it.
#[derive(Debug, Clone, PartialEq)]
pub enum EventObject {
    /// The object itself, in the watched version of its kind.
    Resource,
    /// A one-row Table (`kubectl get -w`).
    Table(IncludeObject),
    /// `meta.k8s.io/<version>` `PartialObjectMetadata` (kube's `metadata_watcher`).
    Metadata { version: String },
}

/// [`EventObject`] with what rendering it needs.
enum Encoding {
    Resource,
    Table(IncludeObject, Clock),
    Metadata(String),
}

/// How a watch shows the objects of its kind (which ones is its follow's filter).
struct Selection {
    /// Converts objects stored in another version of a CRD (a conversion webhook may be called).
    server: ApiServer,
    rt: Arc<ResourceType>,
    encoding: Encoding,
}

impl Selection {
    /// The object as this client sees it: its version of the kind (converted by a webhook
    /// where the CRD says so), a one-row Table, or its metadata.
    async fn encode(&self, stored: Bytes) -> ApiResult<Bytes> {
        match &self.encoding {
            Encoding::Resource => self.server.present_converted(&self.rt, stored).await,
            Encoding::Table(include, clock) => {
                let object = self.server.present_converted(&self.rt, stored).await?;
                table::of_resource(&self.rt, &[object], clock(), *include, json!({}))
            }
            Encoding::Metadata(version) => negotiate::metadata_of(&stored, version),
        }
    }
}

/// The objects the selectors admit; `None` (no filter) when they admit everything.
fn selector_filter(labels: LabelSelector, fields: FieldSelector) -> Option<Filter> {
    if labels.is_empty() && fields.is_empty() {
        return None;
    }
    Some(Box::new(move |object_labels, bytes| {
        selects(&labels, &fields, object_labels, bytes)
    }))
}

/// Begin a watch: validates everything that can fail before the 200 is sent.
pub fn start(
    server: &ApiServer,
    rt: Arc<ResourceType>,
    ns: Option<&str>,
    name: Option<&str>,
    params: &Params,
    event_object: EventObject,
) -> ApiResult<WatchStream> {
    let labels = LabelSelector::parse(params.get("labelSelector").unwrap_or(""))
        .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))?;
    let mut field_selector = params.get("fieldSelector").unwrap_or("").to_string();
    if let Some(name) = name {
        if !field_selector.is_empty() {
            field_selector.push(',');
        }
        field_selector.push_str(&format!("metadata.name={name}"));
    }
    let fields = rt
        .field_selector(&field_selector)
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let send_initial = params.flag("sendInitialEvents");
    let bookmarks = params.flag("allowWatchBookmarks");
    if send_initial && (!bookmarks || params.get("resourceVersionMatch") != Some("NotOlderThan")) {
        return Err(ApiError::unprocessable(
            "sendInitialEvents requires allowWatchBookmarks=true and resourceVersionMatch=NotOlderThan",
        ));
    }
    let timeout = watch_timeout(params)?;
    let encoding = match event_object {
        EventObject::Resource => Encoding::Resource,
        EventObject::Table(include) => Encoding::Table(include, server.config().clock.clone()),
        EventObject::Metadata { version } => Encoding::Metadata(version),
    };
    let selection = Selection {
        server: server.clone(),
        rt: rt.clone(),
        encoding,
    };
    let filter = selector_filter(labels, fields);
    let prefix = rt.list_prefix(ns);
    let store = server.store();
    let requested = params.non_empty("resourceVersion").filter(|rv| *rv != "0");
    let mut initial = VecDeque::new();
    if let Some(rv) = requested {
        server.reached(&rt, "", rv)?;
    }
    let store_error = |e| ApiError::from_store(e, &rt.qualified_name(), "");
    let follow = match requested {
        Some(rv) if !send_initial => {
            let from = crate::objects::parse_revision(rv)?;
            match store.follow_after(&prefix, from, filter) {
                Ok(follow) => Some(follow),
                Err(StoreError::Expired {
                    requested,
                    compacted,
                }) => {
                    initial.push_back(Queued::Line(error_line(&too_old(requested, compacted))));
                    None
                }
                Err(e) => return Err(store_error(e)),
            }
        }
        _ => {
            let (snapshot, follow) = store.follow(&prefix, filter).map_err(store_error)?;
            for object in snapshot.objects {
                initial.push_back(Queued::Added(object.value));
            }
            if send_initial {
                let bookmark = bookmark_line(&selection, snapshot.revision, true);
                initial.push_back(Queued::Line(bookmark));
            }
            Some(follow)
        }
    };
    let bookmark_interval = server.config().bookmark_interval;
    let expiry = server.watch_expiry().clone();
    Ok(WatchStream {
        selection,
        generation: expiry.generation(),
        expiry,
        follow,
        initial,
        deadline: Instant::now() + timeout,
        bookmarks: bookmarks.then(|| {
            tokio::time::interval_at(Instant::now() + bookmark_interval, bookmark_interval)
        }),
    })
}

/// What a watch sends before following the store: lines ready to go, and the initial
/// objects, encoded as they are sent (a conversion webhook cannot be awaited at start).
enum Queued {
    Line(Bytes),
    Added(Bytes),
}

/// An open watch; turn it into a body with [`WatchStream::into_stream`].
pub struct WatchStream {
    selection: Selection,
    expiry: Arc<Expiry>,
    /// The expiry generation this stream was opened in.
    generation: u64,
    /// `None` once the stream is ending.
    follow: Option<Follow>,
    initial: VecDeque<Queued>,
    deadline: Instant,
    bookmarks: Option<Interval>,
}

impl WatchStream {
    pub fn into_stream(self) -> impl futures::Stream<Item = Result<Bytes, Infallible>> + Send {
        futures::stream::unfold(self, |mut s| async move {
            s.next_line().await.map(|line| (Ok(line), s))
        })
    }

    async fn next_line(&mut self) -> Option<Bytes> {
        if self.expiring() {
            return Some(self.expire());
        }
        match self.initial.pop_front() {
            Some(Queued::Line(line)) => return Some(line),
            Some(Queued::Added(stored)) => {
                return Some(match self.selection.encode(stored).await {
                    Ok(object) => event_line("ADDED", &object),
                    Err(e) => error_line(&e),
                });
            }
            None => {}
        }
        loop {
            // Created before the check, so a `fire` after the check still wakes it; polled
            // (and so registered with the `Notify`) only when no event is ready.
            let expired = self.expiry.notify.notified();
            if self.expiring() {
                drop(expired);
                return Some(self.expire());
            }
            let follow = self.follow.as_mut()?;
            let bookmarks = &mut self.bookmarks;
            let bookmark = async {
                match bookmarks.as_mut() {
                    Some(interval) => interval.tick().await,
                    None => std::future::pending().await,
                }
            };
            let step = tokio::select! {
                biased;
                _ = tokio::time::sleep_until(self.deadline) => Step::End,
                change = follow.next() => Step::Change(change),
                _ = expired => Step::Expired,
                _ = bookmark => Step::Bookmark,
            };
            match step {
                Step::End | Step::Change(None) => return None,
                // The generation changed: the check at the top of the loop ends the stream.
                Step::Expired => {}
                Step::Bookmark => {
                    let revision = self.follow.as_ref().map_or(0, Follow::revision);
                    return Some(bookmark_line(&self.selection, revision, false));
                }
                Step::Change(Some(Err(e))) => {
                    self.follow = None;
                    let error = match e {
                        StoreError::Expired {
                            requested,
                            compacted,
                        } => too_old(requested, compacted),
                        other => ApiError::internal(other.to_string()),
                    };
                    return Some(error_line(&error));
                }
                Step::Change(Some(Ok(change))) => {
                    if let Some(line) = render(&self.selection, &change).await {
                        if let Some(interval) = self.bookmarks.as_mut() {
                            interval.reset();
                        }
                        return Some(line);
                    }
                }
            }
        }
    }

    /// Open before the last [`Expiry::fire`] and not already ending.
    fn expiring(&self) -> bool {
        self.follow.is_some() && self.expiry.generation() != self.generation
    }

    /// End the stream as kube-apiserver ends a watch whose position it no longer serves.
    fn expire(&mut self) -> Bytes {
        self.initial.clear();
        let requested = self.follow.take().map_or(0, |f| f.revision());
        let current = self.expiry.revision.load(Ordering::SeqCst);
        error_line(&too_old(requested, current.max(requested)))
    }
}

enum Step {
    End,
    Expired,
    Change(Option<Result<Change, StoreError>>),
    Bookmark,
}

/// The event a client sees for a change of its selection (None: it cannot be shown).
async fn render(selection: &Selection, change: &Change) -> Option<Bytes> {
    let kind = match change.kind {
        ChangeKind::Added => "ADDED",
        ChangeKind::Modified => "MODIFIED",
        ChangeKind::Deleted => "DELETED",
    };
    let object = selection.encode(change.event.value.clone()).await.ok()?;
    Some(event_line(kind, &object))
}

pub fn event_line(kind: &str, object: &[u8]) -> Bytes {
    let mut line = Vec::with_capacity(object.len() + 32);
    line.extend_from_slice(b"{\"type\":\"");
    line.extend_from_slice(kind.as_bytes());
    line.extend_from_slice(b"\",\"object\":");
    line.extend_from_slice(object);
    line.extend_from_slice(b"}\n");
    Bytes::from(line)
}

/// A BOOKMARK event; a metadata-only watch gets it as `PartialObjectMetadata`, as every
/// other object of its stream.
fn bookmark_line(selection: &Selection, revision: u64, initial_events_end: bool) -> Bytes {
    let mut metadata = json!({"resourceVersion": revision.to_string()});
    if initial_events_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let (kind, api_version) = match &selection.encoding {
        Encoding::Metadata(version) => (
            "PartialObjectMetadata".to_string(),
            format!("meta.k8s.io/{version}"),
        ),
        _ => (selection.rt.kind.clone(), selection.rt.api_version()),
    };
    let object = json!({"kind": kind, "apiVersion": api_version, "metadata": metadata});
    event_line("BOOKMARK", object.to_string().as_bytes())
}

fn error_line(error: &ApiError) -> Bytes {
    event_line("ERROR", error.status().to_string().as_bytes())
}
