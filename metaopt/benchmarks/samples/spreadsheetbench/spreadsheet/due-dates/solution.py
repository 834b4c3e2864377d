"""Oracle for due-dates: python3 solution.py INPUT OUTPUT."""
import sys

import openpyxl

wb = openpyxl.load_workbook(sys.argv[1])
import datetime
ws = wb["Invoices"]
for r in range(2, ws.max_row + 1):
    ws[f"D{r}"] = ws[f"B{r}"].value + datetime.timedelta(days=ws[f"C{r}"].value)
    ws[f"D{r}"].number_format = "yyyy-mm-dd"
wb.save(sys.argv[2])
