//! Stored objects read once per revision: configuration every request consults (RBAC
//! roles and bindings, admission policies) is listed from the store at each request, so a
//! change applies to the very next one, but decoded (or compiled) only when its revision
//! moves.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// What each stored object became at the revision it was read, by store key.
#[derive(Debug)]
pub(crate) struct PerRevision<T>(Mutex<HashMap<Arc<str>, Read<T>>>);

/// An object's revision and what it became.
type Read<T> = (u64, Arc<T>);

impl<T> Default for PerRevision<T> {
    fn default() -> Self {
        PerRevision(Mutex::new(HashMap::new()))
    }
}

/// Past this many entries beyond what one read needs, entries of deleted objects are
/// dropped (the map is rebuilt from the next read).
const SLACK: usize = 1024;

impl<T> PerRevision<T> {
    /// Each of `objects` as `read` makes it, read again only where its revision moved;
    /// an object `read` refuses is left out.
    pub(crate) fn of(
        &self,
        objects: &[steady_store::Object],
        read: impl Fn(&steady_store::Object) -> Option<T>,
    ) -> Vec<Arc<T>> {
        let Ok(mut known) = self.0.lock() else {
            return Vec::new();
        };
        if known.len() > objects.len() + SLACK {
            known.clear();
        }
        objects
            .iter()
            .filter_map(|object| match known.get(&object.key) {
                Some((at, value)) if *at == object.revision => Some(value.clone()),
                _ => {
                    let value = Arc::new(read(object)?);
                    known.insert(object.key.clone(), (object.revision, value.clone()));
                    Some(value)
                }
            })
            .collect()
    }
}
