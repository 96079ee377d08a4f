//! Why a controller stops or refuses to start: the one error type of [`crate::Controller`]
//! and of its context's cache lookups. Must not know: how sources or reconciles run.

/// Why a controller stopped (or refused to start) other than by shutdown.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// Two sources of one kind (`owns`/`watches` twice, or of the primary kind): each kind
    /// has one watch and one cache, so the second source's Api (namespace, selectors)
    /// would be silently ignored.
    #[error(
        "{kind} has two sources (primary, owns or watches): each kind has one watch; \
         trigger on it in several ways from one watches() mapper"
    )]
    DuplicateSource {
        /// The kind added twice.
        kind: String,
    },
    /// `trim` for a kind the controller neither reconciles, owns nor watches.
    #[error("trim() for {kind}, which the controller neither reconciles, owns nor watches")]
    TrimWithoutSource {
        /// The Rust type trimmed.
        kind: String,
    },
    /// A reconcile asked the context for the cache of a kind the controller does not watch.
    #[error("no cache of {kind}: the controller neither reconciles, owns nor watches it")]
    NoCache {
        /// The kind asked for.
        kind: String,
    },
    /// A reconcile asked the context for the cache of a kind the controller caches as a
    /// projection ([`Controller::owns_projected`](crate::Controller::owns_projected)), not as the kind itself.
    #[error(
        "no cache of {kind} itself: the controller caches it as {cached}; read it with \
         ctx.projected::<P>() (P the projection) or the handle owns_projected returned"
    )]
    CachedAsProjection {
        /// The kind asked for.
        kind: String,
        /// The type its objects are cached as.
        cached: String,
    },
    /// The leader Lease was lost: another replica may be reconciling now.
    #[error("leadership was lost; stopped reconciling at once")]
    LostLeadership,
    /// Every watch stream ended, so no trigger can arrive any more.
    #[error("every watch ended")]
    WatchesEnded,
}
