//! The watch of one kind: it keeps that kind's cache, and maps each change to the primary
//! keys it triggers (the object itself, its controller owner, or what a mapper names).
//!
//! One task per source, started by the controller in declaration order; it reports phases
//! (listing, watching, re-listing, backing off) and the first sync to the controller's loop.
//! It knows nothing of the queue or of reconciles.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::Resource;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::object_cache::{Cached, Listed, ObjectCache, ObjectKey};
use crate::observe::WatchPhase;
use crate::queue::{Priority, Trigger};
use crate::write_through::WriteSink;

/// What a source tells the controller's loop.
pub(crate) enum Message {
    Trigger(ObjectKey, Trigger, Priority),
    Synced,
    /// The watch of the `usize`-th source (in declaration order) is now in this phase.
    Watch(usize, WatchPhase),
}

pub(crate) type Mapper<C> = Arc<dyn Fn(&C) -> Vec<(ObjectKey, Trigger)> + Send + Sync>;

/// Whether an update from the first cached state to the second is one the source's
/// triggers fire on.
pub(crate) type Wakes<C> = fn(&C, &C) -> bool;

/// Every update wakes (the primary: its reconciler is handed the object itself).
pub(crate) fn every_update<C>(_: &C, _: &C) -> bool {
    true
}

/// Retry delays of a failed watch: 800 ms doubling to 30 s, reset once it works again.
/// No jitter (unlike kube's default), so a seeded simulation replays exactly.
///
/// A 410 (Expired) after the watch has made progress is not a failure: it is the API
/// server saying "re-list", and is obeyed at once. Only a 410 that follows a relist
/// without progress, or any other error, waits. (kube-runtime's `Controller` backs off
/// on every error of its merged trigger stream, so one API-server watch-cache restart —
/// a 410 on each of its watches — stalls all its triggers for 0.8 + 1.6 + 3.2 s.)
#[derive(Debug, Clone)]
struct WatchBackoff {
    next: Duration,
    /// An event arrived since the last error.
    progressed: bool,
}

const WATCH_BACKOFF_MIN: Duration = Duration::from_millis(800);
const WATCH_BACKOFF_MAX: Duration = Duration::from_secs(30);

impl Default for WatchBackoff {
    fn default() -> Self {
        WatchBackoff {
            next: WATCH_BACKOFF_MIN,
            progressed: false,
        }
    }
}

impl WatchBackoff {
    /// The watch delivered an event: it works again.
    fn progress(&mut self) {
        self.next = WATCH_BACKOFF_MIN;
        self.progressed = true;
    }

    /// How long to wait before polling the watch again after `error`.
    fn delay_after(&mut self, error: &watcher::Error) -> Duration {
        let expired = matches!(error, watcher::Error::WatchError(status) if status.code == 410);
        let progressed = std::mem::replace(&mut self.progressed, false);
        if expired && progressed {
            return Duration::ZERO;
        }
        let delay = self.next;
        self.next = (self.next * 2).min(WATCH_BACKOFF_MAX);
        delay
    }
}

/// The form an object of the watch is cached in: the object itself, or a projection of it.
pub(crate) type Convert<D, C> = fn(D) -> C;

/// How a source's objects of kind `W`, decoded as `D`, are cached as `C`: the conversion
/// of each decoded object, the cache, and where written objects of `W` are remembered in
/// it.
pub(crate) struct CachedAs<W, D, C> {
    pub(crate) convert: Convert<D, C>,
    pub(crate) cache: ObjectCache<C>,
    pub(crate) writes: WriteSink<W>,
}

impl<D: Cached + Clone + Send + Sync + 'static> CachedAs<D, D, D> {
    /// Objects cached as they are decoded.
    pub(crate) fn itself(cache: ObjectCache<D>) -> Self {
        CachedAs {
            convert: std::convert::identity,
            writes: Arc::new(cache.clone()),
            cache,
        }
    }
}

