//! `metadata.managedFields`: who owns which fields. Decoding and encoding the entries,
//! recording an `Update` (a create, update or non-apply patch) and performing an `Apply`
//! with its conflicts, as kube-apiserver's field manager does.

use serde_json::{Map, Value, json};

use super::fields::{self, Comparison};
use super::fieldset::{FieldSet, display_path};
use super::merge;
use super::shape::Shape;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    Apply,
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One `managedFields` entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub manager: String,
    pub operation: Operation,
    pub api_version: String,
    pub subresource: String,
    pub time: Option<String>,
    pub fields: FieldSet,
}

impl Entry {
    /// kube-apiserver keys managers by name, operation and subresource, and updaters also
    /// by apiVersion (an applier keeps one entry whatever version it applies through).
    fn same_owner(&self, other: &Entry) -> bool {
        self.manager == other.manager
            && self.operation == other.operation
            && self.subresource == other.subresource
            && (self.operation == Operation::Apply || self.api_version == other.api_version)
    }

    /// The manager as conflicts name it: `"mgr"`, `"mgr" using apps/v1`, with its subresource.
    fn describe(&self) -> String {
        let mut out = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            out.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == Operation::Update {
            out.push_str(&format!(" using {}", self.api_version));
        }
        out
    }

    /// The entry's JSON, its strings and field set moved into it.
    fn into_json(self) -> Value {
        let mut entry = Map::new();
        entry.insert("manager".into(), Value::String(self.manager));
        entry.insert("operation".into(), self.operation.as_str().into());
        entry.insert("apiVersion".into(), Value::String(self.api_version));
        entry.insert("fieldsType".into(), "FieldsV1".into());
        entry.insert("fieldsV1".into(), self.fields.into_fields_v1());
        if let Some(time) = self.time {
            entry.insert("time".into(), Value::String(time));
        }
        if !self.subresource.is_empty() {
            entry.insert("subresource".into(), Value::String(self.subresource));
        }
        Value::Object(entry)
    }

    /// Whether `json` is [`Self::into_json`] of the entry but for its `time`, checked without
    /// building it: a writer's entry whose fields stay the same changes only its time.
    fn is_encoded_by_but_for_time(&self, json: &Value) -> bool {
        let Some(map) = json.as_object() else {
            return false;
        };
        let text =
            |name: &str, expected: &str| map.get(name).and_then(Value::as_str) == Some(expected);
        let time = map.get("time");
        let optional = usize::from(time.is_some()) + usize::from(!self.subresource.is_empty());
        map.len() == 5 + optional
            && time.is_none_or(Value::is_string)
            && text("manager", &self.manager)
            && text("operation", self.operation.as_str())
            && text("apiVersion", &self.api_version)
            && text("fieldsType", "FieldsV1")
            && (self.subresource.is_empty() || text("subresource", &self.subresource))
            && map
                .get("fieldsV1")
                .is_some_and(|f| self.fields.is_encoded_by(f))
    }

    fn from_json(entry: &Value) -> Option<Entry> {
        let text = |name: &str| entry.get(name).and_then(Value::as_str);
        let operation = match text("operation")? {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            _ => return None,
        };
        if text("fieldsType")? != "FieldsV1" || text("apiVersion")?.is_empty() {
            return None;
        }
        let fields = match entry.get("fieldsV1") {
            None => FieldSet::default(),
            Some(f) => FieldSet::from_fields_v1(f).ok()?,
        };
        Some(Entry {
            manager: text("manager").unwrap_or_default().to_owned(),
            operation,
            api_version: text("apiVersion")?.to_owned(),
            subresource: text("subresource").unwrap_or_default().to_owned(),
            time: text("time").map(str::to_owned),
            fields,
        })
    }
}

/// `metadata.managedFields`, looked up by name: a JSON pointer would be parsed on every
/// write.
fn managed_fields(obj: &Value) -> Option<&Value> {
    obj.get("metadata")?.get("managedFields")
}

/// The entries of `obj`, or none when they cannot be read.
fn decode(obj: &Value) -> Option<Vec<Entry>> {
    match managed_fields(obj) {
        None | Some(Value::Null) => Some(Vec::new()),
        Some(Value::Array(entries)) => entries.iter().map(Entry::from_json).collect(),
        Some(_) => None,
    }
}

