//! The controller: watches feed caches and triggers, triggers feed the work queue, the
//! queue feeds a bounded pool of reconciles, outcomes feed requeues and backoff.
//!
//! One task owns the queue, the backoff state and the timers, so ordering is decided in one
//! place (and is deterministic on a current-thread runtime with a paused clock). Each watched
//! kind has one watch task, shared by every trigger that needs that kind.

use std::any::{Any, TypeId};
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube::api::Api;
use kube::runtime::watcher;
use kube::{Client, Resource};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tracing::Instrument;

use crate::backoff::{Backoff, BackoffPolicy, desired_state_version};
use crate::inputs::{InputReader, OwnedCache, OwnedInputs, ReadInputs, Settled};
use crate::metrics::{ControllerMetrics, Health, Metrics, ReconcileResult};
use crate::object_cache::{Cached, ObjectCache, ObjectKey, Trim, differs_beyond_version};
use crate::observe::{
    self, Outcome, ReconcileRecord, ReconcileWrites, Recorder, Retry, Role, WatchPhase, WatchedKind,
};
use crate::projection::{Projected, Projection};
use crate::queue::{Popped, Priority, Trigger, WorkQueue};
use crate::source::{AnySource, CachedAs, Mapper, Message, Source, Wakes, every_update, retyped};
use crate::unmanaged::{Unmanaged, cached_unmanaged};
use crate::write_through::{CachingApi, Writable, WriteSink};

/// What a reconcile asks for next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Action {
    requeue_after: Option<Duration>,
}

impl Action {
    /// Nothing more until something changes (or the next resync).
    pub fn done() -> Self {
        Action {
            requeue_after: None,
        }
    }

    /// Run again after `delay` even if nothing changes (e.g. while waiting for pods).
    pub fn requeue_after(delay: Duration) -> Self {
        Action {
            requeue_after: Some(delay),
        }
    }

    /// The delay after which the key runs again, if one was asked for.
    pub fn requeue(&self) -> Option<Duration> {
        self.requeue_after
    }
}

/// Controller settings; the defaults are the documented ones.
#[derive(Debug, Clone)]
pub struct Config {
    /// Name in metrics and logs.
    pub name: String,
    /// Reconciles running at once (default: available CPUs).
    pub concurrency: usize,
    /// Every primary is reconciled this often (±`resync_jitter`), at low priority.
    pub resync_period: Option<Duration>,
    /// Fraction of `resync_period` by which each resync is spread (0.1 = ±10 %), so resyncs of
    /// many objects do not arrive at once.
    pub resync_jitter: f64,
    /// Delays between retries of a key whose reconcile failed.
    pub backoff: BackoffPolicy,
    /// Seed for every random draw (jitter); `None` draws one from the OS.
    pub seed: Option<u64>,
    /// At shutdown, how long running reconciles may take to finish.
    pub shutdown_grace: Duration,
    /// Per-key debounce window (default 0: off). A key that has not started a reconcile
    /// within the window runs at once; events for it that arrive within the window after
    /// its last start are merged into one reconcile at the window's end. Requeues and
    /// backoff retries keep their times, and a key never runs twice at once. Unlike
    /// kube-runtime's trailing debounce, a first event is never delayed and a stream of
    /// events cannot postpone a key for longer than one window.
    pub debounce: Duration,
    /// Objects per page when a source lists, at start and on every relist (default 500,
    /// kube-runtime's and client-go's). A relist holds about one page of each source at
    /// once, raw and decoded, beside the caches: a smaller page lowers that peak, and
    /// costs one LIST request per page. Sources declared with a `watcher::Config` of
    /// their own (`owns_with`, `watches_with`, …) use that config's page size instead.
    pub list_page_size: u32,
    /// Keep each watched object's `metadata.managedFields` (default false). Whole objects
    /// (the primary, `owns`, `watches`) are decoded without them and cached without
    /// them, remembered writes included (through [`Context::api`] or a cache handle's
    /// [`CachingApi::with_cache`]): they are most of an object's
    /// metadata and of the time its decode takes, and a reconciler rarely reads them
    /// (controller-runtime's `TransformStripManagedFields` strips them after decoding).
    /// Set this for a reconciler that reads them from the cache. Projections declare what
    /// they skip themselves ([`Projection::UNREAD`]).
    pub keep_managed_fields: bool,
    /// Skip reconciles that would only confirm the last one (default false: every event
    /// runs the reconciler, as in controller-runtime and kube-runtime). When set, a key
    /// whose last reconcile succeeded and changed its inputs — its primary and the objects
    /// it owns — only by its own writes through the context is *settled*; a later wake-up
    /// by its primary's or owned objects' events is skipped while none of those objects
    /// has changed since in anything its watch wakes for (the events only echo those
    /// writes, or bring changes nobody is woken for: a bare resourceVersion, a field a
    /// projection leaves out). Resyncs, requeues, retries and mapped-watch triggers always
    /// run. Skips count in `steady_reconcile_skipped_total`. Set it for
    /// a reconciler that reaches its fixed point in one run — one that does not write a
    /// status step and rely on that write's own event to take the next step.
    pub skip_unchanged: bool,
}