/// `api` (its client and namespace) for the same kind decoded as `D` (a projection's
/// decoding, or the kind without its managed fields).
pub(crate) fn retyped<W, D>(api: Api<W>) -> Api<D>
where
    W: Resource,
    D: Resource<DynamicType = (), Scope = kube::core::DynamicResourceScope>,
{
    let namespace = api.namespace().map(str::to_owned);
    let client = api.into_client();
    match namespace {
        Some(namespace) => Api::namespaced_with(client, &namespace, &()),
        None => Api::all_with(client, &()),
    }
}

/// `impl Resource` for a form a watch decodes kind `$kind` in (a projection's decoding,
/// the kind without its managed fields): `$kind`'s URL, kind and scope, and the form's own
/// metadata (`$meta` / `$meta_mut` of `$this`).
macro_rules! decoded_form_of {
    (
        impl<$param:ident: $bound:path> for $form:ty, kind $kind:ty,
        |$this:ident| $meta:expr, $meta_mut:expr
    ) => {
        impl<$param: $bound> kube::Resource for $form {
            type DynamicType = ();
            type Scope = kube::core::DynamicResourceScope;

            fn kind(dt: &()) -> std::borrow::Cow<'_, str> {
                <$kind as kube::Resource>::kind(dt)
            }

            fn group(dt: &()) -> std::borrow::Cow<'_, str> {
                <$kind as kube::Resource>::group(dt)
            }

            fn version(dt: &()) -> std::borrow::Cow<'_, str> {
                <$kind as kube::Resource>::version(dt)
            }

            fn api_version(dt: &()) -> std::borrow::Cow<'_, str> {
                <$kind as kube::Resource>::api_version(dt)
            }

            fn plural(dt: &()) -> std::borrow::Cow<'_, str> {
                <$kind as kube::Resource>::plural(dt)
            }

            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                let $this = self;
                $meta
            }

            fn meta_mut(
                &mut self,
            ) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                let $this = self;
                $meta_mut
            }
        }
    };
}
pub(crate) use decoded_form_of;

/// The watch of one kind (decoded as `D`, cached as `C`) and every trigger that maps its
/// objects to primary keys.
pub(crate) struct Source<D: Resource, C> {
    pub(crate) kind: String,
    /// Position among the controller's sources, for [`Message::Watch`].
    pub(crate) index: usize,
    pub(crate) api: Api<D>,
    pub(crate) watch: watcher::Config,
    pub(crate) convert: Convert<D, C>,
    pub(crate) cache: ObjectCache<C>,
    pub(crate) mapper: Mapper<C>,
    /// Which watched updates trigger; creates, deletes and (re)lists always do.
    pub(crate) wakes: Wakes<C>,
}

pub(crate) trait AnySource: Send {
    fn spawn(self: Box<Self>, tx: mpsc::UnboundedSender<Message>) -> JoinHandle<()>;
}

impl<D, C> AnySource for Source<D, C>
where
    D: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    C: Cached + Clone + Send + Sync + 'static,
{
    fn spawn(self: Box<Self>, tx: mpsc::UnboundedSender<Message>) -> JoinHandle<()> {
        tokio::spawn(self.run(tx))
    }
}

