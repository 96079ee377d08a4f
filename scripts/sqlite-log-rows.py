"""The store's SQLite log rows alone, without steady: how much a group commit costs with
and without the old index by key, and with shared or exclusive locking.

    python3 scripts/sqlite-log-rows.py INDEX EXCLUSIVE BATCH   # e.g. 1 0 5, then 0 1 5

Writes 20,000 rows of 1.1 KiB (random keys, as ConfigMaps of eight namespaces) in
transactions of BATCH rows to a fresh database in a temporary directory (WAL,
synchronous=FULL, as the store opens it) and prints the CPU and wall seconds.
"""

import os
import random
import sqlite3
import sys
import tempfile
import time


def main(index: bool, exclusive: bool, batch: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        conn = sqlite3.connect(os.path.join(directory, "db"), isolation_level=None)
        if exclusive:
            conn.execute("PRAGMA locking_mode=EXCLUSIVE")
        conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute(
            "CREATE TABLE log (rev INTEGER PRIMARY KEY, key TEXT NOT NULL,"
            " deleted INTEGER NOT NULL, value BLOB NOT NULL)"
        )
        if index:
            conn.execute("CREATE INDEX log_key_rev ON log (key, rev)")
        value = os.urandom(1100)
        rng = random.Random(1)
        cpu, wall = time.process_time(), time.time()
        rev = 0
        for _ in range(20_000 // batch):
            conn.execute("BEGIN")
            for _ in range(batch):
                rev += 1
                key = f"/core/configmaps/ns-{rng.randrange(8)}/cm-{rng.randrange(10**6):06d}"
                conn.execute("INSERT INTO log VALUES (?, ?, 0, ?)", (rev, key, value))
            conn.execute("COMMIT")
        print(
            f"index={index} exclusive={exclusive} batch={batch}: "
            f"cpu {time.process_time() - cpu:.2f} s, wall {time.time() - wall:.2f} s"
        )
        conn.close()


if __name__ == "__main__":
    main(sys.argv[1] == "1", sys.argv[2] == "1", int(sys.argv[3]))
