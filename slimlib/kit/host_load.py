"""The host's CPU time during one engine run, from two ``/proc`` snapshots, and the outside-load flag.

A snapshot holds the host's ``cpu`` line of ``/proc/stat`` (clock ticks since boot) and the CPU ticks (``utime +
stime + cutime + cstime`` of ``/proc/<pid>/stat``) of every process in the given process groups: the server's and the
client's (each started in its own session, so a group is the process and all its children). Between two snapshots:

* ``cpu_user``, ``cpu_system``, ``cpu_steal``, ``cpu_idle``: fractions of the host's CPU time (user + nice;
  system + irq + softirq; steal; idle + iowait), summing to 1;
* ``outside_cpu``: host busy CPU-seconds (user + nice + system + irq + softirq) not spent by those process groups,
  divided by the wall time: cores used by anything else (the measuring process itself included, which waits);
* ``outside_load``: ``outside_cpu > OUTSIDE_CPU_MAX_CORES`` or ``cpu_steal > STEAL_MAX_FRACTION``.

Without ``/proc`` (not Linux) a snapshot is None and every field is NaN.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from slimlib.errors import DataError

__all__ = [
    "OUTSIDE_CPU_MAX_CORES",
    "STEAL_MAX_FRACTION",
    "LOAD_FIELDS",
    "CpuTimes",
    "Snapshot",
    "parse_proc_stat",
    "parse_pid_stat",
    "take_snapshot",
    "load_split",
    "no_load_split",
]

#: cores used by other processes during a run above which the run is flagged (a sixth of one core, leaving room
#: for the measuring process and the kernel's housekeeping)
OUTSIDE_CPU_MAX_CORES = 0.15
#: fraction of the host's CPU time stolen by the hypervisor above which a run is flagged
STEAL_MAX_FRACTION = 0.05
#: the fields `load_split` returns, in the sidecar's order
LOAD_FIELDS = ("cpu_user", "cpu_system", "cpu_steal", "cpu_idle", "outside_cpu", "outside_load")
PROC = Path("/proc")


@dataclass(frozen=True)
class CpuTimes:
    """The host's CPU clock ticks by kind (``/proc/stat``'s ``cpu`` line; guest time is inside user/nice)."""

    user: int
    nice: int
    system: int
    idle: int
    iowait: int
    irq: int
    softirq: int
    steal: int

    @property
    def busy(self) -> int:
        return self.user + self.nice + self.system + self.irq + self.softirq

    @property
    def total(self) -> int:
        return self.busy + self.idle + self.iowait + self.steal


@dataclass(frozen=True)
class Snapshot:
    """One reading: wall clock (s, monotonic), host CPU ticks, CPU ticks of the watched process groups."""

    t: float
    host: CpuTimes
    tree_ticks: int


def parse_proc_stat(text: str) -> CpuTimes:
    """The aggregate ``cpu`` line of ``/proc/stat`` text."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            vals = [int(v) for v in parts[1:9]] + [0] * max(0, 9 - len(parts))
            return CpuTimes(*vals[:8])
    raise DataError("/proc/stat: no aggregate 'cpu' line")


def parse_pid_stat(text: str) -> tuple[int, int]:
    """(process group, utime + stime + cutime + cstime ticks) of ``/proc/<pid>/stat`` text (the command name in
    parentheses may hold spaces: fields are counted after its closing parenthesis)."""
    rest = text[text.rindex(")") + 2 :].split()
    # rest[0] is field 3 (state): pgrp is field 5, utime..cstime are fields 14..17
    return int(rest[2]), sum(int(v) for v in rest[11:15])


def _tree_ticks(pgids: set[int], proc: Path) -> int:
    total = 0
    for d in proc.iterdir():
        if not d.name.isdigit():
            continue
        try:
            pgrp, ticks = parse_pid_stat((d / "stat").read_text())
        except (OSError, ValueError, IndexError):
            continue  # exited between listing and reading
        if pgrp in pgids:
            total += ticks
    return total


def take_snapshot(pgids: set[int], t: float, proc: Path = PROC) -> Snapshot | None:
    """A snapshot at monotonic time `t` of the host and of the process groups `pgids`; None without ``/proc``."""
    try:
        host = parse_proc_stat((proc / "stat").read_text())
    except OSError:
        return None
    return Snapshot(t, host, _tree_ticks(pgids, proc))


def no_load_split() -> dict[str, float | bool]:
    """The fields of `load_split` where they cannot be measured (NaN)."""
    return dict.fromkeys(LOAD_FIELDS, math.nan)


def load_split(before: Snapshot | None, after: Snapshot | None, hz: int | None = None,
               extra_cpu_s: float = 0.0) -> dict[str, float | bool]:  # fmt: skip
    """CPU-time fractions, outside cores and the outside-load flag between two snapshots (module docstring);
    `extra_cpu_s`: CPU seconds of watched processes that ended between them (a per-run client, from its rusage)."""
    if before is None or after is None:
        return no_load_split()
    hz = hz or os.sysconf("SC_CLK_TCK")
    a, b = before.host, after.host
    d = {k: getattr(b, k) - getattr(a, k) for k in CpuTimes.__dataclass_fields__}
    total = sum(d.values())
    wall = after.t - before.t
    if total <= 0 or wall <= 0:
        return no_load_split()
    busy = d["user"] + d["nice"] + d["system"] + d["irq"] + d["softirq"]
    ours = (after.tree_ticks - before.tree_ticks) / hz + extra_cpu_s
    outside = max(0.0, (busy / hz - ours) / wall)  # >= 0: a watched child reaped in between counts twice
    steal = d["steal"] / total
    return {
        "cpu_user": round((d["user"] + d["nice"]) / total, 4),
        "cpu_system": round((d["system"] + d["irq"] + d["softirq"]) / total, 4),
        "cpu_steal": round(steal, 4),
        "cpu_idle": round((d["idle"] + d["iowait"]) / total, 4),
        "outside_cpu": round(outside, 3),
        "outside_load": bool(outside > OUTSIDE_CPU_MAX_CORES or steal > STEAL_MAX_FRACTION),
    }