impl<D, C> Source<D, C>
where
    D: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    C: Cached + Clone + Send + Sync + 'static,
{
    /// Send the triggers of `objects` (e.g. an object's old and new state), each once.
    fn send(&self, tx: &mpsc::UnboundedSender<Message>, objects: &[&C]) {
        let mut sent = BTreeSet::new();
        for obj in objects {
            for (key, trigger) in (self.mapper)(obj) {
                if sent.insert((key.clone(), trigger.clone())) {
                    let _ = tx.send(Message::Trigger(key, trigger, Priority::Normal));
                }
            }
        }
    }

    async fn run(self, tx: mpsc::UnboundedSender<Message>) {
        let stream = watcher::watcher(self.api.clone(), self.watch.clone());
        futures::pin_mut!(stream);
        let mut backoff = WatchBackoff::default();
        // Keys seen by the (re)list in progress.
        let mut listed = Listed::default();
        let mut synced = false;
        let phase = |phase| {
            let _ = tx.send(Message::Watch(self.index, phase));
        };
        while let Some(event) = stream.next().await {
            if event.is_ok() {
                backoff.progress();
            }
            match event {
                Ok(Event::Init) => {
                    listed = Listed::default();
                    phase(if synced {
                        WatchPhase::Relisting
                    } else {
                        WatchPhase::Listing
                    });
                }
                Ok(Event::InitApply(obj)) => {
                    let obj = (self.convert)(obj);
                    let changed = self.cache.apply_listed(obj, &mut listed, self.wakes);
                    let changed: Vec<&C> = changed.iter().map(AsRef::as_ref).collect();
                    self.send(&tx, &changed);
                }
                Ok(Event::InitDone) => {
                    let gone = self.cache.retain_listed(std::mem::take(&mut listed));
                    let gone: Vec<&C> = gone.iter().map(AsRef::as_ref).collect();
                    self.send(&tx, &gone);
                    phase(WatchPhase::Watching);
                    if !synced {
                        synced = true;
                        let _ = tx.send(Message::Synced);
                    }
                }
                Ok(Event::Apply(obj)) => {
                    let obj = (self.convert)(obj);
                    if let Ok(update) = self.cache.update(obj, self.wakes) {
                        let current = update.current.as_ref();
                        // The old state matters too: an owner reference may have moved.
                        match update.previous {
                            Some(_) if !update.woke => {}
                            Some(prev) => self.send(&tx, &[prev.as_ref(), current]),
                            None => self.send(&tx, &[current]),
                        }
                    }
                }
                Ok(Event::Delete(obj)) => {
                    let obj = (self.convert)(obj);
                    self.cache.remove_watched(&obj);
                    self.send(&tx, &[&obj]);
                }
                Err(e) => {
                    let delay = backoff.delay_after(&e);
                    phase(if delay.is_zero() {
                        WatchPhase::Relisting
                    } else {
                        WatchPhase::BackingOff
                    });
                    if delay.is_zero() {
                        tracing::debug!(kind = %self.kind, "watch expired (410); relisting at once");
                    } else {
                        tracing::warn!(error = %e, kind = %self.kind, ?delay, "watch failed; retrying");
                        tokio::time::sleep(delay).await;
                    }
                }
            }
            if tx.is_closed() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16) -> watcher::Error {
        let status = kube::core::Status::failure("watch error", "Expired").with_code(code);
        watcher::Error::WatchError(Box::new(status))
    }

    #[test]
    fn an_expired_watch_that_had_worked_relists_at_once() {
        let mut backoff = WatchBackoff::default();
        backoff.progress();
        assert_eq!(backoff.delay_after(&status(410)), Duration::ZERO);
        // A second 410 before any event: the relist itself did not work, so wait.
        assert_eq!(backoff.delay_after(&status(410)), WATCH_BACKOFF_MIN);
        assert_eq!(backoff.delay_after(&status(410)), WATCH_BACKOFF_MIN * 2);
        backoff.progress();
        assert_eq!(backoff.delay_after(&status(410)), Duration::ZERO);
    }

    #[test]
    fn other_errors_back_off_doubling_until_progress() {
        let mut backoff = WatchBackoff::default();
        backoff.progress();
        let delays: Vec<Duration> = (0..8).map(|_| backoff.delay_after(&status(500))).collect();
        assert_eq!(delays[0], WATCH_BACKOFF_MIN);
        assert_eq!(delays[1], WATCH_BACKOFF_MIN * 2);
        assert_eq!(delays[7], WATCH_BACKOFF_MAX);
        backoff.progress();
        assert_eq!(backoff.delay_after(&status(500)), WATCH_BACKOFF_MIN);
    }
}
