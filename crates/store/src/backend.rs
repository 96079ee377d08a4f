//! Durability backends. The writer task owns exactly one backend; all reads are
//! served from memory, so a backend only appends batches, compacts, and loads
//! its log once at startup.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use rusqlite::{Connection, OptionalExtension, params};

use crate::state::Record;
use crate::{Event, EventKind, Revision, StoreError};

/// What a backend hands back on open: every retained row (ascending by
/// revision) and the compaction point.
pub(crate) struct Loaded {
    pub records: Vec<Record>,
    pub compacted: Revision,
}

pub(crate) trait Backend: Send + 'static {
    /// Persists one batch (consecutive revisions) atomically.
    fn append(&mut self, events: &[Arc<Event>]) -> Result<(), StoreError>;
    /// Compacts to `to` atomically: deletes the rows of `dropped` (the versions the
    /// in-memory compaction drops, [`State::compaction_drops`](crate::state::State::compaction_drops))
    /// and records `to` as the compaction point.
    fn compact(&mut self, dropped: &[Revision], to: Revision) -> Result<(), StoreError>;
    /// Loads the persisted log.
    fn load(&mut self) -> Result<Loaded, StoreError>;
    /// Whether calls block on I/O (and the writer must run on a thread of its own).
    fn is_blocking(&self) -> bool;
}

/// No persistence at all; everything lives in the shared in-memory state.
/// Must not spawn threads (the deterministic simulator uses it).
pub(crate) struct MemoryBackend;

impl Backend for MemoryBackend {
    fn append(&mut self, _events: &[Arc<Event>]) -> Result<(), StoreError> {
        Ok(())
    }
    fn compact(&mut self, _dropped: &[Revision], _to: Revision) -> Result<(), StoreError> {
        Ok(())
    }
    fn load(&mut self) -> Result<Loaded, StoreError> {
        Ok(Loaded {
            records: Vec::new(),
            compacted: 0,
        })
    }
    fn is_blocking(&self) -> bool {
        false
    }
}

fn backend_err(e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(e.to_string())
}

fn to_i64(rev: Revision) -> Result<i64, StoreError> {
    i64::try_from(rev).map_err(|_| StoreError::Backend(format!("revision {rev} out of range")))
}

/// kine-style log table in a SQLite database (WAL mode).
pub(crate) struct SqliteBackend {
    conn: Connection,
}

impl SqliteBackend {
    pub fn open(path: &Path, durable: bool) -> Result<SqliteBackend, StoreError> {
        prepare_private_files(path)
            .map_err(|e| StoreError::Backend(format!("prepare {}: {e}", path.display())))?;
        let conn = Connection::open(path).map_err(backend_err)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(backend_err)?;
        // One process writes the database (the data directory is locked): holding
        // SQLite's lock for the connection's life spares each transaction its file
        // locks, and in WAL mode keeps the WAL index in memory instead of a shared file.
        // Set before the first read, so the WAL index never goes to a file.
        conn.pragma_update(None, "locking_mode", "EXCLUSIVE")
            .map_err(backend_err)?;
        enable_incremental_vacuum(&conn)?;
        let mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
            .map_err(backend_err)?;
        if !mode.eq_ignore_ascii_case("wal") {
            tracing::warn!(%mode, "sqlite did not switch to WAL journal mode");
        }
        conn.pragma_update(None, "synchronous", if durable { "FULL" } else { "NORMAL" })
            .map_err(backend_err)?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS log (
                rev INTEGER PRIMARY KEY,
                key TEXT NOT NULL,
                deleted INTEGER NOT NULL,
                value BLOB NOT NULL
             );
             DROP INDEX IF EXISTS log_key_rev;
             CREATE TABLE IF NOT EXISTS meta (
                name TEXT PRIMARY KEY,
                value INTEGER
             );",
        )
        .map_err(backend_err)?;
        Ok(SqliteBackend { conn })
    }

    /// Gives the pages that a compaction freed back to the file system: the incremental
    /// vacuum moves them to the end of the database and truncates it, and the checkpoint
    /// carries that into the database file and empties the WAL, which would otherwise
    /// keep its high-water size. Failing here loses no data, so it only warns.
    fn reclaim_free_pages(&self) {
        let reclaimed = (|| -> rusqlite::Result<()> {
            let mut vacuum = self.conn.prepare("PRAGMA incremental_vacuum")?;
            let mut rows = vacuum.query([])?;
            while rows.next()?.is_some() {}
            self.conn
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        })();
        if let Err(e) = reclaimed {
            tracing::warn!(error = %e, "could not return freed database pages to the file system");
        }
    }
}

