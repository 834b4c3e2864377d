import hashlib
from pathlib import Path

RAW = Path("/app/data/raw/customers_export.csv")
CLEAN = Path("/app/data/clean/customers.csv")
REJECTED = Path("/app/data/clean/rejected.csv")
RAW_SHA256 = "69b3739848e54a5a3d1b948b55eb624c6ecb5aef3096d8d0eb0b3a5f8bc0cd0d"
HEADER = "id,name,email,signup_date"


def expected():
    text = RAW.read_bytes().decode("utf-8-sig").replace("\r\n", "\n")
    rows = []
    for line in text.splitlines():
        if not line or line == HEADER:
            continue
        cid, name, email, date = [f.strip() for f in line.split(",")]
        month, day, year = date.split("/")
        rows.append((int(cid), name, email.lower(), f"{year}-{month}-{day}"))
    rows.sort()
    good, bad, seen = [], [], set()
    for row in rows:
        if not row[2]:
            bad.append(row)
        elif row[2] not in seen:
            seen.add(row[2])
            good.append(row)
    fmt = lambda rs: [HEADER] + [f"{c},{n},{e},{d}" for c, n, e, d in rs]
    return fmt(good), fmt(bad)


def read(path):
    assert path.is_file(), f"{path} is missing"
    data = path.read_bytes()
    assert not data.startswith(b"\xef\xbb\xbf"), f"{path} starts with a byte-order mark"
    assert b"\r" not in data, f"{path} has Windows line endings"
    assert data.endswith(b"\n"), f"{path} does not end with a newline"
    return data.decode().splitlines()


def test_raw_unchanged():
    assert hashlib.sha256(RAW.read_bytes()).hexdigest() == RAW_SHA256


def test_data_is_messy():
    # Guard against a silently changed fixture: the cleanup must have something to do.
    good, bad = expected()
    assert len(bad) >= 2 and len(good) < 60 - len(bad) + 1


def test_customers_csv():
    lines = read(CLEAN)
    good, _ = expected()
    assert lines[0] == HEADER
    assert lines.count(HEADER) == 1, "more than one header line"
    assert lines == good


def test_rejected_csv():
    lines = read(REJECTED)
    _, bad = expected()
    assert lines == bad
