"""The trace explorer and the HTML report: the top floor beside cli, reading every owner's tables.

`server.make_server(source)` serves the local web app (and its JSON API); `Source` decides how the
store file is read while a run may be writing it; `queries` holds the view data, shared with
`metaopt traces ...` in the terminal; `report.render` writes `metaopt report`'s page. Each module
that holds SQL is a reader its tables' owners declare (`Schema.readers`); nothing below cli
imports this package.
"""