/// SQLite only gives freed pages back to the file system with `auto_vacuum`, which must
/// be chosen before the first table is created; a database made without it (by an older
/// steady) is rebuilt once with `VACUUM`, which is what switches an existing file over.
fn enable_incremental_vacuum(conn: &Connection) -> Result<(), StoreError> {
    const INCREMENTAL: i64 = 2;
    let auto_vacuum = |conn: &Connection| -> Result<i64, StoreError> {
        conn.pragma_query_value(None, "auto_vacuum", |r| r.get(0))
            .map_err(backend_err)
    };
    if auto_vacuum(conn)? == INCREMENTAL {
        return Ok(());
    }
    conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")
        .map_err(backend_err)?;
    let tables: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .map_err(backend_err)?;
    if tables > 0 {
        tracing::info!("rebuilding the database once so that compaction can shrink it");
        conn.execute_batch("VACUUM").map_err(backend_err)?;
        // In WAL mode the rebuilt database is first written to the WAL: a copy as large
        // as the database that would stay on disk until the next checkpoint.
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .map_err(backend_err)?;
        if auto_vacuum(conn)? != INCREMENTAL {
            tracing::warn!("sqlite kept auto_vacuum off: compaction will not shrink the file");
        }
    }
    Ok(())
}

/// The database holds Secrets: it must be readable by its owner only from the moment it
/// exists. Missing parent directories are created 0700 and a missing database file 0600
/// before SQLite opens it (SQLite creates the `-wal` and `-shm` files with the database
/// file's mode); the files of an existing database with looser modes are narrowed to 0600.
#[cfg(unix)]
fn prepare_private_files(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)?;
    for suffix in ["", "-wal", "-shm"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        match std::fs::metadata(&file) {
            Ok(meta) if meta.permissions().mode() & 0o077 != 0 => {
                std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600))?;
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(not(unix))]
fn prepare_private_files(path: &Path) -> std::io::Result<()> {
    match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => std::fs::create_dir_all(dir),
        None => Ok(()),
    }
}

impl Backend for SqliteBackend {
    fn append(&mut self, events: &[Arc<Event>]) -> Result<(), StoreError> {
        let tx = self.conn.transaction().map_err(backend_err)?;
        {
            let mut stmt = tx
                .prepare_cached(
                    "INSERT INTO log (rev, key, deleted, value) VALUES (?1, ?2, ?3, ?4)",
                )
                .map_err(backend_err)?;
            for e in events {
                let deleted = i64::from(e.kind == EventKind::Deleted);
                stmt.execute(params![to_i64(e.revision)?, &*e.key, deleted, &e.value[..]])
                    .map_err(backend_err)?;
            }
        }
        tx.commit().map_err(backend_err)
    }

    fn compact(&mut self, dropped: &[Revision], to: Revision) -> Result<(), StoreError> {
        let tx = self.conn.transaction().map_err(backend_err)?;
        {
            // By rowid: the log has no index by key (each would cost every write a
            // random index page in the WAL), and the in-memory state knows the rows.
            let mut delete = tx
                .prepare_cached("DELETE FROM log WHERE rev = ?1")
                .map_err(backend_err)?;
            for rev in dropped {
                delete
                    .execute(params![to_i64(*rev)?])
                    .map_err(backend_err)?;
            }
        }
        tx.execute(
            "INSERT INTO meta (name, value) VALUES ('compacted', ?1)
             ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            params![to_i64(to)?],
        )
        .map_err(backend_err)?;
        tx.commit().map_err(backend_err)?;
        self.reclaim_free_pages();
        Ok(())
    }

    fn load(&mut self) -> Result<Loaded, StoreError> {
        let compacted: Option<i64> = self
            .conn
            .query_row("SELECT value FROM meta WHERE name = 'compacted'", [], |r| {
                r.get(0)
            })
            .optional()
            .map_err(backend_err)?;
        let compacted = compacted.unwrap_or(0).max(0) as Revision;
        let mut stmt = self
            .conn
            .prepare("SELECT rev, key, deleted, value FROM log ORDER BY rev")
            .map_err(backend_err)?;
        let rows = stmt
            .query_map([], |r| {
                let rev: i64 = r.get(0)?;
                let key: String = r.get(1)?;
                let deleted: i64 = r.get(2)?;
                let value: Vec<u8> = r.get(3)?;
                Ok(Record {
                    rev: rev.max(0) as Revision,
                    key: Arc::from(key),
                    deleted: deleted != 0,
                    value: Bytes::from(value),
                    labels: None,
                })
            })
            .map_err(backend_err)?;
        let mut records = Vec::new();
        for row in rows {
            records.push(row.map_err(backend_err)?);
        }
        Ok(Loaded { records, compacted })
    }

