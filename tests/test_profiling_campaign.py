"""Campaign planning: budget respected, priority order kept, deterministic; the CLI plans without torch."""

import subprocess
import sys

import pytest

from slimlib.cli.main import main
from slimlib.errors import DataError
from slimlib.kit.counter_campaign import (
    CPU_SPEC,
    DeviceSpec,
    Point,
    default_points,
    estimate_cost_s,
    memory_need_bytes,
    plan_campaign,
)
from slimlib.kit.harness import kv_cache_bytes
from slimlib.registry.architectures import get_architecture

H200 = DeviceSpec("h200-sxm-141gb", peak_flops=989.4e12, mem_bw=4.8e12, mem_bytes=141e9)


@pytest.mark.parametrize("budget", [30.0, 300.0, 900.0, 3600.0])
def test_plan_respects_budget_and_priority(budget):
    plan = plan_campaign(budget, H200)
    planned = plan[plan["status"] == "planned"]
    assert planned["est_s"].sum() <= budget + 1e-6
    assert list(plan["priority"]) == sorted(plan["priority"])  # rows in priority order
    assert list(planned["tier"]) == sorted(planned["tier"])  # no tier-3 point before a tier-1 one
    # every point skipped for budget really did not fit in what was left at its turn
    used = 0.0
    for _, r in plan.iterrows():
        if r["status"] == "planned":
            used += r["est_s"]
        elif r["status"] == "over-budget":
            assert used + r["est_s"] > budget


def test_bigger_budget_plans_a_superset():
    small = set(plan_campaign(120.0, H200).query("status == 'planned'")["point_id"])
    large = set(plan_campaign(1200.0, H200).query("status == 'planned'")["point_id"])
    assert small and small < large


def test_plan_is_deterministic():
    a = plan_campaign(900.0, H200)
    b = plan_campaign(900.0, H200)
    assert a.to_csv(index=False) == b.to_csv(index=False)


def test_default_grid_covers_the_scenarios():
    pts = default_points()
    ids = [p.point_id for p in pts]
    assert len(ids) == len(set(ids))  # duplicates merged
    groups = {g for p in pts for g in p.groups.split(";")}
    assert groups == {
        "model-transfer",
        "input-length-transfer",
        "output-length-transfer",
        "kernel-figures",
        "counters",
    }
    mt = {p.model for p in pts if "model-transfer" in p.groups}
    assert mt == {"opt-125m", "opt-350m", "opt-1.3b", "opt-2.7b", "opt-6.7b"}
    assert {p.output_len for p in pts if "model-transfer" in p.groups} == {384}
    assert {p.input_len for p in pts if "input-length-transfer" in p.groups} == {128, 512, 1024}
    assert {p.output_len for p in pts if "output-length-transfer" in p.groups} == {32, 128, 256, 512}
    assert {p.model for p in pts if p.kind in ("kernels", "counters")} == {"mistral-7b", "granite-8b"}
    shared = next(p for p in pts if p.point_id == "opt-1.3b_b1_il128_ol256_run")
    assert shared.groups == "input-length-transfer;output-length-transfer"


def test_cost_grows_with_work_and_memory_check():
    arch = get_architecture("opt-1.3b")
    base = estimate_cost_s(arch, Point("g", "opt-1.3b", 16, 128, 256), H200, 2)
    assert estimate_cost_s(arch, Point("g", "opt-1.3b", 256, 128, 256), H200, 2) > base
    assert estimate_cost_s(arch, Point("g", "opt-1.3b", 16, 128, 512), H200, 2) > base
    assert (
        estimate_cost_s(arch, Point("g", "opt-1.3b", 16, 128, 256, "counters", "attention"), H200, 2) > base
    )
    p = Point("g", "opt-1.3b", 64, 128, 384)
    need = memory_need_bytes(arch, p, 2)
    assert need > arch.n_params * 2 + kv_cache_bytes(arch, 64, 128, 384, 2)
    # OPT-6.7B at B=512 needs ~140 GB of KV cache alone: it must be marked, never planned
    plan = plan_campaign(1e9, H200)
    row = plan.set_index("point_id").loc["opt-6.7b_b512_il128_ol384_run"]
    assert row["status"] == "does-not-fit"


def test_custom_points_and_resolver():
    arch = get_architecture("opt-125m")
    pts = [Point("t", "x", b, 8, 8, tier=t) for b, t in ((4, 2), (1, 1), (2, 1))]
    plan = plan_campaign(1e6, CPU_SPEC, pts, resolve=lambda name: arch)
    assert list(plan["batch_size"]) == [1, 2, 4]  # tier 1 first, list order within a tier
    with pytest.raises(DataError, match="budget"):
        plan_campaign(0, CPU_SPEC, pts, resolve=lambda name: arch)


def test_cli_dry_run_prints_plan(capsys):
    assert main(["profile", "campaign", "--budget-s", "200", "--gpu", "h200", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("plan for h200-sxm-141gb:")
    assert "opt-125m_b1_il128_ol384_run" in out
    assert main(["profile", "campaign", "--budget-s", "-5", "--gpu", "h200", "--dry-run"]) == 2
    assert "budget must be > 0" in capsys.readouterr().err


def test_import_and_help_without_torch():
    code = (
        "import sys\n"
        "class Block:\n"  # any `import torch` now fails, as where the extra is not installed
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'torch':\n"
        "            raise ImportError('torch blocked for this test')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import slimlib.kit, slimlib.kit.counter_campaign, slimlib.kit.tidy, slimlib.cli.cmd_profile\n"
        "from slimlib.cli.main import main\n"
        "assert main(['profile', 'campaign', '--budget-s', '60', '--device', 'cpu', '--dry-run']) == 0\n"
        "from slimlib.kit.harness import require_torch\n"
        "from slimlib.errors import SlimError\n"
        "try:\n    require_torch()\nexcept SlimError as e:\n    print('ERR', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "plan for cpu" in out
    assert "pip install 'slimlib[profiling]'" in out
