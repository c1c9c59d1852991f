"""The `slim` command table: each command's name, the module that registers it and its one-line help.

`slim --help` reads only this table, so listing the commands imports no command module (their numerical imports
take about half a second); a command's module is imported when that command is named.
"""

from __future__ import annotations

#: (command, module in `slimlib.cli` whose `register_cli` adds it, help line), in `slim --help` order.
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("fit", "cmd_fit", "calibrate SLIM on measured configurations (CSV) and write a parameter file"),
    ("predict", "cmd_fit", "predict throughput, E2E, prefill and decode time for configurations (CSV)"),
    ("advise", "cmd_advise", "recommend a batch-size cap (B_cap) and vLLM settings for a workload"),
    ("plan", "cmd_advise", "propose the vLLM benchmark runs that calibrate SLIM for a model and GPU"),
    ("transfer", "cmd_transfer", "re-target a calibrated parameter file to another GPU"),
    ("models", "cmd_registry", "list the model-architecture registry (or describe a config.json)"),
    ("gpus", "cmd_registry", "list the GPU registry with peak FLOP/s, bandwidth, memory and sources"),
    ("data", "cmd_data", "build, fetch or ingest measurement tables"),
    (
        "evaluate",
        "cmd_evaluate",
        "compute the evaluation's MAPE table (scenarios x methods) from the committed data",
    ),
    ("peers", "cmd_peers", "run peer estimators on the evaluation rows, or score them against SLIM"),
    ("reproduce", "cmd_reproduce", "run every notebook (papermill) to regenerate all figures and tables"),
    ("nbstrip", "cmd_reproduce", "strip outputs and metadata noise from notebooks (or --check them)"),
    (
        "profile",
        "cmd_profile",
        "measure prefill/decode times, kernel shares and GPU counters with a minimal PyTorch engine",
    ),
    ("bench", "cmd_bench", "measure on a real vLLM engine (CPU build here, GPU build on a cluster)"),
)

#: Appended to every epilog of a command that writes files.
OUTPUTS_NOTE = (
    "Outputs: an existing output file is replaced atomically (written to a temporary file in the same folder,\n"
    "then renamed; an interrupted run leaves the previous file intact); an input file is never overwritten."
)


def command_help(name: str) -> str:
    """The help line of command `name` in `slim --help`."""
    for command, _, help_line in COMMANDS:
        if command == name:
            return help_line
    raise KeyError(f"{name!r} is not in slimlib.cli.table.COMMANDS")