    fn is_blocking(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(rev: Revision, key: &str, kind: EventKind) -> Arc<Event> {
        Arc::new(Event {
            revision: rev,
            key: Arc::from(key),
            kind,
            value: Bytes::from(format!("{{\"r\":{rev}}}")),
            labels: Default::default(),
            prev: None,
            prev_labels: Default::default(),
            derived: Default::default(),
        })
    }

    fn revs(b: &SqliteBackend) -> Vec<i64> {
        let mut stmt = b.conn.prepare("SELECT rev FROM log ORDER BY rev").unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[test]
    fn sqlite_compaction_deletes_the_rows_it_is_given_and_records_the_point() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = SqliteBackend::open(&dir.path().join("db"), false).unwrap();
        b.append(&[
            ev(2, "/a", EventKind::Created),
            ev(3, "/a", EventKind::Updated),
            ev(4, "/b", EventKind::Created),
            ev(5, "/b", EventKind::Deleted),
            ev(6, "/a", EventKind::Updated),
            ev(7, "/c", EventKind::Created),
        ])
        .unwrap();
        // What the in-memory state drops compacting to 5: /a@2 superseded by /a@3; /b@4
        // superseded by its tombstone, which goes too.
        b.compact(&[2, 4, 5], 5).unwrap();
        assert_eq!(revs(&b), vec![3, 6, 7]);
        b.compact(&[3], 7).unwrap();
        assert_eq!(revs(&b), vec![6, 7]);
        let loaded = b.load().unwrap();
        assert_eq!(loaded.compacted, 7);
        assert_eq!(loaded.records.len(), 2);
    }

    #[test]
    fn sqlite_failed_append_is_atomic() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = SqliteBackend::open(&dir.path().join("db"), false).unwrap();
        b.append(&[ev(2, "/a", EventKind::Created)]).unwrap();
        // Duplicate primary key in the middle of the batch: nothing is written.
        let err = b
            .append(&[
                ev(3, "/b", EventKind::Created),
                ev(2, "/c", EventKind::Created),
            ])
            .unwrap_err();
        assert!(matches!(err, StoreError::Backend(_)));
        assert_eq!(revs(&b), vec![2]);
    }

    #[test]
    fn sqlite_database_with_the_old_index_by_key_loses_it_at_open_and_keeps_its_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        {
            // What steady wrote before: the log with an index by key.
            let mut old = SqliteBackend::open(&path, false).unwrap();
            old.conn
                .execute_batch("CREATE INDEX log_key_rev ON log (key, rev);")
                .unwrap();
            old.append(&[
                ev(2, "/a", EventKind::Created),
                ev(3, "/a", EventKind::Updated),
            ])
            .unwrap();
        }
        let mut b = SqliteBackend::open(&path, false).unwrap();
        let indexes: i64 = b
            .conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'log_key_rev'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(indexes, 0);
        assert_eq!(revs(&b), vec![2, 3]);
        b.compact(&[2], 3).unwrap();
        assert_eq!(b.load().unwrap().records.len(), 1);
    }

    fn auto_vacuum(b: &SqliteBackend) -> i64 {
        b.conn
            .pragma_query_value(None, "auto_vacuum", |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn sqlite_database_without_auto_vacuum_is_converted_once_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        {
            // What an older steady created: WAL, no auto_vacuum.
            let conn = Connection::open(&path).unwrap();
            conn.pragma_update(None, "journal_mode", "WAL").unwrap();
            conn.execute_batch(
                "CREATE TABLE log (rev INTEGER PRIMARY KEY, key TEXT NOT NULL,
                                   deleted INTEGER NOT NULL, value BLOB NOT NULL);
                 INSERT INTO log VALUES (2, '/a', 0, X'7B7D');",
            )
            .unwrap();
            let mode: i64 = conn
                .pragma_query_value(None, "auto_vacuum", |r| r.get(0))
                .unwrap();
            assert_eq!(mode, 0);
        }
        let mut b = SqliteBackend::open(&path, false).unwrap();
        assert_eq!(auto_vacuum(&b), 2);
        assert_eq!(b.load().unwrap().records.len(), 1);
        let fresh = SqliteBackend::open(&dir.path().join("fresh"), false).unwrap();
        assert_eq!(auto_vacuum(&fresh), 2);
    }
}
