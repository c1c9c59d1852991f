"""Markdown snippets of data/README.md shared by the table builders."""

from __future__ import annotations

import pandas as pd


def count_table(df: pd.DataFrame, by: list[str]) -> str:
    """A Markdown table of row counts of `df` per combination of the `by` columns."""
    if len(df) == 0:
        return "(none)\n"
    g = df.groupby(by, dropna=False).size().reset_index(name="rows")
    head = "| " + " | ".join([*by, "rows"]) + " |\n|" + "---|" * (len(by) + 1) + "\n"
    return head + "".join("| " + " | ".join(str(v) for v in r) + " |\n" for r in g.itertuples(index=False))
