"""Build-time only: the nightly backup job's snapshots of the orders database (deterministic)."""
import hashlib
import json
import os
import random
import sqlite3
import tempfile
import zlib

ROOT = "/backups/orders"
CHUNK = 256 * 1024
SNAPSHOTS = [  # id, created_at, orders in the database at that time
    ("b71f0c2a", "2025-04-01T02:00:07+00:00", 1700),
    ("3c9d4e10", "2025-03-30T02:00:05+00:00", 1500),
    ("e05a9b33", "2025-03-31T02:00:06+00:00", 1600),
]
STATUSES = ["paid", "paid", "paid", "shipped", "shipped", "refunded", "cancelled"]


def build(path, n_orders):
    rng = random.Random(7)
    db = sqlite3.connect(path)
    db.executescript("""
        PRAGMA page_size = 4096;
        CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL);
        CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
                             placed_at TEXT NOT NULL, status TEXT NOT NULL, total_cents INTEGER NOT NULL);
        CREATE TABLE order_events (id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL, at TEXT NOT NULL,
                                   payload TEXT NOT NULL);
    """)
    for c in range(1, 201):
        db.execute("INSERT INTO customers VALUES (?, ?, ?)", (c, f"Customer {c}", f"customer{c}@example.com"))
    for o in range(1, n_orders + 1):
        day = 1 + (o * 31) // 1701
        status = rng.choice(STATUSES)
        # Later snapshots saw later status changes of the same orders.
        if n_orders >= 1600 and o % 97 == 0:
            status = "refunded"
        if n_orders >= 1700 and o % 89 == 0:
            status = "refunded"
        db.execute("INSERT INTO orders VALUES (?, ?, ?, ?, ?)",
                   (o, rng.randint(1, 200), f"2025-03-{day:02d}T{rng.randint(8, 20):02d}:{rng.randint(0, 59):02d}:00",
                    status, rng.randint(500, 90000)))
        for e in range(3):
            payload = json.dumps({"order": o, "seq": e, "trace": "%032x" % rng.getrandbits(128),
                                  "note": "".join(rng.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(560))})
            db.execute("INSERT INTO order_events (order_id, at, payload) VALUES (?, ?, ?)",
                       (o, f"2025-03-{day:02d}T21:00:00", payload))
    db.commit()
    db.execute("VACUUM")
    db.close()


for snap_id, created_at, n in SNAPSHOTS:
    tmp = tempfile.mktemp(suffix=".db")
    build(tmp, n)
    raw = open(tmp, "rb").read()
    os.unlink(tmp)
    d = os.path.join(ROOT, f"snap-{snap_id}")
    os.makedirs(d)
    chunks = []
    for i in range(0, len(raw), CHUNK):
        part = raw[i:i + CHUNK]
        name = f"{i // CHUNK:05d}.zz"
        with open(os.path.join(d, name), "wb") as f:
            f.write(zlib.compress(part, 6))
        chunks.append({"file": name, "size": len(part), "sha256": hashlib.sha256(part).hexdigest()})
    manifest = {"id": snap_id, "created_at": created_at, "database": "orders.db", "size": len(raw),
                "sha256": hashlib.sha256(raw).hexdigest(), "chunk_size": CHUNK, "chunks": chunks}
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
    print(snap_id, created_at, len(raw), len(chunks))
