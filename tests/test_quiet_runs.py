"""Quiet and honest runs: no kernel-interrupt message after each notebook, notebook 07's fit warnings
counted in its own summary cell, `slim fit` progress as log lines off a terminal."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager

from slimlib.experiments.outputs import runner

ROOT = Path(__file__).resolve().parents[1]


def test_kernel_shutdown_sends_no_interrupt(monkeypatch):
    """jupyter_client interrupts a kernel before shutting it down, and ipykernel then logs "[IPKernelApp] ERROR |
    KeyboardInterrupt caught in kernel"; the runner's manager skips that interrupt, and only that one."""
    sent = []

    async def interrupt(self):
        sent.append(self.shutting_down)

    monkeypatch.setattr(AsyncKernelManager, "_async_interrupt_kernel", interrupt)
    km = runner._kernel_manager_class()()
    km.shutting_down = True
    asyncio.run(km._async_interrupt_kernel())
    assert sent == []
    km.shutting_down = False  # an interrupt asked for while the kernel runs still goes through
    asyncio.run(km._async_interrupt_kernel())
    assert sent == [False]


def test_notebook_07_collects_every_fit_warning_in_its_summary_cell():
    nb = json.loads((ROOT / "notebooks" / "07_advisor.ipynb").read_text())
    code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    fitting = [src for src in code if "recommendations_by_variant(" in src or "quality_vs_effort(" in src]
    assert len(fitting) == 2
    assert all("warnings.catch_warnings(record=True)" in src for src in fitting)
    summary = next(
        src for src in code if "effort_warnings" in src and "fit_warnings" in src and "value_counts" in src
    )
    assert code.index(summary) > max(code.index(src) for src in fitting)  # after every fit it counts
