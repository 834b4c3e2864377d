import sqlite3
from pathlib import Path

DB = Path("/app/crm.db")
BACKUP = Path("/app/backup/crm-v1.db")

COMPANIES = [(1, 'Analytical Engines'), (2, 'Bell Labs'), (3, 'Bletchley Park'), (4, 'Eindhoven University'),
             (5, 'IBM Research'), (6, 'MIT'), (7, 'Python Foundation'), (8, 'Stanford'), (9, 'US Navy')]
# (id, first_name, last_name, email, phone, company_id, created_on)
CONTACTS = [
    (1, 'Ada', 'Lovelace', 'ada.lovelace@analytical.example', '+44 20 7946 0001', 1, '2021-12-10'),
    (2, 'Guido', 'van Rossum', 'guido@pyfound.example', '+31 20 555 0102', 7, '2022-01-31'),
    (3, 'Grace', 'Hopper', 'grace@navy.example', None, 9, '2021-12-09'),
    (4, 'Mary', 'Ann Evans', 'm.evans@letters.example', '+44 24 7655 0199', None, '2022-11-22'),
    (5, 'Alan', 'Turing', 'alan.turing@bletchley.example', '+44 1908 640404', 3, '2022-06-23'),
    (6, 'Jean-Luc', 'Picard', 'picard@enterprise.example', None, None, '2023-07-13'),
    (7, 'Edsger', 'Dijkstra', 'ewd@tue.example', '+31 40 247 9111', 4, '2023-05-11'),
    (8, 'Barbara', 'Liskov', 'liskov@mit.example', '+1 617 253 0001', 6, '2022-11-07'),
    (9, 'Margaret', 'Hamilton', 'm.hamilton@apollo.example', '+1 617 555 0110', 6, '2023-08-17'),
    (10, 'Ken', 'Thompson', 'ken@bell-labs.example', None, 2, '2024-02-04'),
    (11, 'Dennis', 'Ritchie', 'dmr@bell-labs.example', '+1 908 582 3000', 2, '2021-09-09'),
    (12, 'Frances', 'Allen', 'fran.allen@ibm.example', '+1 914 945 3000', 5, '2022-08-04'),
    (13, 'Hedy', 'Lamarr', 'hedy@frequency.example', None, None, '2023-11-09'),
    (14, 'Donald', 'Ervin Knuth', 'knuth@stanford.example', '+1 650 723 2300', 8, '2024-01-10'),
]
NOTES = [(1, 1, 'Interested in the premium plan'), (2, 3, 'Call back after the audit'),
         (3, 3, 'Sent the contract draft'), (4, 7, 'Prefers e-mail over phone'), (5, 10, 'Renewal due in March'),
         (6, 14, 'Asked for an invoice in TeX')]


def connect(path):
    assert path.is_file(), f"{path} is missing"
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def columns(con, table):
    return [row[1] for row in con.execute(f"PRAGMA table_info({table})")]


def test_backup_is_version_1():
    con = connect(BACKUP)
    assert con.execute("PRAGMA user_version").fetchone()[0] == 1
    assert columns(con, "contacts") == ["id", "full_name", "email", "phone", "company", "created"]
    assert con.execute("SELECT count(*) FROM contacts").fetchone()[0] == len(CONTACTS)
    assert con.execute("SELECT full_name, created FROM contacts WHERE id = 2").fetchone() == \
        ("Guido van Rossum", "31.01.2022")


def test_companies_table():
    con = connect(DB)
    assert con.execute("SELECT id, name FROM companies ORDER BY id").fetchall() == COMPANIES


def test_contacts_columns():
    con = connect(DB)
    assert sorted(columns(con, "contacts")) == sorted(
        ["id", "first_name", "last_name", "email", "phone", "company_id", "created_on"])


def test_contacts_rows():
    con = connect(DB)
    rows = con.execute("SELECT id, first_name, last_name, email, phone, company_id, created_on "
                       "FROM contacts ORDER BY id").fetchall()
    assert rows == CONTACTS


def test_company_foreign_key():
    con = connect(DB)
    fks = [(row[2], row[3], row[4]) for row in con.execute("PRAGMA foreign_key_list(contacts)")]
    assert ("companies", "company_id", "id") in fks
    assert con.execute("PRAGMA foreign_key_check").fetchall() == []
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_email_index():
    con = connect(DB)
    index = {row[1]: row for row in con.execute("PRAGMA index_list(contacts)")}
    assert "idx_contacts_email" in index, "index idx_contacts_email is missing"
    assert index["idx_contacts_email"][2] == 1, "idx_contacts_email is not unique"
    assert [row[2] for row in con.execute("PRAGMA index_info(idx_contacts_email)")] == ["email"]


def test_notes_untouched():
    con = connect(DB)
    assert con.execute("SELECT id, contact_id, body FROM notes ORDER BY id").fetchall() == NOTES


def test_migration_recorded():
    con = connect(DB)
    assert con.execute("SELECT version, description FROM schema_migrations").fetchall() == \
        [(2, "companies table, split names, ISO dates")]
    assert con.execute("PRAGMA user_version").fetchone()[0] == 2
