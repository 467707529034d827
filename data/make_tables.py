"""Generate ``data/tables.xlsx``, the sample workbook used by table-aggregation questions.

All rows are written out literally below (no randomness), so running the script always
produces the same sheet contents. The figures are fictional and were made up for the
llama_index_ext_advrag project.

Usage::

    python data/make_tables.py               # writes data/tables.xlsx next to this script
    python data/make_tables.py out.xlsx      # writes somewhere else
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

SALES_COLUMNS = ["区域", "产品", "季度", "销量(件)", "销售额(万元)"]

SALES_2022 = [
    ("华东", "云梯X1", "Q1", 420, 126),
    ("华东", "星舟S2", "Q2", 310, 155),
    ("华东", "灯塔L3", "Q3", 180, 54),
    ("华北", "云梯X1", "Q1", 260, 78),
    ("华北", "星舟S2", "Q3", 540, 270),
    ("华北", "灯塔L3", "Q4", 150, 45),
    ("华南", "云梯X1", "Q2", 380, 114),
    ("华南", "星舟S2", "Q4", 220, 110),
    ("华南", "灯塔L3", "Q1", 95, 29),
    ("西南", "云梯X1", "Q3", 140, 42),
    ("西南", "星舟S2", "Q2", 170, 85),
    ("西南", "灯塔L3", "Q4", 60, 18),
]

SALES_2023 = [
    ("华东", "云梯X1", "Q1", 510, 153),
    ("华东", "星舟S2", "Q2", 360, 180),
    ("华东", "灯塔L3", "Q3", 230, 69),
    ("华东", "云梯X1", "Q4", 470, 141),
    ("华北", "云梯X1", "Q1", 300, 90),
    ("华北", "星舟S2", "Q3", 620, 310),
    ("华北", "灯塔L3", "Q4", 140, 42),
    ("华南", "云梯X1", "Q2", 440, 132),
    ("华南", "星舟S2", "Q4", 260, 130),
    ("华南", "灯塔L3", "Q1", 120, 36),
    ("华南", "星舟S2", "Q3", 505, 252),
    ("西南", "云梯X1", "Q3", 190, 57),
    ("西南", "星舟S2", "Q2", 210, 105),
    ("西南", "灯塔L3", "Q4", 75, 23),
    ("西北", "云梯X1", "Q2", 90, 27),
    ("西北", "星舟S2", "Q4", 130, 65),
]

STAFF_COLUMNS = ["Name", "Department", "City", "Start Year", "Annual Salary (EUR)", "Remote"]

STAFF = [
    ("Ines Varela", "Engineering", "Lisbon", 2016, 68000, "No"),
    ("Tomas Brandt", "Engineering", "Hamburg", 2018, 72000, "Yes"),
    ("Mara Lindqvist", "Sales", "Oslo", 2019, 61000, "No"),
    ("Kenji Aoyama", "Engineering", "Lisbon", 2020, 59000, "Yes"),
    ("Priya Raman", "Finance", "Lisbon", 2015, 64000, "No"),
    ("Lucas Ferreira", "Support", "Porto", 2021, 41000, "No"),
    ("Elena Novak", "Engineering", "Prague", 2017, 66000, "Yes"),
    ("Samuel Okafor", "Sales", "Hamburg", 2022, 52000, "No"),
    ("Aiko Tanabe", "Support", "Lisbon", 2019, 43000, "Yes"),
    ("Johan Berg", "Operations", "Oslo", 2014, 70000, "No"),
    ("Clara Moreau", "Finance", "Hamburg", 2020, 58000, "No"),
    ("Diego Salas", "Engineering", "Porto", 2023, 51000, "Yes"),
    ("Nora Halloran", "Operations", "Prague", 2018, 54000, "No"),
    ("Viktor Hale", "Sales", "Lisbon", 2021, 56000, "No"),
    ("Lena Fischer", "Engineering", "Hamburg", 2022, 63000, "Yes"),
]

WAREHOUSE_COLUMNS = [
    "Code",
    "City",
    "Country",
    "Capacity (m²)",
    "Staff",
    "Opened",
    "Temperature Controlled",
]

WAREHOUSES = [
    ("WH-01", "Lisbon", "Portugal", 12000, 34, 2009, "Yes"),
    ("WH-02", "Porto", "Portugal", 8500, 21, 2013, "No"),
    ("WH-03", "Hamburg", "Germany", 15500, 47, 2011, "Yes"),
    ("WH-04", "Prague", "Czechia", 6400, 18, 2016, "No"),
    ("WH-05", "Oslo", "Norway", 5200, 15, 2018, "Yes"),
    ("WH-06", "Rotterdam", "Netherlands", 21000, 52, 2014, "No"),
    ("WH-07", "Lyon", "France", 9800, 29, 2019, "Yes"),
    ("WH-08", "Milan", "Italy", 11200, 31, 2020, "No"),
    ("WH-09", "Gdansk", "Poland", 7300, 19, 2021, "Yes"),
    ("WH-10", "Valencia", "Spain", 6900, 17, 2022, "No"),
]


def build_sheets() -> dict[str, pd.DataFrame]:
    """Return the workbook as an ordered mapping of sheet name to DataFrame."""
    return {
        "2022年销售": pd.DataFrame(SALES_2022, columns=SALES_COLUMNS),
        "2023年销售": pd.DataFrame(SALES_2023, columns=SALES_COLUMNS),
        "Staff": pd.DataFrame(STAFF, columns=STAFF_COLUMNS),
        "Warehouses": pd.DataFrame(WAREHOUSES, columns=WAREHOUSE_COLUMNS),
    }


def write_workbook(path: str | Path) -> Path:
    """Write every sheet to ``path`` (openpyxl engine) and return the path."""
    path = Path(path)
    with pd.ExcelWriter(path, engine="openpyxl") as writer:
        for name, frame in build_sheets().items():
            frame.to_excel(writer, sheet_name=name, index=False)
    return path


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    target = Path(argv[0]) if argv else Path(__file__).resolve().with_name("tables.xlsx")
    write_workbook(target)
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