impl Config {
    /// The defaults, named `name` (in metrics, logs, the web view).
    pub fn named(name: impl Into<String>) -> Config {
        Config {
            name: name.into(),
            ..Config::default()
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            name: "controller".into(),
            concurrency: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            resync_period: Some(Duration::from_secs(600)),
            resync_jitter: 0.1,
            backoff: BackoffPolicy::default(),
            seed: None,
            shutdown_grace: Duration::from_secs(30),
            debounce: Duration::ZERO,
            list_page_size: 500,
            keep_managed_fields: false,
            skip_unchanged: false,
        }
    }
}

pub use crate::error::Error;

/// Every source's cache (by the cached type) and where writes of each watched kind are
/// remembered (by the kind), type-erased.
#[derive(Default)]
pub(crate) struct Caches {
    /// `ObjectCache<C>` by `TypeId::of::<C>()`.
    by_cached: BTreeMap<TypeId, Box<dyn Any + Send + Sync>>,
    /// `WriteSink<W>` by `TypeId::of::<W>()`, `W` the kind watched and written.
    writes: BTreeMap<TypeId, Box<dyn Any + Send + Sync>>,
    /// The name of the type each kind `W` is cached as, by `TypeId::of::<W>()`.
    cached_as: BTreeMap<TypeId, &'static str>,
}

impl Caches {
    fn get<C: 'static>(&self) -> Option<ObjectCache<C>> {
        self.by_cached
            .get(&TypeId::of::<C>())
            .and_then(|c| c.downcast_ref::<ObjectCache<C>>())
            .cloned()
    }

    fn writes<D: 'static>(&self) -> Option<WriteSink<D>> {
        self.writes
            .get(&TypeId::of::<D>())
            .and_then(|w| w.downcast_ref::<WriteSink<D>>())
            .cloned()
    }
}

/// What every reconcile receives besides the object: the operator's data, the client and
/// the caches of every watched kind.
pub struct Context<T> {
    data: Arc<T>,
    client: Client,
    caches: Arc<Caches>,
}

impl<T> Context<T> {
    /// The operator's own data, shared by every reconcile.
    pub fn data(&self) -> &T {
        &self.data
    }

    /// The client the controller watches with, for the reconciler's writes.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The same client and caches with other data: lets a wrapper reconciler call an inner
    /// one that expects its own context type.
    pub fn with_data<U>(&self, data: Arc<U>) -> Context<U> {
        Context {
            data,
            client: self.client.clone(),
            caches: self.caches.clone(),
        }
    }

    /// Writes of kind `C` in `namespace` that update the controller's cache of `C` (if it
    /// watches `C`) on success, so the next reconcile reads its own writes.
    pub fn api<C>(&self, namespace: &str) -> CachingApi<C>
    where
        C: Writable<Scope = NamespaceResourceScope>,
    {
        CachingApi::new(
            Api::namespaced(self.client(), namespace),
            self.caches.writes::<C>(),
        )
    }

    /// [`api`](Self::api) for a cluster-scoped kind.
    pub fn cluster_api<C>(&self) -> CachingApi<C>
    where
        C: Writable<Scope = ClusterResourceScope>,
    {
        CachingApi::new(Api::all(self.client()), self.caches.writes::<C>())
    }

    /// The cache of kind `C` (the primary, an owned kind or a watched kind), for a
    /// reconciler written apart from its controller. Prefer the handle `owns`/`watches`
    /// returned (kept in the context's data): it cannot be missing.
    pub fn cache<C: Resource<DynamicType = ()> + 'static>(&self) -> Result<ObjectCache<C>, Error> {
        self.caches.get::<C>().ok_or_else(|| {
            let kind = C::kind(&()).to_string();
            match self.caches.cached_as.get(&TypeId::of::<C>()) {
                Some(cached) => Error::CachedAsProjection {
                    kind,
                    cached: cached.to_string(),
                },
                None => Error::NoCache { kind },
            }
        })
    }

    /// The projected cache of `P` (a kind added with
    /// [`owns_projected`](Controller::owns_projected) or `watches_projected_with`), for a
    /// reconciler written apart from its controller. Prefer the handle those returned.
    pub fn projected<P: Projection>(&self) -> Result<ObjectCache<Projected<P>>, Error> {
        self.caches
            .get::<Projected<P>>()
            .ok_or_else(|| Error::NoCache {
                kind: P::Kind::kind(&()).to_string(),
            })
    }
}

/// A kind a controller can own or watch: a typed resource it decodes, caches and compares
/// (an update that leaves the cached form equal but for its resourceVersion wakes nobody).
/// Every k8s-openapi kind is one, as is a `CustomResource` deriving `PartialEq`.
pub trait SourceKind:
    Resource<DynamicType = ()> + Clone + PartialEq + DeserializeOwned + Debug + Send + Sync + 'static
{
}

impl<C> SourceKind for C where
    C: Resource<DynamicType = ()>
        + Clone
        + PartialEq
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static
{
}

