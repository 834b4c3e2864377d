"""Oracle for rename-total: python3 solution.py INPUT OUTPUT."""
import sys

import openpyxl

wb = openpyxl.load_workbook(sys.argv[1])
ws = wb.worksheets[0]
ws.title = "Report"
last = ws.max_row
ws[f"A{last + 1}"] = "Total"
ws[f"B{last + 1}"] = sum(c.value for c in ws["A"][1:last])
wb.save(sys.argv[2])
