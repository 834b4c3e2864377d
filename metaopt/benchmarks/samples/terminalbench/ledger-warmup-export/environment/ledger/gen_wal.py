"""Build-time only: writes the service's write-ahead log (deterministic)."""
import hashlib
import os
import random

WAL_DIR = "/var/lib/ledgerd/wal"
ACCOUNTS = ["ASSETS:CASH", "ASSETS:BANK", "EXPENSES:RENT", "EXPENSES:PAYROLL", "EXPENSES:TRAVEL",
            "INCOME:SALES", "INCOME:SUPPORT", "LIABILITIES:VAT", "EQUITY:OWNER"]
rng = random.Random(20250301)
os.makedirs(WAL_DIR, exist_ok=True)
txid = 1000
for seg in range(16):
    entries = []
    for _ in range(250):
        debit, credit = rng.sample(ACCOUNTS, 2)
        txid += 1
        entries.append(f"tx{txid} {debit} {credit} {rng.randint(100, 250000)}")
    digest = hashlib.sha256("\n".join(entries).encode()).hexdigest()
    with open(os.path.join(WAL_DIR, f"{seg:08d}.wal"), "w") as f:
        f.write(f"# ledgerd wal segment {seg} sha256={digest}\n" + "\n".join(entries) + "\n")
