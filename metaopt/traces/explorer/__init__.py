"""The trace explorer: a local web app (and JSON API) over the store.

`serve(path, port)` runs it; `Source` decides how the store file is read while a run may be
writing it; `queries` holds the view data, shared with `metaopt traces ...` in the terminal.
"""
