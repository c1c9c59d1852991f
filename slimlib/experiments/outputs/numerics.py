"""The same figures on every x86-64 host: the notebook kernels' linear algebra and vector maths at one CPU level.

OpenBLAS and NumPy pick their kernels by the CPU they run on, and AVX-512 kernels round differently from AVX2 ones
(other summation orders, other fused multiply-adds). The last bits of a least-squares fit then differ between hosts,
and every bootstrap interval with them (its stream is seeded by a hash of the values it resamples,
`uncertainty.rng_for`); an ill-conditioned fit can even end at another optimum (the paper model's OPT
model-transfer fold: 19.6% throughput MAPE with AVX2 kernels, 21.7% with AVX-512 ones). `slim reproduce` therefore
runs its kernels at the AVX2 level wherever the CPU has it: OpenBLAS's Haswell kernels (`OPENBLAS_CORETYPE`) and
NumPy's dispatch without its AVX-512 targets (`NPY_DISABLE_CPU_FEATURES`). Both variables are read when the
libraries load, so they go into the kernels' environment, not into this process (a script that prints the same
tables runs itself again with them: `rerun_at_portable_level`). A value the user set is kept. Jupyter and a
plain ``papermill`` run get the same through this environment's ``python3`` kernel spec (`install_kernel`, which
the set-up scripts run; ``python -m slimlib.experiments.outputs.numerics`` elsewhere).
Other CPUs (ARM, x86 without AVX2) run as they are and may differ in the last digits.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping
from pathlib import Path

#: the OpenBLAS core whose kernels every AVX2+FMA x86-64 CPU runs (AMD Zen's own core uses the same kernels)
OPENBLAS_CORE = "Haswell"
#: the variables this module sets, in the order they are reported
VARIABLES = ("OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES")


def _numpy_cpu() -> tuple[list[str], dict[str, bool]]:
    """NumPy's dispatch targets and the CPU features it found on this machine."""
    import importlib

    # NumPy 2 records its CPU dispatch here
    m = importlib.import_module("numpy._core._multiarray_umath")
    return list(m.__cpu_dispatch__), dict(m.__cpu_features__)


def portable_numerics_env(
    machine: str | None = None,
    dispatch: list[str] | None = None,
    features: Mapping[str, bool] | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The variables that put OpenBLAS and NumPy at the AVX2 level on this x86-64 host ({} elsewhere).

    `machine`, `dispatch` (NumPy's dispatch targets), `features` (the CPU features it found) and `environ` default
    to this process's; a variable already set in `environ` is left out (the user's choice stands)."""
    machine = (machine or platform.machine()).lower()
    environ = os.environ if environ is None else environ
    if machine not in ("x86_64", "amd64"):
        return {}
    if dispatch is None or features is None:
        found_dispatch, found_features = _numpy_cpu()
        dispatch = found_dispatch if dispatch is None else dispatch
        features = found_features if features is None else features
    if not (features.get("AVX2") and features.get("FMA3")):
        return {}
    out = {"OPENBLAS_CORETYPE": OPENBLAS_CORE}
    above = [t for t in dispatch if (t == "X86_V4" or t.startswith("AVX512")) and features.get(t)]
    if above:
        out["NPY_DISABLE_CPU_FEATURES"] = " ".join(above)
    return {k: v for k, v in out.items() if k not in environ}


def rerun_at_portable_level() -> None:
    """Run this script again, in place, with `portable_numerics_env` added to its environment where a variable is
    missing (so its numbers are the committed outputs'); return at once where nothing is missing. For scripts run
    as ``python script.py``: call it first thing in `main`, before any computation."""
    env = portable_numerics_env()
    if env:
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **env})


def describe(env: Mapping[str, str], environ: Mapping[str, str] | None = None) -> str:
    """One line for the run's log: the variables the kernels get, `env` added to those set in `environ` (default:
    this process's)."""
    environ = os.environ if environ is None else environ
    got = {**{k: environ[k] for k in VARIABLES if k in environ}, **env}
    if not got:
        return "numerics: kernels use this CPU's own OpenBLAS and NumPy kernels"
    level = "at the AVX2 level" if env else "as set in the environment"
    return (
        f"numerics: kernels run {level} (" + ", ".join(f"{k}={got[k]}" for k in VARIABLES if k in got) + ")"
    )


def kernel_spec_path(prefix: str | Path | None = None) -> Path:
    """The ``python3`` kernel spec of the environment at `prefix` (default: this interpreter's, ``sys.prefix``),
    the one Jupyter and papermill start for a notebook of kernel ``python3`` in it."""
    return Path(prefix or sys.prefix) / "share" / "jupyter" / "kernels" / "python3" / "kernel.json"


def install_kernel(prefix: str | Path | None = None) -> Path:
    """Write the environment's ``python3`` kernel spec (`kernel_spec_path`): ipykernel's own, this interpreter
    in its ``argv`` and `portable_numerics_env` in its ``env`` (none where the host needs none), so a notebook run
    in JupyterLab or by plain papermill computes at the level `slim reproduce` does (the spec's values replace
    those exported in the shell; edit the spec to choose others). Returns its path."""
    import json

    from ipykernel.kernelspec import get_kernel_dict

    spec = get_kernel_dict()
    spec["argv"][0] = sys.executable
    env = portable_numerics_env(environ={})
    if env:
        spec["env"] = env
    path = kernel_spec_path(prefix)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # beside it, then renamed: never half a spec
    tmp.write_text(json.dumps(spec, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


if __name__ == "__main__":  # pragma: no cover
    where = install_kernel()
    print(f"kernel spec {where}: {describe(portable_numerics_env(environ={}), environ={})}")