/// Writes `entries` into `obj`, in kube-apiserver's order (Apply first, then by time,
/// manager, apiVersion, subresource); no entries, no field.
fn encode(obj: &mut Value, mut entries: Vec<Entry>) {
    entries.retain(|e| !e.fields.is_empty());
    entries.sort_by(|a, b| {
        (
            a.operation,
            &a.time,
            &a.manager,
            &a.api_version,
            &a.subresource,
        )
            .cmp(&(
                b.operation,
                &b.time,
                &b.manager,
                &b.api_version,
                &b.subresource,
            ))
    });
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let mut written = match meta.remove("managedFields") {
        Some(Value::Array(written)) => written,
        _ => Vec::new(),
    };
    if !entries.is_empty() {
        let encoded = entries
            .into_iter()
            .map(|entry| reuse_encoding(entry, &mut written))
            .collect();
        meta.insert("managedFields".into(), Value::Array(encoded));
    }
}

/// The entry's JSON: taken out of `written` (what the object carried) when it is there as
/// it would be encoded but for its time, which is then set, else encoded. Most entries
/// survive a write unchanged, and a writer that changes only fields it already owns
/// changes only its entry's time.
fn reuse_encoding(entry: Entry, written: &mut [Value]) -> Value {
    let Some(json) = written
        .iter_mut()
        .find(|json| entry.is_encoded_by_but_for_time(json))
    else {
        return entry.into_json();
    };
    let mut json = json.take();
    if let Some(map) = json.as_object_mut() {
        match entry.time {
            Some(time) => map.insert("time".into(), Value::String(time)),
            None => map.remove("time"),
        };
    }
    json
}

/// Who writes, through which version and subresource, and when.
#[derive(Clone, Debug)]
pub struct Writer<'a> {
    pub manager: &'a str,
    pub api_version: &'a str,
    pub subresource: &'a str,
    pub now: &'a str,
}

impl Writer<'_> {
    /// Whether the encoded `entry` is this writer's `Update` entry (see
    /// [`Entry::same_owner`]).
    fn owns_entry(&self, entry: &Value) -> bool {
        let text = |name: &str| entry.get(name).and_then(Value::as_str);
        text("operation") == Some(Operation::Update.as_str())
            && text("manager").unwrap_or_default() == self.manager
            && text("subresource").unwrap_or_default() == self.subresource
            && text("apiVersion") == Some(self.api_version)
    }

    fn entry(&self, operation: Operation, fields: FieldSet) -> Entry {
        Entry {
            manager: self.manager.to_owned(),
            operation,
            api_version: self.api_version.to_owned(),
            subresource: self.subresource.to_owned(),
            time: Some(self.now.to_owned()),
            fields,
        }
    }
}

/// The entries a write starts from: those `new` carries if it carries readable ones (a
/// client may edit them; a single empty entry, `[{}]`, resets them), else `old`'s, so a
/// client that does not know the field cannot drop or corrupt it.
fn base_entries(old: Option<&Value>, new: &Value) -> Vec<Entry> {
    let requested = managed_fields(new).and_then(Value::as_array);
    if requested.is_some_and(|r| {
        !r.is_empty() && r.iter().all(|e| e.as_object().is_some_and(Map::is_empty))
    }) {
        return Vec::new();
    }
    match decode(new) {
        Some(entries) if !entries.is_empty() => entries,
        _ => old.and_then(decode).unwrap_or_default(),
    }
}

/// Records a non-apply write of `new` over `old` (`None` for a create): the writer owns
/// the fields it added or changed, which no other manager owns any longer, and fields it
/// removed leave every manager.
pub fn record_update(old: Option<&Value>, new: &mut Value, writer: &Writer, shape: Shape) {
    let empty = json!({"metadata": {}, "spec": {}});
    let comparison = fields::compare(old.unwrap_or(&empty), new, shape);
    let (taken, removed) = comparison.into_changed_and_removed();
    if let Err(taken) = record_update_in_place(old, new, writer, taken, &removed) {
        record_update_decoded(old, new, writer, taken, &removed);
    }
    cap_update_managers_of(new);
}

/// kube-apiserver keeps at most this many `Update` entries: an update that leaves more
/// merges the oldest into one [`ANCIENT_CHANGES`] entry per apiVersion
/// (structured-merge-diff's `capManagersManager`), so a client that writes under a new
/// manager name each time cannot grow an object without bound. Apply entries are not
/// capped.
const MAX_UPDATE_MANAGERS: usize = 10;
const ANCIENT_CHANGES: &str = "ancient-changes";

