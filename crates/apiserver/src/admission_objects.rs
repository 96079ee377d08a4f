//! Which namespace-wide admission objects this server has ever stored: ResourceQuotas,
//! LimitRanges, namespaces labelled for PodSecurity. Most clusters have none of them, and
//! then a write pays one atomic load per plugin instead of a store lookup in its
//! namespace. Each flag is found at start and set before the first such object is
//! stored; none is ever cleared (a namespace without one still answers its own lookup).
//! Must not know: what the plugins do with them (`resource_quota`, `limit_ranger`,
//! `pod_security`).

use std::sync::atomic::{AtomicBool, Ordering};

use crate::ApiServer;
use crate::pod_security::LABEL_PREFIX;
use crate::registry::ResourceType;

/// Store key prefixes of the kinds the flags follow.
pub(crate) const QUOTAS_PREFIX: &str = "/core/resourcequotas/";
pub(crate) const LIMIT_RANGES_PREFIX: &str = "/core/limitranges/";
const NAMESPACES_PREFIX: &str = "/core/namespaces/";

#[derive(Debug, Default)]
pub(crate) struct AdmissionObjects {
    quotas: AtomicBool,
    limit_ranges: AtomicBool,
    pod_security: AtomicBool,
}

impl AdmissionObjects {
    pub(crate) fn find_stored(&self, store: &steady_store::Store) {
        let any = |prefix: &str| {
            let first = steady_store::ListOptions {
                limit: Some(1),
                ..Default::default()
            };
            store
                .list(prefix, &first, &|_| true)
                .is_ok_and(|page| !page.items.is_empty())
        };
        let labelled = store
            .list(NAMESPACES_PREFIX, &Default::default(), &|_| true)
            .is_ok_and(|page| {
                let label = LABEL_PREFIX.as_bytes();
                page.items
                    .iter()
                    .any(|ns| memchr::memmem::find(&ns.value, label).is_some())
            });
        self.quotas.store(any(QUOTAS_PREFIX), Ordering::SeqCst);
        self.limit_ranges
            .store(any(LIMIT_RANGES_PREFIX), Ordering::SeqCst);
        self.pod_security.store(labelled, Ordering::SeqCst);
    }

    /// Note a create of `rt`, before it is stored.
    pub(crate) fn creating(&self, rt: &ResourceType) {
        match (rt.group.as_str(), rt.plural.as_str()) {
            ("", "resourcequotas") => self.quotas.store(true, Ordering::SeqCst),
            ("", "limitranges") => self.limit_ranges.store(true, Ordering::SeqCst),
            _ => {}
        }
    }

    /// Note a namespace written with a pod security label, before it is stored.
    pub(crate) fn pod_security_labelled(&self) {
        self.pod_security.store(true, Ordering::SeqCst);
    }

    pub(crate) fn may_hold_pod_security(&self) -> bool {
        self.pod_security.load(Ordering::SeqCst)
    }

    pub(crate) fn may_hold_quotas(&self) -> bool {
        self.quotas.load(Ordering::SeqCst)
    }

    pub(crate) fn may_hold_limit_ranges(&self) -> bool {
        self.limit_ranges.load(Ordering::SeqCst)
    }
}

impl ApiServer {
    pub(crate) fn admission_objects(&self) -> &AdmissionObjects {
        &self.inner.admission_objects
    }
}
