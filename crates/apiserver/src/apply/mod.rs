//! Server-side apply and field ownership (`metadata.managedFields`), after
//! kube-apiserver's structured-merge-diff: field sets and their `FieldsV1` encoding, the
//! shape of a kind (list and map types), the fields an object sets or a write changes,
//! merging and pruning an applied configuration, and the managers' entries.
//!
//! Pure functions on JSON values: this module knows neither HTTP nor the store.

pub mod fields;
pub mod fieldset;
pub mod managed;
pub mod merge;
pub mod shape;

pub use managed::{ApplyError, Writer, apply, record_update};
pub use shape::Shape;