/// A level-triggered controller of primary kind `K`.
pub struct Controller<K: Resource> {
    client: Client,
    config: Config,
    primary: ObjectCache<K>,
    /// In declaration order, which is the order their watches start: the same in every
    /// build (a `TypeId` order differs between builds, and with it which list reaches the
    /// server first — a replay of a simulated seed must not depend on the binary).
    sources: Vec<Box<dyn AnySource>>,
    caches: Caches,
    metrics: Option<Metrics>,
    health: Option<Health>,
    leader: Option<watch::Receiver<bool>>,
    recorder: Option<Recorder>,
    /// Every source's kind, in declaration order (for the recorder's state).
    kinds: Vec<WatchedKind>,
    /// The caches of owned kinds, for [`Config::skip_unchanged`].
    owned_inputs: Vec<Arc<dyn OwnedInputs>>,
    /// Trims of kinds not watched (yet): the type's name (for the error if it never is)
    /// and its `Trim<C>`.
    pending_trims: BTreeMap<TypeId, (String, Box<dyn Any + Send + Sync>)>,
    /// The first reason `run` must refuse to start.
    invalid: Option<Error>,
}

/// The watch of a source declared without one: every object, listed in pages of
/// [`Config::list_page_size`].
fn every_object(config: &Config) -> watcher::Config {
    watcher::Config::default().page_size(config.list_page_size)
}

