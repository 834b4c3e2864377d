"""SpreadsheetBench: loader (dataset.json layouts), the in-sandbox verifier (compare.py + evaluate.py), the host-side verdict, and the sample builder."""
