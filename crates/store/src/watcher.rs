//! Watchers: cursors over the in-memory event log, woken through a `Signal` (a
//! `Notify` plus a version counter) whenever a batch commits. A `Notify` wakes its waiters
//! in a defined order, which the deterministic simulator relies on.

use std::collections::VecDeque;
use std::sync::Arc;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::sync::Notify;

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
    pub(crate) signal: Arc<Signal>,
    /// The signal's version when this watcher last looked at the log.
    pub(crate) version: u64,
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
                self.version = self.signal.version();
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
            } else {
                self.signal.changed(self.version).await;
                if self.signal.is_closed() {
                    // Writer gone: drain what was committed before it stopped.
                    self.closed = true;
                }
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

/// Wakes every waiting watcher after a commit, in the order they began waiting.
///
/// tokio's `watch` channel wakes its receivers in a random order, which would make a seeded
/// simulation irreproducible; `Notify::notify_waiters` wakes them in a defined order.
#[derive(Default)]
pub(crate) struct Signal {
    notify: Notify,
    version: AtomicU64,
    closed: AtomicBool,
}

impl Signal {
    /// New events are in the log.
    pub(crate) fn publish(&self) {
        self.version.fetch_add(1, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    /// The writer stopped: no more events will come.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    pub(crate) fn version(&self) -> u64 {
        self.version.load(Ordering::SeqCst)
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Wait until something was published after `seen`, or the signal closed.
    pub(crate) async fn changed(&self, seen: u64) {
        let notified = self.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.version() != seen || self.is_closed() {
            return;
        }
        notified.await;
    }
}
