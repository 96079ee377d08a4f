//! Webhooks kube-apiserver calls out to: admission (mutating and validating) on writes, and
//! CRD conversion between versions. [`client`] is the one HTTPS client both use; the rules
//! of each live in [`admission`] and [`conversion`]. The write path in `objects` calls in
//! here at one point per operation; nothing here writes to the store.

pub mod admission;
pub mod client;
pub mod conversion;
