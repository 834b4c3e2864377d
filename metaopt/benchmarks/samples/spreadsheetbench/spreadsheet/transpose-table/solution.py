"""Oracle for transpose-table: python3 solution.py INPUT OUTPUT."""
import sys

import openpyxl

wb = openpyxl.load_workbook(sys.argv[1])
rows = list(wb["Table"].iter_rows(values_only=True))
t = wb.create_sheet("Transposed")
for col in zip(*rows):
    t.append(list(col))
wb.save(sys.argv[2])
