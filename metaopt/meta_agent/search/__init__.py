"""The search machinery: which candidate to extend next (strategies), how proposals are steered
(mechanisms), and the outer loop that rewrites those (bilevel). All of it sees the search through
a read-only view; none of it writes decisions (the Ledger does)."""
