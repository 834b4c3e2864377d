CREATE TABLE accounts (id INTEGER PRIMARY KEY, owner TEXT NOT NULL, balance_cents INTEGER NOT NULL);
INSERT INTO accounts VALUES (1, 'ada', 125000);
INSERT INTO accounts VALUES (2, 'grace', 98050);
INSERT INTO accounts VALUES (3, 'alan', 4200);
INSERT INTO accounts VALUES (4, 'edsger', 310075);