/// Caps `obj`'s `Update` entries at [`MAX_UPDATE_MANAGERS`]; counted without decoding,
/// as nearly every object has fewer.
fn cap_update_managers_of(obj: &mut Value) {
    let updates = managed_fields(obj)
        .and_then(Value::as_array)
        .map_or(0, |entries| {
            entries
                .iter()
                .filter(|e| e.get("operation").and_then(Value::as_str) == Some("Update"))
                .count()
        });
    if updates <= MAX_UPDATE_MANAGERS {
        return;
    }
    if let Some(entries) = decode(obj) {
        encode(obj, cap_update_managers(entries));
    }
}

/// The entries with the oldest `Update` entries merged as kube merges them: ordered by
/// time (whole seconds), then by manager identifier; the first of each apiVersion stays
/// on its own until a second of that version comes, when it becomes the version's
/// bucket (unless one exists), and every later one joins the bucket, which takes its
/// time; until at most [`MAX_UPDATE_MANAGERS`] remain.
fn cap_update_managers(entries: Vec<Entry>) -> Vec<Entry> {
    let mut managed: std::collections::HashMap<String, Entry> = entries
        .into_iter()
        .map(|entry| (manager_identifier(&entry), entry))
        .collect();
    let mut updaters: Vec<(Option<String>, String)> = managed
        .iter()
        .filter(|(_, e)| e.operation == Operation::Update)
        .map(|(id, e)| (e.time.clone(), id.clone()))
        .collect();
    updaters.sort();
    let mut remaining = updaters.len();
    let mut first_of_version: std::collections::HashMap<String, String> = Default::default();
    for (_, manager) in &updaters {
        if remaining <= MAX_UPDATE_MANAGERS {
            break;
        }
        let Some(entry) = managed.get(manager) else {
            continue;
        };
        let (version, time) = (entry.api_version.clone(), entry.time.clone());
        let Some(first) = first_of_version.get(&version) else {
            first_of_version.insert(version, manager.clone());
            continue;
        };
        let bucket_entry = Entry {
            manager: ANCIENT_CHANGES.into(),
            operation: Operation::Update,
            api_version: version,
            subresource: String::new(),
            time: None,
            fields: FieldSet::default(),
        };
        let bucket = manager_identifier(&bucket_entry);
        if !managed.contains_key(&bucket)
            && let Some(moved) = managed.remove(first)
        {
            managed.insert(
                bucket.clone(),
                Entry {
                    fields: moved.fields,
                    ..bucket_entry
                },
            );
        }
        // kube unions before it deletes, so a bucket merged into itself is lost.
        let merged = managed
            .remove(manager)
            .map(|e| e.fields)
            .unwrap_or_default();
        remaining -= 1;
        if let Some(bucket) = managed.get_mut(&bucket) {
            bucket.fields = merged.union(&bucket.fields);
            bucket.time = time;
        }
    }
    managed.into_values().collect()
}

/// kube's manager identifier: the entry's manager, operation, apiVersion (not an
/// applier's) and subresource as Go's `encoding/json` writes them, which orders
/// managers of the same second.
fn manager_identifier(entry: &Entry) -> String {
    let string = |s: &str| go_json_escapes(&Value::String(s.to_owned()).to_string());
    let mut members = Vec::with_capacity(4);
    if !entry.manager.is_empty() {
        members.push(format!("\"manager\":{}", string(&entry.manager)));
    }
    members.push(format!("\"operation\":\"{}\"", entry.operation.as_str()));
    if entry.operation == Operation::Update && !entry.api_version.is_empty() {
        members.push(format!("\"apiVersion\":{}", string(&entry.api_version)));
    }
    if !entry.subresource.is_empty() {
        members.push(format!("\"subresource\":{}", string(&entry.subresource)));
    }
    format!("{{{}}}", members.join(","))
}