impl<K> Controller<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// Reconcile the objects `api` lists (all namespaces or one). Reconcilers write with
    /// `api`'s client ([`Context::client`]).
    pub fn new(api: Api<K>, config: Config) -> Self {
        let watch = every_object(&config);
        Self::new_with(api, watch, config)
    }

    /// [`new`](Self::new), reconciling only the objects that match `watch` (label and
    /// field selectors), as kube-runtime's `Controller::new` takes a `watcher::Config`:
    /// only those are watched and cached.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::Pod;
    /// # use kube::Api;
    /// # use kube::runtime::watcher;
    /// # use steady_runtime::{Config, Controller};
    /// # fn build(client: kube::Client) {
    /// // Reconcile only the pods an app labels as its own.
    /// let labelled = watcher::Config::default().labels("app.example.com/part-of");
    /// let controller = Controller::new_with(Api::<Pod>::all(client), labelled, Config::named("pods"));
    /// # }
    /// ```
    pub fn new_with(api: Api<K>, watch: watcher::Config, config: Config) -> Self {
        let mut controller = Controller {
            client: api.clone().into_client(),
            config,
            primary: ObjectCache::default(),
            sources: Vec::new(),
            caches: Caches::default(),
            metrics: None,
            health: None,
            leader: None,
            recorder: None,
            kinds: Vec::new(),
            owned_inputs: Vec::new(),
            pending_trims: BTreeMap::new(),
            invalid: None,
        };
        let primary = controller.primary.clone();
        controller.add_whole_source(
            Role::Primary,
            api,
            watch,
            primary,
            Arc::new(|obj: &K| vec![(ObjectKey::of(obj), Trigger::Primary)]),
            every_update,
        );
        controller
    }

    /// [`add_source`](Self::add_source) for a kind cached whole: decoded without its
    /// managed fields unless [`Config::keep_managed_fields`] is set.
    fn add_whole_source<C>(
        &mut self,
        role: Role,
        api: Api<C>,
        watch: watcher::Config,
        cache: ObjectCache<C>,
        mapper: Mapper<C>,
        wakes: Wakes<C>,
    ) -> ObjectCache<C>
    where
        C: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        if self.config.keep_managed_fields {
            return self.add_source(role, api, watch, CachedAs::itself(cache), mapper, wakes);
        }
        let api = retyped::<C, Unmanaged<C>>(api);
        self.add_source(role, api, watch, cached_unmanaged(cache), mapper, wakes)
    }

    /// The one place a source is added: `W` the kind watched and written, `D` the form the
    /// watch decodes it in (`W` itself, or a projection's decoding), `C` the form its
    /// objects are cached in (`W` itself, or a projection).
    pub(crate) fn add_source<W, D, C>(
        &mut self,
        role: Role,
        api: Api<D>,
        watch: watcher::Config,
        cached: CachedAs<W, D, C>,
        mapper: Mapper<C>,
        wakes: Wakes<C>,
    ) -> ObjectCache<C>
    where
        W: 'static,
        D: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        C: Cached + Clone + Send + Sync + 'static,
    {
        let CachedAs {
            convert,
            cache,
            writes,
        } = cached;
        let kind = D::kind(&()).to_string();
        if self.caches.writes::<W>().is_some() {
            // The second Api (its namespace, its selectors) would be ignored: refuse it.
            self.invalid.get_or_insert(Error::DuplicateSource { kind });
            return self.caches.get::<C>().unwrap_or(cache);
        }
        let id = TypeId::of::<C>();
        if let Some(trim) = self
            .pending_trims
            .remove(&id)
            .and_then(|(_, t)| t.downcast::<Trim<C>>().ok())
        {
            cache.set_trim(*trim);
        }
        self.caches.by_cached.insert(id, Box::new(cache.clone()));
        if role == Role::Owned {
            self.owned_inputs.push(Arc::new(OwnedCache {
                kind: kind.clone(),
                cache: cache.clone(),
            }));
        }
        self.caches
            .writes
            .insert(TypeId::of::<W>(), Box::new(writes));
        self.caches
            .cached_as
            .insert(TypeId::of::<W>(), std::any::type_name::<C>());
        let resource = kube::api::ApiResource::erase::<D>(&());
        self.kinds.push(WatchedKind {
            role,
            group: resource.group,
            version: resource.version,
            kind: resource.kind,
            plural: resource.plural,
            namespace: api.namespace().map(str::to_string),
            phase: WatchPhase::Listing,
        });
        self.sources.push(Box::new(Source {
            kind,
            index: self.kinds.len() - 1,
            api,
            watch,
            convert,
            cache: cache.clone(),
            mapper,
            wakes,
        }));
        cache
    }

    /// [`owns_with`](Self::owns_with) the default watch (every object `api` lists).
    pub fn owns<C>(&mut self, api: Api<C>) -> ObjectCache<C>
    where
        C: SourceKind,
    {
        self.owns_with(api, self.default_watch())
    }

    /// [`every_object`] under this controller's config.
    pub(crate) fn default_watch(&self) -> watcher::Config {
        every_object(&self.config)
    }

    /// Reconcile the owner when an object of kind `C` it controls changes: the object's
    /// controller ownerReference (kind and apiVersion of `K`) names the key. Only objects
    /// matching `watch` (label and field selectors) are watched and cached. Returns the
    /// cache of `C`, for the reconciler's reads.
    ///
    /// Each kind has one watch: a second `owns`/`watches` of `C` (or of the primary kind)
    /// makes [`run`](Self::run) fail with [`Error::DuplicateSource`] before watching anything.
    pub fn owns_with<C>(&mut self, api: Api<C>, watch: watcher::Config) -> ObjectCache<C>
    where
        C: SourceKind,
    {
        let mapper = self.controller_mapper(C::kind(&()).to_string());
        self.add_owned_source(api, watch, mapper)
    }

    /// As [`owns`](Self::owns), and an object without a controller wakes every
    /// primary of its namespace that `selects` it: what a controller that adopts orphans
    /// needs, as kube's workload controllers adopt the orphans their selector matches (a
    /// StatefulSet deleted with `--cascade=orphan` and created again takes its pods
    /// back). The reconciler still does the adopting; this only makes it hear of them.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::apps::v1::ReplicaSet;
    /// # use k8s_openapi::api::core::v1::Pod;
    /// # use kube::Api;
    /// # use steady_runtime::{Config, Controller};
    /// # fn build(client: kube::Client) {
    /// let mut controller =
    ///     Controller::new(Api::<ReplicaSet>::all(client.clone()), Config::named("sets"));
    /// let same_app = |set: &ReplicaSet, pod: &Pod| {
    ///     let app = |labels: Option<&std::collections::BTreeMap<String, String>>| {
    ///         labels.and_then(|l| l.get("app")).cloned()
    ///     };
    ///     app(set.metadata.labels.as_ref()).is_some()
    ///         && app(set.metadata.labels.as_ref()) == app(pod.metadata.labels.as_ref())
    /// };
    /// let pods = controller.owns_or_adopts(Api::<Pod>::all(client), same_app);
    /// # }
    /// ```
    pub fn owns_or_adopts<C, S>(&mut self, api: Api<C>, selects: S) -> ObjectCache<C>
    where
        C: SourceKind,
        S: Fn(&K, &C) -> bool + Send + Sync + 'static,
    {
        self.owns_or_adopts_with(api, self.default_watch(), selects)
    }

    /// [`owns_or_adopts`](Self::owns_or_adopts), watching only the objects that match
    /// `watch` (label and field selectors), as [`owns_with`](Self::owns_with) does.
    pub fn owns_or_adopts_with<C, S>(
        &mut self,
        api: Api<C>,
        watch: watcher::Config,
        selects: S,
    ) -> ObjectCache<C>
    where
        C: SourceKind,
        S: Fn(&K, &C) -> bool + Send + Sync + 'static,
    {
        let kind = C::kind(&()).to_string();
        let owned = self.controller_mapper::<C>(kind.clone());
        let primaries = self.primary.clone();
        let mapper: Mapper<C> = Arc::new(move |obj: &C| {
            if obj.cached_owners().any(|r| r.controller) {
                return owned(obj);
            }
            let key = obj.cache_key();
            let trigger = Trigger::Owned {
                kind: kind.clone(),
                name: key.to_string(),
            };
            primaries
                .in_namespace(key.namespace.as_deref())
                .iter()
                .filter(|primary| selects(primary, obj))
                .map(|primary| (ObjectKey::of(primary.as_ref()), trigger.clone()))
                .collect()
        });
        self.add_owned_source(api, watch, mapper)
    }

    /// A source of owned objects (whole, as the server sends them) that wakes what
    /// `mapper` names.
    fn add_owned_source<C>(
        &mut self,
        api: Api<C>,
        watch: watcher::Config,
        mapper: Mapper<C>,
    ) -> ObjectCache<C>
    where
        C: SourceKind,
    {
        self.add_whole_source(
            Role::Owned,
            api,
            watch,
            ObjectCache::default(),
            mapper,
            differs_beyond_version,
        )
    }

    /// The trigger of an owned object (of kind `child_kind`): its controller, if that is
    /// of kind `K`.
    pub(crate) fn controller_mapper<C: Cached>(&self, child_kind: String) -> Mapper<C> {
        let (owner_kind, owner_version) =
            (K::kind(&()).to_string(), K::api_version(&()).to_string());
        Arc::new(move |obj: &C| -> Vec<(ObjectKey, Trigger)> {
            let key = obj.cache_key();
            obj.cached_owners()
                .filter(|r| r.controller && r.kind == owner_kind && r.api_version == owner_version)
                .map(|r| {
                    let owner = ObjectKey {
                        namespace: key.namespace.clone(),
                        name: r.name.to_string(),
                    };
                    let trigger = Trigger::Owned {
                        kind: child_kind.clone(),
                        name: key.to_string(),
                    };
                    (owner, trigger)
                })
                .collect()
        })
    }

    /// Cache objects of kind `C` (the primary, or a kind added with `owns` or `watches`,
    /// before or after this call) only after `trim` has dropped what the reconciler never
    /// reads, as client-go's informer transforms and kube-rs's `reflector(…).modify()` do.
    /// Everything a reconcile reads of that kind from the cache, its own remembered writes
    /// included, is trimmed. Keep what trigger mappers read (owner references, for `owns`).
    /// A trim of a kind the controller never watches makes [`run`](Self::run) fail with
    /// [`Error::TrimWithoutSource`].
    pub fn trim<C>(&mut self, trim: impl Fn(&mut C) + Send + Sync + 'static)
    where
        C: Resource + 'static,
    {
        let trim: Trim<C> = Arc::new(trim);
        let id = TypeId::of::<C>();
        match self.caches.get::<C>() {
            Some(cache) => cache.set_trim(trim),
            None => {
                let kind = std::any::type_name::<C>().to_string();
                self.pending_trims.insert(id, (kind, Box::new(trim)));
            }
        }
    }

    /// [`watches_with`](Self::watches_with) the default watch (every object `api` lists).
    pub fn watches<C, F>(&mut self, api: Api<C>, mapper: F) -> ObjectCache<C>
    where
        C: SourceKind,
        F: Fn(&C) -> Vec<ObjectKey> + Send + Sync + 'static,
    {
        self.watches_with(api, self.default_watch(), mapper)
    }

    /// Watch objects of kind `C` that primaries refer to without owning them (the Service a
    /// spec proxies to, the Secret it names): when one changes, every primary whose
    /// `references` names it is reconciled. Returns the cache of `C`.
    ///
    /// The inverse of `references` is computed on each event by scanning the primary cache
    /// (fine for thousands of primaries; with more, index them in a [`watches`](Self::watches)
    /// mapper of your own).
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    /// # use kube::{Api, ResourceExt};
    /// # use steady_runtime::{Config, Controller, ObjectKey};
    /// # fn build(client: kube::Client) {
    /// // Pods that mount a ConfigMap are reconciled when it changes.
    /// let mut controller = Controller::new(Api::<Pod>::all(client.clone()), Config::named("pods"));
    /// let config_maps = controller.watches_references(Api::<ConfigMap>::all(client), |pod: &Pod| {
    ///     let volumes = pod.spec.iter().flat_map(|s| s.volumes.iter().flatten());
    ///     let mounted = volumes.filter_map(|v| Some(v.config_map.as_ref()?.name.clone()));
    ///     let namespace = pod.namespace();
    ///     mounted
    ///         .map(|name| ObjectKey::new(namespace.as_deref(), &name))
    ///         .collect::<Vec<_>>()
    /// });
    /// # }
    /// ```
    pub fn watches_references<C, R, I>(&mut self, api: Api<C>, references: R) -> ObjectCache<C>
    where
        C: SourceKind,
        R: Fn(&K) -> I + Send + Sync + 'static,
        I: IntoIterator<Item = ObjectKey>,
    {
        let primaries = self.primary.clone();
        self.watches(api, move |object: &C| {
            let key = ObjectKey::of(object);
            primaries
                .list()
                .iter()
                .filter(|primary| references(primary).into_iter().any(|r| r == key))
                .map(|primary| ObjectKey::of(primary.as_ref()))
                .collect()
        })
    }

    /// Reconcile the keys `mapper` names when an object of kind `C` that matches `watch`
    /// changes. Returns the cache of `C`; a second source of one kind is an error, as for
    /// [`owns_with`](Self::owns_with).
    pub fn watches_with<C, F>(
        &mut self,
        api: Api<C>,
        watch: watcher::Config,
        mapper: F,
    ) -> ObjectCache<C>
    where
        C: SourceKind,
        F: Fn(&C) -> Vec<ObjectKey> + Send + Sync + 'static,
    {
        self.add_whole_source(
            Role::Watched,
            api,
            watch,
            ObjectCache::default(),
            watched_mapper(C::kind(&()).to_string(), mapper),
            differs_beyond_version,
        )
    }

    /// Why [`run`](Self::run) would refuse to start (a duplicate source, a trim of a kind
    /// never watched), checked without running.
    pub fn validate(&self) -> Result<(), Error> {
        if let Some(invalid) = &self.invalid {
            return Err(invalid.clone());
        }
        match self.pending_trims.values().next() {
            Some((kind, _)) => Err(Error::TrimWithoutSource { kind: kind.clone() }),
            None => Ok(()),
        }
    }

    /// Record controller-runtime's metrics here.
    pub fn with_metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Report readiness (caches synced) here.
    pub fn with_health(mut self, health: Health) -> Self {
        self.health = Some(health);
        self
    }

    /// Record every reconcile (triggers, outcome, writes) and the controller's state here
    /// (see [`crate::observe`]).
    pub fn with_recorder(mut self, recorder: Recorder) -> Self {
        self.recorder = Some(recorder);
        self
    }

    /// Reconcile only while this channel says `true` (see [`crate::leader`]); when it
    /// turns `false`, running reconciles are cancelled and `run` returns at once.
    pub fn with_leader(mut self, leading: watch::Receiver<bool>) -> Self {
        self.leader = Some(leading);
        self
    }

    /// The primary kind's cache.
    pub fn primary_cache(&self) -> ObjectCache<K> {
        self.primary.clone()
    }

    /// Run until `shutdown` completes (then finish running reconciles, bounded) or
    /// leadership is lost.
    pub async fn run<T, R, Fut, E>(
        self,
        reconcile: R,
        data: Arc<T>,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), Error>
    where
        T: Send + Sync + 'static,
        R: Fn(Arc<K>, Arc<Context<T>>) -> Fut,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: std::fmt::Display + Send + 'static,
    {
        self.validate()?;
        let Controller {
            client,
            config,
            primary,
            sources,
            caches,
            metrics,
            health,
            mut leader,
            recorder,
            kinds,
            owned_inputs,
            ..
        } = self;
        if let Some(recorder) = &recorder {
            recorder.update_state(|state| {
                *state = observe::ControllerState {
                    name: config.name.clone(),
                    running: true,
                    kinds,
                    ..Default::default()
                };
                true
            });
        }
        let context = Arc::new(Context {
            data,
            client,
            caches: Arc::new(caches),
        });
        let (tx, mut rx) = mpsc::unbounded_channel();
        let source_count = sources.len();
        // Dropped (and so aborted) with this future too: a controller torn down mid-run
        // (a crash in the simulator, a cancelled task) leaves no watch running.
        let watch_tasks = AbortOnDrop(sources.into_iter().map(|s| s.spawn(tx.clone())).collect());
        drop(tx);
        let metrics = metrics.map(|m| m.controller(&config.name));
        if let Some(m) = &metrics {
            m.set_max_concurrent(config.concurrency as i64);
        }
        let mut rng = match config.seed {
            Some(seed) => StdRng::seed_from_u64(seed),
            None => StdRng::from_os_rng(),
        };
        let backoff_rng = StdRng::from_rng(&mut rng);
        let settled = config.skip_unchanged.then(|| {
            let reader = InputReader {
                primary_kind: K::kind(&()).to_string(),
                owned: owned_inputs,
            };
            let primary = primary.clone();
            let read: ReadInputs = Box::new(move |key| {
                let (obj, stamp) = primary.get_stamped(key)?;
                Some(reader.read(obj.as_ref(), stamp))
            });
            Settled::new(read)
        });
        let mut state = LoopState {
            name: config.name.clone(),
            settled,
            queue: WorkQueue::with_debounce(config.debounce),
            backoff: Backoff::new(config.backoff.clone(), backoff_rng),
            metrics,
            running: JoinSet::new(),
            recorder,
        };
        let mut synced = 0;
        let mut next_resync = config
            .resync_period
            .map(|p| Instant::now() + jittered(p, config.resync_jitter, &mut rng));
        futures::pin_mut!(shutdown);
        let outcome = loop {
            let leading = leader.as_ref().is_none_or(|l| *l.borrow());
            if synced == source_count && leading {
                while state.running.len() < config.concurrency.max(1) {
                    let Some(popped) = state.queue.pop() else {
                        break;
                    };
                    state.start(popped, &primary, &reconcile, &context);
                }
            }
            state.report_gauges();
            state.report_state(leader.as_ref().map(|l| *l.borrow()), synced == source_count);
            let deadline = [state.queue.next_deadline(), next_resync]
                .into_iter()
                .flatten()
                .min();
            tokio::select! {
                biased;
                _ = &mut shutdown => break Ok(()),
                lost = leadership_lost(&mut leader) => {
                    if lost {
                        state.running.abort_all();
                        break Err(Error::LostLeadership);
                    }
                }
                Some(joined) = state.running.join_next(), if !state.running.is_empty() => state.finish(joined),
                message = rx.recv() => {
                    let Some(first) = message else { break Err(Error::WatchesEnded) };
                    // Take everything already sent before starting work, so a burst of
                    // events for one key coalesces into one reconcile.
                    let mut next = Some(first);
                    while let Some(message) = next {
                        match message {
                            Message::Trigger(key, trigger, priority) => {
                                state.queue.add(key, trigger, priority);
                                if let Some(m) = &state.metrics { m.add(); }
                            }
                            Message::Watch(index, phase) => state.report_watch(index, phase),
                            Message::Synced => {
                                synced += 1;
                                if synced == source_count {
                                    if let Some(h) = &health { h.set_ready(true); }
                                    tracing::info!(controller = %config.name, "caches synced; reconciling");
                                }
                            }
                        }
                        next = rx.try_recv().ok();
                    }
                }
                _ = sleep_until(deadline) => {
                    let now = Instant::now();
                    state.queue.promote_due(now);
                    if let (Some(at), Some(period)) = (next_resync, config.resync_period)
                        && now >= at {
                            for key in primary.keys() {
                                state.queue.add(key, Trigger::Resync, Priority::Low);
                            }
                            next_resync = Some(now + jittered(period, config.resync_jitter, &mut rng));
                        }
                }
            }
        };
        drop(watch_tasks);
        if outcome.is_ok() {
            let drained = tokio::time::timeout(config.shutdown_grace, async {
                while let Some(joined) = state.running.join_next().await {
                    state.finish(joined);
                }
            });
            if drained.await.is_err() {
                state.running.abort_all();
            }
        }
        if let Some(h) = &health {
            h.set_ready(false);
        }
        if let Some(recorder) = &state.recorder {
            recorder.update_state(|s| {
                s.running = false;
                s.in_flight = 0;
                true
            });
        }
        outcome
    }
}

