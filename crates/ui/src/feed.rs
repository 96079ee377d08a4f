//! `GET /ui/api/events`: the page's live feed, as server-sent events. A connection first
//! gets a `snapshot` (controller state, kept reconciles, objects), then deltas:
//! `reconcile` (a record started or finished), `object` (applied or deleted) and
//! `controller` (its state changed). A feed that falls behind a broadcast subscribes
//! again and sends a fresh snapshot, and a reconnecting page (EventSource reconnects by
//! itself) starts with one: the page replaces its state on every snapshot and merges
//! deltas by record id and object key, so it is correct after either.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use serde::Serialize;
use steady_runtime::observe::{ControllerState, Observed, ReconcileRecord};
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::watch;

use crate::Ui;
use crate::world::{Change, Seen};

/// Everything the page shows, at once.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// The controller and whether the page may stop/start it.
    pub controller: ControllerView,
    /// The kept reconciles, oldest first.
    pub reconciles: Vec<ReconcileRecord>,
    /// The objects of every watched kind.
    pub objects: Vec<Seen>,
}

/// The controller's state plus the page's switch.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ControllerView {
    /// As the runtime reports it.
    pub state: ControllerState,
    /// Whether the switch asks it to run; `None` when the page cannot stop it.
    pub wanted: Option<bool>,
}

struct Feed {
    ui: Ui,
    reconciles: broadcast::Receiver<Observed>,
    changes: broadcast::Receiver<Change>,
    state: watch::Receiver<ControllerState>,
    switch: Option<watch::Receiver<bool>>,
    pending: VecDeque<Event>,
}

fn event<T: Serialize>(name: &str, data: &T) -> Event {
    Event::default()
        .event(name)
        .json_data(data)
        .unwrap_or_else(|_| Event::default().event(name).data("null"))
}

async fn switched(switch: &mut Option<watch::Receiver<bool>>) -> bool {
    match switch {
        Some(rx) => rx.changed().await.is_ok(),
        None => std::future::pending().await,
    }
}

impl Feed {
    fn new(ui: Ui) -> Feed {
        let shared = &ui.shared;
        let mut feed = Feed {
            reconciles: shared.recorder.subscribe(),
            changes: shared.world.subscribe(),
            state: shared.recorder.state(),
            switch: shared.switch.as_ref().map(crate::Switch::subscribe),
            pending: VecDeque::new(),
            ui,
        };
        feed.queue_snapshot();
        feed
    }

    fn controller(&mut self) -> ControllerView {
        ControllerView {
            state: self.state.borrow_and_update().clone(),
            wanted: self.switch.as_mut().map(|s| *s.borrow_and_update()),
        }
    }

    /// Subscribe afresh (whatever was missed is in the snapshot) and queue a snapshot.
    fn resubscribe(&mut self) {
        self.reconciles = self.ui.shared.recorder.subscribe();
        self.changes = self.ui.shared.world.subscribe();
        self.pending.clear();
        self.queue_snapshot();
    }

    fn queue_snapshot(&mut self) {
        let snapshot = Snapshot {
            controller: self.controller(),
            reconciles: self.ui.shared.recorder.history(),
            objects: self.ui.shared.world.snapshot(),
        };
        self.pending.push_back(event("snapshot", &snapshot));
    }

    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(ready) = self.pending.pop_front() {
                return Some(ready);
            }
            tokio::select! {
                observed = self.reconciles.recv() => match observed {
                    Ok(observed) => return Some(event("reconcile", &observed)),
                    Err(RecvError::Lagged(_)) => self.resubscribe(),
                    Err(RecvError::Closed) => return None,
                },
                change = self.changes.recv() => match change {
                    Ok(change) => return Some(event("object", &change)),
                    Err(RecvError::Lagged(_)) => self.resubscribe(),
                    Err(RecvError::Closed) => return None,
                },
                changed = self.state.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                    let view = self.controller();
                    return Some(event("controller", &view));
                }
                true = switched(&mut self.switch) => {
                    let view = self.controller();
                    return Some(event("controller", &view));
                }
            }
        }
    }
}

/// The feed of `ui`, as a stream of events (the SSE handler's body).
pub fn stream(ui: Ui) -> impl Stream<Item = Result<Event, Infallible>> {
    futures::stream::unfold(Feed::new(ui), |mut feed| async move {
        let next = feed.next().await?;
        Some((Ok(next), feed))
    })
}

pub(crate) async fn events(
    State(ui): State<Ui>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    Sse::new(stream(ui)).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}
