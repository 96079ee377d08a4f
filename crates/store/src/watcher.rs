//! Watchers: cursors over the in-memory event log, woken by a
//! `tokio::sync::watch` channel carrying the latest committed revision.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::watch;

use crate::{Event, Revision, Shared, StoreError};

/// Maximum matching events copied out of the log per refill.
const MAX_MATCHES_PER_REFILL: usize = 1000;
/// Maximum log entries scanned per refill (bounds time under the read lock).
const MAX_SCANNED_PER_REFILL: usize = 16 * 1024;

/// A stream of committed events under one key prefix, in revision order.
pub struct Watcher {
    pub(crate) shared: Arc<Shared>,
    pub(crate) prefix: Box<str>,
    pub(crate) seen: Revision,
    pub(crate) buf: VecDeque<Arc<Event>>,
    pub(crate) rx: watch::Receiver<Revision>,
    pub(crate) done: bool,
    pub(crate) closed: bool,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher")
            .field("prefix", &self.prefix)
            .field("revision", &self.revision())
            .field("buffered", &self.buf.len())
            .field("done", &self.done)
            .finish()
    }
}

impl Watcher {
    /// Next matching event in revision order. `Some(Err(Expired))` if this
    /// watcher fell behind compaction (then the stream is over). `None` once
    /// the store is shut down (after every committed event was delivered).
    pub async fn next(&mut self) -> Option<Result<Arc<Event>, StoreError>> {
        loop {
            if let Some(e) = self.buf.pop_front() {
                return Some(Ok(e));
            }
            if self.done {
                return None;
            }
            if !self.closed {
                self.rx.borrow_and_update();
            }
            let before = self.seen;
            if let Err(e) = self.refill() {
                self.done = true;
                return Some(Err(e));
            }
            if !self.buf.is_empty() || self.seen != before {
                continue;
            }
            if self.closed {
                // Writer gone and the log is drained.
                self.done = true;
            } else if self.rx.changed().await.is_err() {
                // Writer gone: drain what was committed before it stopped.
                self.closed = true;
            }
        }
    }

    /// The revision up to which this watcher has delivered every matching
    /// event (advances over non-matching events too).
    pub fn revision(&self) -> Revision {
        match self.buf.front() {
            Some(e) => e.revision - 1,
            None => self.seen,
        }
    }

    /// The key prefix this watcher filters on.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    fn refill(&mut self) -> Result<(), StoreError> {
        let st = self.shared.read();
        if self.seen < st.compacted {
            return Err(StoreError::Expired {
                requested: self.seen,
                compacted: st.compacted,
            });
        }
        self.seen = st.collect_events(
            &self.prefix,
            self.seen,
            &mut self.buf,
            MAX_MATCHES_PER_REFILL,
            MAX_SCANNED_PER_REFILL,
        );
        Ok(())
    }
}