/// The triggers of a watched object (of kind `kind`): the primaries `mapper` names.
pub(crate) fn watched_mapper<C: Cached>(
    kind: String,
    mapper: impl Fn(&C) -> Vec<ObjectKey> + Send + Sync + 'static,
) -> Mapper<C> {
    Arc::new(move |obj: &C| -> Vec<(ObjectKey, Trigger)> {
        let trigger = Trigger::Watched {
            kind: kind.clone(),
            name: obj.cache_key().to_string(),
        };
        mapper(obj)
            .into_iter()
            .map(|key| (key, trigger.clone()))
            .collect()
    })
}

/// Tasks aborted when this is dropped.
struct AbortOnDrop(Vec<JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Resolves with `true` when leadership is lost (never, without an elector).
async fn leadership_lost(leader: &mut Option<watch::Receiver<bool>>) -> bool {
    let Some(rx) = leader.as_mut() else {
        return std::future::pending().await;
    };
    let was_leading = *rx.borrow_and_update();
    if rx.changed().await.is_err() {
        return was_leading;
    }
    was_leading && !*rx.borrow()
}

fn jittered(period: Duration, jitter: f64, rng: &mut StdRng) -> Duration {
    let factor = 1.0 + rng.random_range(-jitter..=jitter).clamp(-0.99, 10.0);
    period.mul_f64(factor.max(0.01))
}

type Finished<E> = (
    ObjectKey,
    Option<i64>,
    Result<Result<Action, E>, ()>,
    Instant,
    Option<ReconcileRecord>,
    ReconcileWrites,
);

struct LoopState<E> {
    name: String,
    /// `Some` with [`Config::skip_unchanged`].
    settled: Option<Settled>,
    queue: WorkQueue<ObjectKey>,
    backoff: Backoff<ObjectKey>,
    metrics: Option<ControllerMetrics>,
    running: JoinSet<Finished<E>>,
    recorder: Option<Recorder>,
}

impl<E: std::fmt::Display + Send + 'static> LoopState<E> {
    fn start<K, T, R, Fut>(
        &mut self,
        popped: Popped<ObjectKey>,
        primary: &ObjectCache<K>,
        reconcile: &R,
        context: &Arc<Context<T>>,
    ) where
        K: Resource + Send + Sync + 'static,
        R: Fn(Arc<K>, Arc<Context<T>>) -> Fut,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
    {
        let Popped {
            key,
            triggers,
            queued_at,
        } = popped;
        if let Some(m) = &self.metrics {
            m.queued_for(queued_at.elapsed());
        }
        let Some(obj) = primary.get(&key) else {
            // Gone: nothing to reconcile; owned objects are the garbage collector's.
            tracing::debug!(controller = %self.name, object = %key, "primary is gone; nothing to do");
            self.backoff.forget(&key);
            if let Some(settled) = &mut self.settled {
                settled.forget(&key);
            }
            if let Some(recorder) = &self.recorder {
                recorder.update_state(|state| state.backoff.remove(&key.to_string()).is_some());
            }
            self.queue.done(&key);
            return;
        };
        if let Some(settled) = &mut self.settled
            && settled.skip(&key, &triggers)
        {
            tracing::trace!(controller = %self.name, object = %key, "inputs unchanged since the last reconcile; skipped");
            if let Some(m) = &self.metrics {
                m.reconcile_skipped();
            }
            self.queue.done(&key);
            return;
        }
        let generation = desired_state_version(obj.meta());
        if let Some(m) = &self.metrics {
            m.reconcile_started(&triggers);
        }
        let record = self.recorder.as_ref().map(|recorder| {
            recorder.update_state(|state| state.backoff.remove(&key.to_string()).is_some());
            recorder.start(&self.name, &key, &triggers)
        });
        let reasons: Vec<String> = triggers.iter().map(ToString::to_string).collect();
        let span = tracing::info_span!("reconcile", controller = %self.name, object = %key, triggers = %reasons.join(", "));
        // Boxed where it is made: a reconcile's future holds every request future it awaits
        // (many KiB), and the task around it would otherwise be copied whole at each layer
        // it passes through on its way into the JoinSet and at its first poll.
        let future = Box::pin(reconcile(obj, context.clone()));
        let started = Instant::now();
        self.running.spawn(
            async move {
                let (outcome, writes) =
                    observe::collect_writes(AssertUnwindSafe(future).catch_unwind()).await;
                (
                    key,
                    generation,
                    outcome.map_err(|_| ()),
                    started,
                    record,
                    writes,
                )
            }
            .instrument(span),
        );
    }

    fn finish(&mut self, joined: Result<Finished<E>, tokio::task::JoinError>) {
        let Ok((key, generation, outcome, started, record, writes)) = joined else {
            return;
        };
        let ReconcileWrites {
            record: written,
            versions,
        } = writes;
        let record = record.map(|record| ReconcileRecord {
            writes: written,
            ..record
        });
        self.queue.done(&key);
        if let Some(settled) = &mut self.settled {
            match &outcome {
                Ok(Ok(_)) => settled.succeeded(&key, &versions),
                _ => settled.forget(&key),
            }
        }
        let elapsed = started.elapsed();
        if let Some(m) = &self.metrics {
            m.worked_for(elapsed);
        }
        match outcome {
            Ok(Ok(action)) => {
                self.backoff.success(&key);
                // This run looked at the key after whatever an earlier run's requeue or
                // retry was meant to look at: its own action replaces them, as kube-runtime's
                // scheduler merges a pending requeue into the run an event starts first.
                self.queue.forget_delayed(&key);
                self.record(record, elapsed, || match action.requeue_after {
                    Some(delay) => Outcome::Requeue {
                        after_ms: delay.as_secs_f64() * 1000.0,
                    },
                    None => Outcome::Ok,
                });
                let result = match action.requeue_after {
                    Some(delay) => {
                        self.queue.add_after(key.clone(), Trigger::Requeue, delay);
                        ReconcileResult::RequeueAfter
                    }
                    None => ReconcileResult::Success,
                };
                if let Some(m) = &self.metrics {
                    m.reconcile_result(result, elapsed);
                }
            }
            Ok(Err(error)) => {
                tracing::warn!(controller = %self.name, object = %key, %error, "reconcile failed");
                self.fail(key, generation, record, elapsed, error.to_string());
            }
            Err(()) => {
                tracing::error!(controller = %self.name, object = %key, "reconcile panicked");
                if let Some(m) = &self.metrics {
                    m.reconcile_panic();
                }
                self.fail(key, generation, record, elapsed, "panicked".into());
            }
        }
    }

    /// A failed reconcile: back off, and say so.
    fn fail(
        &mut self,
        key: ObjectKey,
        generation: Option<i64>,
        record: Option<ReconcileRecord>,
        elapsed: Duration,
        message: String,
    ) {
        let delay = self.backoff.failure(&key, generation);
        let attempt = self.backoff.failures(&key);
        if let Some(recorder) = &self.recorder {
            let at = chrono::Utc::now() + delay;
            recorder.update_state(|state| {
                state.backoff.insert(key.to_string(), Retry { attempt, at });
                true
            });
        }
        self.record(record, elapsed, || Outcome::Error {
            message,
            retry_after_ms: delay.as_secs_f64() * 1000.0,
            attempt,
        });
        self.queue
            .add_after(key, Trigger::Backoff { attempt }, delay);
        if let Some(m) = &self.metrics {
            m.reconcile_result(ReconcileResult::Error, elapsed);
            m.retry();
        }
    }

    fn record(
        &self,
        record: Option<ReconcileRecord>,
        elapsed: Duration,
        outcome: impl FnOnce() -> Outcome,
    ) {
        if let (Some(recorder), Some(record)) = (&self.recorder, record) {
            recorder.finish(record, elapsed, outcome());
        }
    }

    fn report_state(&self, leader: Option<bool>, synced: bool) {
        if let Some(recorder) = &self.recorder {
            let now = (leader, synced, self.queue.len(), self.running.len());
            recorder.update_state(|state| {
                let before = (
                    state.leader,
                    state.synced,
                    state.queue_depth,
                    state.in_flight,
                );
                (
                    state.leader,
                    state.synced,
                    state.queue_depth,
                    state.in_flight,
                ) = now;
                before != now
            });
        }
    }

    fn report_watch(&self, index: usize, phase: WatchPhase) {
        if let Some(recorder) = &self.recorder {
            recorder.update_state(|state| {
                state
                    .kinds
                    .get_mut(index)
                    .is_some_and(|kind| std::mem::replace(&mut kind.phase, phase) != phase)
            });
        }
    }

    fn report_gauges(&self) {
        if let Some(m) = &self.metrics {
            m.set_depth(self.queue.len() as i64);
            m.set_active_workers(self.running.len() as i64);
            let (_, longest) = self.queue.unfinished_work(Instant::now());
            m.set_longest_running(longest);
        }
    }
}