/// Go's encoder escapes `<`, `>`, `&`, U+2028 and U+2029 in strings; serde_json writes
/// them as they are (and nowhere else, so a plain replacement is exact).
fn go_json_escapes(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// [`record_update`] on decoded entries: every entry the write starts from is read (and
/// those a client sent may be refused), changed and encoded again.
fn record_update_decoded(
    old: Option<&Value>,
    new: &mut Value,
    writer: &Writer,
    taken: FieldSet,
    removed: &FieldSet,
) {
    let mut entries = base_entries(old, new);
    for entry in &mut entries {
        entry.fields.subtract(&taken);
        entry.fields.subtract(removed);
    }
    if !taken.is_empty() {
        let mine = writer.entry(Operation::Update, taken);
        match entries.iter_mut().find(|e| e.same_owner(&mine)) {
            Some(previous) => {
                previous.fields = previous.fields.union(&mine.fields);
                previous.time = mine.time;
            }
            None => entries.push(mine),
        }
    }
    encode(new, entries);
}

/// [`record_update`] on the encoded entries, when the write starts from the entries `old`
/// stored (it carries the same ones, or none): those are known to be valid, so the
/// entries the write changes are edited where they stand, none decoded. Gives `taken`
/// back, changing nothing, when the write carries entries of its own, which must be read
/// (and may be refused) whole.
///
/// Most writes take this path: a patch keeps the entries it was applied to, and a
/// read-modify-write update sends back the ones it read. An entry the write does not
/// touch stays as it is; the writer's own entry, when the write changes only fields it
/// already owns, changes only its time.
fn record_update_in_place(
    old: Option<&Value>,
    new: &mut Value,
    writer: &Writer,
    taken: FieldSet,
    removed: &FieldSet,
) -> Result<(), FieldSet> {
    let stored = old.and_then(managed_fields).filter(|m| !m.is_null());
    let carried = managed_fields(new).filter(|m| !m.is_null());
    let carried_empty = carried.is_none_or(|m| m.as_array().is_some_and(Vec::is_empty));
    let starts_from_stored = match (stored, carried) {
        (Some(stored), Some(carried)) => stored == carried || carried_empty,
        (Some(_), None) => true,
        (None, _) => carried_empty,
    };
    if !starts_from_stored || !stored.is_none_or(Value::is_array) {
        return Err(taken);
    }
    let mut entries = match stored {
        Some(Value::Array(stored)) if carried_empty => stored.clone(),
        _ => match new
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
            .and_then(|meta| meta.remove("managedFields"))
        {
            Some(Value::Array(carried)) => carried,
            _ => Vec::new(),
        },
    };
    if !entries.iter().all(is_well_formed_entry) {
        // Never for entries the server stored; the whole path then reads them all.
        restore(new, entries);
        return Err(taken);
    }
    let mut mine_seen = false;
    let mut emptied = Vec::new();
    for (index, json) in entries.iter_mut().enumerate() {
        let fields = json.get("fieldsV1").unwrap_or(&Value::Null);
        let mine = !mine_seen && writer.owns_entry(json);
        mine_seen |= mine;
        let untouched = !removed.meets_encoded(fields) && (mine || !taken.meets_encoded(fields));
        let takes_time = mine && !taken.is_empty();
        if !(untouched && (!mine || taken.is_within_encoded(fields))) {
            // Edited where it stands: the rest of the entry is neither decoded nor encoded.
            let Some(entry) = json.as_object_mut() else {
                continue;
            };
            let fields = entry
                .entry("fieldsV1")
                .or_insert_with(|| Value::Object(Map::new()));
            let mut empty = removed.subtract_from_encoded(fields);
            if takes_time {
                taken.union_into_encoded(fields);
                empty = false;
            } else if !mine {
                empty = taken.subtract_from_encoded(fields);
            }
            if empty {
                emptied.push(index);
                continue;
            }
        }
        if takes_time {
            set_time(json, writer.now);
        }
    }
    for index in emptied.into_iter().rev() {
        entries.remove(index);
    }
    if !mine_seen && !taken.is_empty() {
        entries.push(writer.entry(Operation::Update, taken).into_json());
    }
    entries.sort_by(|a, b| entry_order(a).cmp(&entry_order(b)));
    restore(new, entries);
    Ok(())
}

/// Puts `entries` into `obj` as its `managedFields` (none: no field).
fn restore(obj: &mut Value, entries: Vec<Value>) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if entries.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(entries));
        }
    }
}

/// Whether an encoded entry is one [`Entry::from_json`] reads (its fields aside, which
/// the server checked when it stored them): the in-place path edits no other kind.
fn is_well_formed_entry(entry: &Value) -> bool {
    let text = |name: &str| entry.get(name).and_then(Value::as_str);
    matches!(text("operation"), Some("Apply" | "Update"))
        && text("fieldsType") == Some("FieldsV1")
        && text("apiVersion").is_some_and(|v| !v.is_empty())
        && entry.get("fieldsV1").is_none_or(Value::is_object)
}

fn set_time(entry: &mut Value, now: &str) {
    if let Some(map) = entry.as_object_mut() {
        map.insert("time".into(), Value::String(now.to_owned()));
    }
}

