import hashlib
import json
import sqlite3
import zlib
from pathlib import Path

ROOT = Path("/backups/orders")
TARGET = Path("/srv/orders/orders.db")
REFUNDS = Path("/app/refunds.txt")
LATEST = "b71f0c2a"
UNCHANGED = {
    "/usr/local/bin/snaprestore": "fd2c28af9b4937acf27bb45d2dd6643db2ff74fb801813500c4b7e318e3ebdba",
    "/etc/snaprestore.conf": "1906b2c0cc67bec7a54ad860a809098709943501be33d3e779efdedfb6ffdb74",
}
# Orders refunded and placed from 2025-03-16 on, in the newest snapshot (older ones miss some).
EXPECTED_REFUNDS = [
    829, 850, 852, 858, 871, 873, 876, 878, 882, 884, 890, 892, 894, 895, 901, 912, 917, 920, 925,
    934, 947, 951, 970, 971, 972, 976, 979, 987, 996, 999, 1011, 1024, 1026, 1033, 1045, 1067, 1068,
    1075, 1087, 1088, 1092, 1093, 1100, 1102, 1132, 1137, 1140, 1146, 1152, 1157, 1158, 1162, 1164,
    1187, 1210, 1244, 1245, 1246, 1252, 1254, 1259, 1261, 1262, 1268, 1282, 1288, 1290, 1300, 1306,
    1307, 1316, 1318, 1322, 1326, 1327, 1335, 1348, 1358, 1363, 1365, 1373, 1389, 1391, 1394, 1404,
    1406, 1419, 1423, 1424, 1432, 1434, 1441, 1455, 1457, 1459, 1461, 1464, 1480, 1482, 1483, 1494,
    1513, 1524, 1527, 1532, 1535, 1538, 1540, 1542, 1544, 1549, 1552, 1568, 1569, 1574, 1579, 1582,
    1597, 1602, 1603, 1612, 1617, 1620, 1626, 1628, 1634, 1643, 1645, 1649, 1653, 1662, 1665, 1669,
    1687, 1690, 1691, 1698,
]


def manifest(snap_id):
    return json.loads((ROOT / f"snap-{snap_id}" / "manifest.json").read_text())


def test_tool_and_config_unchanged():
    for path, digest in UNCHANGED.items():
        assert hashlib.sha256(Path(path).read_bytes()).hexdigest() == digest, f"{path} was modified"


def test_latest_snapshot_restored():
    assert TARGET.is_file(), f"{TARGET} is missing"
    m = manifest(LATEST)
    raw = b"".join(zlib.decompress((ROOT / f"snap-{LATEST}" / c["file"]).read_bytes()) for c in m["chunks"])
    assert hashlib.sha256(raw).hexdigest() == m["sha256"], "the snapshot files were modified"
    assert hashlib.sha256(TARGET.read_bytes()).hexdigest() == m["sha256"], \
        f"{TARGET} is not a complete copy of the newest snapshot ({LATEST})"


def test_restored_database_is_sound():
    db = sqlite3.connect(f"file:{TARGET}?mode=ro", uri=True)
    try:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.execute("SELECT count(*) FROM orders").fetchone()[0] == 1700
    finally:
        db.close()


def test_refunds_list():
    assert REFUNDS.is_file(), f"{REFUNDS} is missing"
    lines = REFUNDS.read_text().split()
    assert [int(x) for x in lines] == EXPECTED_REFUNDS
