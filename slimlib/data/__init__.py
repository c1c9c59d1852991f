"""Measurement datasets: parsers of raw mirrors, the committed tidy tables in `data/`, and their loaders."""

from slimlib.data.catalog import SCHEMA, available, data_dir, load, load_fit_table, table_names

__all__ = ["SCHEMA", "available", "data_dir", "load", "load_fit_table", "table_names"]