/// An encoded entry's place in kube-apiserver's order, as [`encode`] sorts decoded ones.
fn entry_order(entry: &Value) -> (u8, Option<&str>, &str, &str, &str) {
    let text = |name: &str| entry.get(name).and_then(Value::as_str);
    (
        u8::from(text("operation") != Some("Apply")),
        text("time"),
        text("manager").unwrap_or_default(),
        text("apiVersion").unwrap_or_default(),
        text("subresource").unwrap_or_default(),
    )
}

/// An apply refused because it would change fields other managers own.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflicts {
    /// `(manager as described, field path)`, sorted by manager.
    pub fields: Vec<(String, String)>,
}

impl Conflicts {
    /// kube-apiserver's message: `Apply failed with 1 conflict: conflict with "m": .a`.
    pub fn message(&self) -> String {
        if let [(manager, field)] = self.fields.as_slice() {
            return format!("Apply failed with 1 conflict: conflict with {manager}: {field}");
        }
        let mut lines = Vec::new();
        let mut current: Option<&str> = None;
        for (manager, field) in &self.fields {
            if current != Some(manager) {
                lines.push(format!("conflicts with {manager}:"));
                current = Some(manager);
            }
            lines.push(format!("- {field}"));
        }
        format!(
            "Apply failed with {} conflicts: {}",
            self.fields.len(),
            lines.join("\n")
        )
    }
}

/// Why an apply could not be performed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApplyError {
    #[error("{}", .0.message())]
    Conflicts(Conflicts),
    #[error("metadata.managedFields must be nil")]
    ManagedFieldsInConfig,
}

/// The manager kube-apiserver credits with what an object held before its first apply.
const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// Applies `config` by `writer` to `live` (`Null` when the object does not exist): the
/// merged object with its new `managedFields`. Fields the writer applied before and no
/// longer applies are removed unless another manager owns them; changing a field another
/// manager owns is a conflict unless `force`, which takes it over.
pub fn apply(
    live: &Value,
    config: &Value,
    writer: &Writer,
    force: bool,
    shape: Shape,
) -> Result<Value, ApplyError> {
    if managed_fields(config).is_some_and(|m| !m.is_null()) {
        return Err(ApplyError::ManagedFieldsInConfig);
    }
    let mut entries = decode(live).unwrap_or_default();
    if entries.is_empty() && live.is_object() {
        let mut owner = writer.entry(Operation::Update, fields::field_set(live, shape));
        owner.manager = BEFORE_FIRST_APPLY.to_owned();
        entries.push(owner);
    }
    let applied = fields::field_set(config, shape);
    let mine = writer.entry(Operation::Apply, applied.clone());
    let previous = entries
        .iter()
        .position(|e| e.same_owner(&mine))
        .map(|i| entries.remove(i));
    let base = if live.is_object() {
        live.clone()
    } else {
        json!({})
    };
    let mut merged = merge::merge(&base, config, shape);
    if let Some(previous) = &previous {
        let owned = entries
            .iter()
            .fold(applied.clone(), |all, e| all.union(&e.fields));
        merge::remove_unowned(&mut merged, &previous.fields.difference(&applied), &owned);
    }
    let comparison = fields::compare(&base, &merged, shape);
    take_over(&mut entries, &comparison, force)?;
    let changed = !comparison.is_same() || previous.is_none();
    entries.push(Entry {
        time: if changed {
            mine.time.clone()
        } else {
            previous.and_then(|p| p.time)
        },
        ..mine
    });
    encode(&mut merged, entries);
    Ok(merged)
}

