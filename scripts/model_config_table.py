"""Print the parameter-count table of the mirrored published config.json files as Markdown.

Usage: python scripts/model_config_table.py [FOLDER] [--grouped]
FOLDER defaults to ../shared/data/aiconfigurator-kernels/aiconfigurator_core/model_configs. One row per config:
model, model_type, read/refused (with the one-line reason), total and active parameters (1e9), the stated sizes
(from the name or a model card, `slimlib.registry.param_table.STATED`) and the errors in percent. `--grouped`
merges configs of one content (same counts, quantization aside) and refusals of one reason into one row each.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from slimlib.experiments.outputs.plotting import table_to_markdown
from slimlib.registry.param_table import parameter_table

DEFAULT = (
    Path(__file__).resolve().parents[2]
    / "shared/data/aiconfigurator-kernels/aiconfigurator_core/model_configs"
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", default=str(DEFAULT))
    ap.add_argument("--grouped", action="store_true", help="one row per content and per refusal reason")
    args = ap.parse_args()
    t = parameter_table(args.folder)
    if args.grouped:
        read = t[t["status"] == "read"].copy()
        keys = ["total_b", "active_b"]
        read = read.groupby(keys, sort=False, dropna=False).agg(
            model=("model", " = ".join), model_type=("model_type", "first"),
            stated_total_b=("stated_total_b", "first"), stated_active_b=("stated_active_b", "first"),
            total_err_pct=("total_err_pct", "first"), active_err_pct=("active_err_pct", "first"),
        ).reset_index()  # fmt: skip
        refused = t[t["status"] == "refused"].copy()
        refused["reason"] = refused["reason"].str.split(",").str[0].str.slice(0, 70)
        refused = refused.groupby("reason", sort=False).agg(model_type=("model_type", lambda s: ", ".join(sorted(set(s)))),
                                                          n=("model", "size")).reset_index()  # fmt: skip
        print(table_to_markdown(read[["model", "model_type", "total_b", "active_b", "stated_total_b", "stated_active_b",
                    "total_err_pct", "active_err_pct"]], digits=2, na=""))  # fmt: skip
        print()
        print(table_to_markdown(refused, na=""))
        return
    cols = ["model", "model_type", "status", "total_b", "active_b", "stated_total_b", "stated_active_b",
            "total_err_pct", "active_err_pct", "reason"]  # fmt: skip
    print(table_to_markdown(t.reindex(columns=cols), digits=2, na=""))


if __name__ == "__main__":
    main()
