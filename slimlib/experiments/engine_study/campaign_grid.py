"""The CPU-engine campaign's grid: the configurations the paper's five scenarios need, on the scaled OPT family.

Curves (IL, OL) per model, each swept over `BATCHES` (one server per model, ``--max-num-seqs`` = 128):

* IL = 128, OL in {32, 128, 256, 512}: output-length transfer (fit {32, 128, 256}, validate 512), model transfer
  (OL = 256, the three smaller models fit, the largest validates) and the combined scenario;
* OL = 256, IL in {128, 512, 1024}: input-length transfer (fit {128, 512}, validate 1024);
* a repeat of the IL = OL = 128 curve of every model: the run-to-run noise floor.

Every run sends ``num_prompts = max(2, B)`` requests: one batch turnover at the cap B (two requests at B = 1). The
plan is built by `slimlib.advisor.plan.make_plan` per curve, so it is the format `slim plan` writes.
"""

from __future__ import annotations

import pandas as pd

from slimlib.advisor.plan import make_plan
from slimlib.registry.engine_models import ENGINE_MODELS

__all__ = ["BATCHES", "CURVES", "REPEAT_CURVE", "campaign_plan", "DEVICE"]

DEVICE = "cpu"
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128)
#: (IL, OL) curves, in the order they are measured within a model
CURVES = ((128, 256), (128, 32), (128, 128), (128, 512), (512, 256), (1024, 256))
REPEAT_CURVE = (128, 128)
#: measured largest first: the model-transfer target must not be the one a time budget cuts
ORDER = tuple(reversed(ENGINE_MODELS))


def campaign_plan(models=ORDER, curves=CURVES, batches=BATCHES, repeats: int = 1,
                  repeat_curve=REPEAT_CURVE) -> pd.DataFrame:  # fmt: skip
    """The campaign as one plan table (columns of `make_plan` plus ``repeat``); `repeats` extra passes of
    `repeat_curve` per model get ``repeat`` 1.. and a ``_r<k>`` file suffix."""
    parts = []
    for model in models:
        for il, ol in curves:
            p = make_plan(model, DEVICE, [il], [ol], batch_sizes=batches, rounds=1, min_prompts=2,
                          min_runs=1)  # fmt: skip
            p["repeat"] = 0
            parts.append(p)
        for k in range(1, repeats + 1):
            p = make_plan(model, DEVICE, [repeat_curve[0]], [repeat_curve[1]], batch_sizes=batches, rounds=1,
                          min_prompts=2, min_runs=1)  # fmt: skip
            p["repeat"] = k
            p["file"] = p["file"].str.replace(".json", f"_r{k}.json", regex=False)
            parts.append(p)
    return pd.concat(parts, ignore_index=True)