/// Other managers lose the fields the apply changes (a conflict unless forced) or removes.
fn take_over(
    entries: &mut [Entry],
    comparison: &Comparison,
    force: bool,
) -> Result<(), ApplyError> {
    let changed = comparison.changed();
    if !force {
        let mut conflicts: Vec<(String, String)> = entries
            .iter()
            .flat_map(|e| {
                let who = e.describe();
                e.fields
                    .intersection(&changed)
                    .paths()
                    .into_iter()
                    .map(move |p| (who.clone(), display_path(&p)))
            })
            .collect();
        if !conflicts.is_empty() {
            conflicts.sort();
            return Err(ApplyError::Conflicts(Conflicts { fields: conflicts }));
        }
    }
    for entry in entries.iter_mut() {
        entry.fields.subtract(&changed);
        entry.fields.subtract(&comparison.removed);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CM: Shape = Shape {
        kind: "ConfigMap",
        schema: None,
    };

    fn writer(manager: &str) -> Writer<'_> {
        Writer {
            manager,
            api_version: "v1",
            subresource: "",
            now: "2024-01-01T00:00:00Z",
        }
    }

    fn cm(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data})
    }

    /// `manager` applies a ConfigMap of `data` over `live` without forcing; panics on a conflict.
    fn apply_data(live: &Value, data: Value, manager: &str) -> Value {
        apply(live, &cm(data), &writer(manager), false, CM)
            .unwrap_or_else(|e| panic!("{manager} applies: {e}"))
    }

    fn managers(obj: &Value) -> Vec<(String, String, Value)> {
        decode(obj)
            .unwrap()
            .into_iter()
            .map(|e| {
                (
                    e.manager,
                    e.operation.as_str().to_owned(),
                    e.fields.to_fields_v1(),
                )
            })
            .collect()
    }

    /// `count` managers, each the last to update its own key of a ConfigMap, one second
    /// apart (`m00` oldest), through `versions` in turn.
    fn updated_by(count: usize, versions: &[&str]) -> Value {
        let mut obj = cm(json!({}));
        for i in 0..count {
            let (manager, key) = (format!("m{i:02}"), format!("k{i:02}"));
            let now = format!("2024-01-01T00:00:{i:02}Z");
            let before = obj.clone();
            obj["data"][&key] = json!("v");
            let writer = Writer {
                manager: &manager,
                api_version: versions[i % versions.len()],
                subresource: "",
                now: &now,
            };
            record_update(Some(&before), &mut obj, &writer, CM);
        }
        obj
    }

    fn entry_named<'v>(obj: &'v Value, manager: &str, api_version: &str) -> &'v Value {
        obj["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["manager"] == manager && e["apiVersion"] == api_version)
            .unwrap_or_else(|| panic!("no {manager} using {api_version}: {obj}"))
    }

    #[test]
    fn update_managers_past_ten_merge_into_ancient_changes() {
        let ten = updated_by(10, &["v1"]);
        assert_eq!(managers(&ten).len(), 10);
        assert!(ten.to_string().find(ANCIENT_CHANGES).is_none());

        let twelve = updated_by(12, &["v1"]);
        let names: Vec<String> = managers(&twelve).into_iter().map(|m| m.0).collect();
        let mut expected = vec![ANCIENT_CHANGES.to_string()];
        expected.extend((3..12).map(|i| format!("m{i:02}")));
        assert_eq!(names, expected, "{twelve}");
        // The three oldest, merged; the bucket has the time of the last one merged.
        let bucket = entry_named(&twelve, ANCIENT_CHANGES, "v1");
        assert_eq!(
            bucket["fieldsV1"],
            json!({"f:data": {"f:k00": {}, "f:k01": {}, "f:k02": {}}})
        );
        assert_eq!(bucket["time"], "2024-01-01T00:00:02Z");
        assert!(bucket.get("subresource").is_none());

        // A later update past the cap joins the existing bucket.
        let thirteen = updated_by(13, &["v1"]);
        let bucket = entry_named(&thirteen, ANCIENT_CHANGES, "v1");
        assert_eq!(bucket["fieldsV1"]["f:data"].as_object().unwrap().len(), 4);
        assert_eq!(managers(&thirteen).len(), 10);
    }

    #[test]
    fn each_api_version_has_its_own_bucket_and_appliers_are_not_counted() {
        // m00 v1, m01 v2, m02 v1, m03 v2, ...: one bucket per version, each made from
        // the first of its version and every later one merged into it. The 11th update
        // merges m00 and m02; the 12th finds the v1 bucket the second-oldest and merges
        // m01 and m03.
        let obj = updated_by(12, &["v1", "v2"]);
        let names: Vec<(String, String)> = decode(&obj)
            .unwrap()
            .into_iter()
            .map(|e| (e.manager, e.api_version))
            .collect();
        assert_eq!(names.len(), 10, "{obj}");
        assert_eq!(
            entry_named(&obj, ANCIENT_CHANGES, "v1")["fieldsV1"],
            json!({"f:data": {"f:k00": {}, "f:k02": {}}})
        );
        assert_eq!(
            entry_named(&obj, ANCIENT_CHANGES, "v2")["fieldsV1"],
            json!({"f:data": {"f:k01": {}, "f:k03": {}}})
        );
        assert!(names.contains(&("m04".into(), "v1".into())), "{obj}");

        let mut applied = apply_data(&updated_by(10, &["v1"]), json!({"a": "1"}), "applier");
        assert_eq!(managers(&applied).len(), 11);
        let before = applied.clone();
        applied["data"]["k00"] = json!("changed");
        record_update(Some(&before), &mut applied, &writer("m00"), CM);
        assert_eq!(managers(&applied).len(), 11, "{applied}");
    }

    #[test]
    fn manager_identifiers_are_gos_json() {
        let entry = Entry {
            manager: "a<b".into(),
            operation: Operation::Update,
            api_version: "apps/v1".into(),
            subresource: "status".into(),
            time: None,
            fields: FieldSet::default(),
        };
        assert_eq!(
            manager_identifier(&entry),
            r#"{"manager":"a\u003cb","operation":"Update","apiVersion":"apps/v1","subresource":"status"}"#
        );
        let applier = Entry {
            operation: Operation::Apply,
            manager: String::new(),
            ..entry
        };
        assert_eq!(
            manager_identifier(&applier),
            r#"{"operation":"Apply","subresource":"status"}"#
        );
    }

    #[test]
    fn create_records_an_update_entry() {
        let mut obj = cm(json!({"a": "1"}));
        record_update(None, &mut obj, &writer("kubectl-create"), CM);
        assert_eq!(
            obj["metadata"]["managedFields"],
            json!([{"apiVersion": "v1", "fieldsType": "FieldsV1", "manager": "kubectl-create",
                "operation": "Update", "time": "2024-01-01T00:00:00Z",
                "fieldsV1": {"f:data": {".": {}, "f:a": {}}}}])
        );
    }

    #[test]
    fn update_takes_fields_from_others_and_unchanged_writes_change_nothing() {
        let mut old = cm(json!({"a": "1", "b": "1"}));
        record_update(None, &mut old, &writer("one"), CM);
        let mut new = old.clone();
        new["data"]["a"] = json!("2");
        record_update(Some(&old), &mut new, &writer("two"), CM);
        assert_eq!(
            managers(&new),
            vec![
                (
                    "one".into(),
                    "Update".into(),
                    json!({"f:data": {".": {}, "f:b": {}}})
                ),
                (
                    "two".into(),
                    "Update".into(),
                    json!({"f:data": {"f:a": {}}})
                ),
            ]
        );
        let mut again = new.clone();
        record_update(
            Some(&new),
            &mut again,
            &Writer {
                now: "later",
                ..writer("two")
            },
            CM,
        );
        assert_eq!(again, new);
    }

    /// Random writes to a ConfigMap by a few writers, each recorded both ways from the
    /// same object: the entries a write changes must come out the same whether only those
    /// are decoded or all of them are.
    #[test]
    fn recording_in_place_matches_recording_on_decoded_entries() {
        let mut state: u64 = 42;
        let mut draw = move |n: u64| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) % n
        };
        let times = [
            "2024-01-01T00:00:00Z",
            "2024-01-02T00:00:00Z",
            "2024-01-03T00:00:00Z",
        ];
        let mut old = cm(json!({}));
        let mut in_place_taken = 0;
        for step in 0..3_000 {
            let mut new = old.clone();
            for _ in 0..1 + draw(3) {
                let key = format!("k{}", draw(6));
                match draw(4) {
                    0 => {
                        new["data"].as_object_mut().map(|d| d.remove(&key));
                    }
                    1 => new["metadata"]["labels"][key] = json!(draw(2).to_string()),
                    _ => new["data"][key] = json!(draw(3).to_string()),
                }
            }
            if draw(10) == 0 {
                new["metadata"]["managedFields"] = json!(null);
            }
            let by = Writer {
                manager: ["one", "two", "three"][draw(3) as usize],
                subresource: ["", "status"][draw(2) as usize],
                now: times[draw(3) as usize],
                ..writer("")
            };
            let comparison = fields::compare(&old, &new, CM);
            let taken = comparison.changed();
            let mut decoded = new.clone();
            record_update_decoded(
                Some(&old),
                &mut decoded,
                &by,
                taken.clone(),
                &comparison.removed,
            );
            let mut in_place = new.clone();
            if record_update_in_place(Some(&old), &mut in_place, &by, taken, &comparison.removed)
                .is_ok()
            {
                in_place_taken += 1;
            } else {
                in_place = decoded.clone();
            }
            assert_eq!(in_place, decoded, "step {step}: {old} then {new} by {by:?}");
            old = decoded;
            if draw(8) == 0 {
                let applied = cm(json!({format!("k{}", draw(6)): "applied"}));
                old = apply(&old, &applied, &writer("applier"), true, CM).expect("forced");
            }
        }
        assert!(
            in_place_taken > 2_500,
            "the in-place path is the common one: {in_place_taken}"
        );
    }

    #[test]
    fn a_writer_changing_only_its_own_fields_changes_only_its_time() {
        let mut old = cm(json!({"a": "1"}));
        record_update(None, &mut old, &writer("one"), CM);
        let mut new = old.clone();
        new["data"]["a"] = json!("2");
        let later = Writer {
            now: "2024-01-02T00:00:00Z",
            ..writer("one")
        };
        record_update(Some(&old), &mut new, &later, CM);
        let mut expected = old["metadata"]["managedFields"].clone();
        expected[0]["time"] = json!("2024-01-02T00:00:00Z");
        assert_eq!(new["metadata"]["managedFields"], expected);
    }

    #[test]
    fn clients_cannot_drop_or_corrupt_entries() {
        let mut old = cm(json!({"a": "1"}));
        record_update(None, &mut old, &writer("one"), CM);
        for sent in [
            json!(null),
            json!([]),
            json!([{"manager": "x"}]),
            json!("junk"),
        ] {
            let mut new = old.clone();
            new["metadata"]["managedFields"] = sent;
            record_update(Some(&old), &mut new, &writer("two"), CM);
            assert_eq!(
                new["metadata"]["managedFields"],
                old["metadata"]["managedFields"]
            );
        }
        let mut reset = old.clone();
        reset["metadata"]["managedFields"] = json!([{}]);
        record_update(Some(&old), &mut reset, &writer("two"), CM);
        assert!(reset["metadata"].get("managedFields").is_none());
    }

    #[test]
    fn apply_removes_what_it_stops_applying() {
        let first = apply_data(&Value::Null, json!({"a": "1", "b": "2"}), "app");
        let second = apply_data(&first, json!({"a": "1"}), "app");
        assert_eq!(second["data"], json!({"a": "1"}));
        assert_eq!(
            managers(&second),
            vec![("app".into(), "Apply".into(), json!({"f:data": {"f:a": {}}}))]
        );
    }

    #[test]
    fn conflicts_and_force() {
        let live = apply_data(&Value::Null, json!({"a": "1"}), "one");
        let err = apply(&live, &cm(json!({"a": "2"})), &writer("two"), false, CM).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Apply failed with 1 conflict: conflict with \"one\": .data.a"
        );
        let forced = apply(&live, &cm(json!({"a": "2"})), &writer("two"), true, CM).unwrap();
        assert_eq!(forced["data"]["a"], "2");
        assert_eq!(
            managers(&forced),
            vec![("two".into(), "Apply".into(), json!({"f:data": {"f:a": {}}}))]
        );
    }

    #[test]
    fn shared_fields_survive_one_applier_leaving() {
        let one = apply_data(&Value::Null, json!({"a": "1", "b": "1"}), "one");
        let both = apply_data(&one, json!({"a": "1"}), "two");
        let left = apply_data(&both, json!({"b": "1"}), "one");
        assert_eq!(left["data"], json!({"a": "1", "b": "1"}));
        let gone = apply_data(&left, json!({}), "two");
        assert_eq!(gone["data"], json!({"b": "1"}));
    }

    #[test]
    fn an_update_owner_conflicts_with_an_applier() {
        let mut live = cm(json!({"a": "1"}));
        record_update(None, &mut live, &writer("kubectl-edit"), CM);
        let err = apply(&live, &cm(json!({"a": "2"})), &writer("app"), false, CM).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using v1: .data.a"
        );
        let mut config = cm(json!({}));
        config["metadata"]["managedFields"] = json!([]);
        assert_eq!(
            apply(&live, &config, &writer("app"), false, CM),
            Err(ApplyError::ManagedFieldsInConfig)
        );
    }

    #[test]
    fn several_conflicts_are_grouped_by_manager() {
        let conflicts = Conflicts {
            fields: vec![
                ("\"a\"".into(), ".x".into()),
                ("\"a\"".into(), ".y".into()),
                ("\"b\" using v1".into(), ".z".into()),
            ],
        };
        assert_eq!(
            conflicts.message(),
            "Apply failed with 3 conflicts: conflicts with \"a\":\n- .x\n- .y\nconflicts with \"b\" using v1:\n- .z"
        );
    }
}
