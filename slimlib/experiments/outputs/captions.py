"""Ready captions for every output in `figures/`, generated into `figures/CAPTIONS.md` from one registry.

Naming rule: an output that reproduces (or stands in for) a paper item is named ``figNN_`` / ``tableNN_`` with the
paper's number; everything else carries a topic prefix (``eval_``, ``bca_``, ``kernels_``, ...). Each registry
entry gives the paper item, the status (one of "reproduced", "analogue (the paper's measurement on another device
or engine)", "proxy (what it stands in for)", "extension (not in the paper)"), the caption and the data source with GPU and engine version.

To add outputs (e.g. a new notebook's), add one `Caption` per output stem (file name without extension) to
`CAPTIONS` below, then rerun the notebook: its last cell calls `write_captions(figures_dir)`. `tests/test_captions.py`
fails while a file in `figures/` has no entry, or an entry's name reuses a paper number for another item.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from slimlib.data import load
from slimlib.errors import DataError
from slimlib.experiments.accuracy.scenarios import device_rows, llmib_table
from slimlib.experiments.characterization.plateau import offline_batch_sweeps
from slimlib.experiments.kernel_timing.block_sparse_check import fp8_fill_ratios, msa_points
from slimlib.io import write_text
from slimlib.model import method_label
from slimlib.registry.gpus import gpu_label

#: Paper items by output-name prefix number (SLIM paper: Figs. 1-8, Tables I-II).
PAPER_FIGURES = {f"fig{n:02d}": f"Fig. {n}" for n in range(1, 9)}
PAPER_TABLES = {"table01": "Table I", "table02": "Table II"}
STATUSES = ("reproduced", "analogue", "proxy", "extension")
CAPTIONS_FILE = "CAPTIONS.md"
_PAPER_PREFIX = re.compile(r"^(fig\d\d|table\d\d)_")

# Data sources (GPU and engine version named in each).
MEMGAP_ONLINE = (
    "vLLMBatchingMemoryGap public measurements (Recasens et al., arXiv:2503.08311, commit a918634), online "
    "`benchmark_serving` runs: vLLM 0.5.2 on one H100 SXM 64 GB; `data/memgap-online.csv`"
)
MEMGAP_OFFLINE = (
    "vLLMBatchingMemoryGap public measurements (arXiv:2503.08311, commit a918634), offline batch runs: vLLM 0.5.2 "
    "on one H100 SXM 64 GB; `data/memgap-offline.csv`"
)
MEMGAP_TELEMETRY = (
    "vLLMBatchingMemoryGap `nvidia-smi dmon` telemetry of the online runs (arXiv:2503.08311, commit a918634): "
    "vLLM 0.5.2 on one H100 SXM 64 GB; `data/memgap-telemetry.csv`"
)
VIDUR = (
    "Vidur operator profiles (github.com/microsoft/vidur, commit e2d00e9): A100-SXM 80 GB, FlashAttention "
    "backend, hidden size 8192 with 64/8 query/KV heads at tensor parallelism 2 (CodeLlama-34B shapes); "
    "`data/vidur-attention.csv`, `data/vidur-mlp.csv`"
)
KIT = (
    "slimlib GPU-kit campaigns (`data/kit-*.csv`): slimlib's minimal static-batch PyTorch engine with random "
    "weights, not vLLM; GPU, driver, CUDA and torch version as printed on the figure from the campaign manifest"
)
AIC = (
    "NVIDIA AIConfigurator measured vLLM kernel timings (aiconfigurator-core 0.12.0 wheel, Apache-2.0): "
    "FlashAttention-3 decode/prefill attention and GEMMs, vLLM 0.24.0 on H100 SXM 80 GB and H200 SXM "
    "(B200 vLLM 0.22/0.24, A100 SXM 80 GB vLLM 0.14.0 where named); `data/aic-*.csv`"
)
LLMIB = (
    "LLM-Inference-Bench (Argonne, arXiv:2411.00136, BSD-3-Clause): static batches with IL = OL, vLLM 0.6.1 for "
    "ROCm, fp16, on AMD MI300X and MI250 (a card of two 64 GB dies); `data/llmib-runs.csv`"
)
#: The online workload of Fig. 1 (family `background`): ShareGPT prompts, not the advisor family's fixed lengths.
MEMGAP_SHAREGPT = (
    "vLLMBatchingMemoryGap public measurements (arXiv:2503.08311, commit a918634), online `benchmark_serving` runs "
    "of <<sharegpt_prompts>> ShareGPT prompts at request rate inf (family `background`, no chunked prefill): "
    "vLLM 0.5.2 on one H100 SXM 64 GB; `data/memgap-online.csv`"
)
#: Profiler of the timing-valid offline sweeps (PROVENANCE.md and the launcher's config-*.txt); the counts are
#: computed (`caption_facts`).
OFFLINE_NSYS = (
    "<<offline_nsys>> (`profiler = nsys`; timings kept: its overhead is small, unlike Nsight Compute's)"
)
#: AIConfigurator source naming only the GPUs of the H100/H200 tables.
AIC_H100_H200 = (
    "NVIDIA AIConfigurator measured vLLM kernel timings (aiconfigurator-core 0.12.0 wheel, Apache-2.0): "
    "FlashAttention-3 decode attention and GEMMs, vLLM 0.24.0 on H100 SXM 80 GB and H200 SXM; `data/aic-*.csv`"
)
#: Status of the kernel-timing roofline outputs: derived quantities, not the paper's counters.
_AIC_ROOFLINE_PROXY = (
    "proxy (analytic FLOPs and bytes over measured kernel time stand in for the paper's Nsight Compute "
    "counters; the analytic byte and FLOP counts fix the arithmetic intensity of each shape, so a constant "
    "intensity is built into the method)"
)
EVAL = f"{MEMGAP_ONLINE}; {MEMGAP_OFFLINE}"
#: Table II and the parity plot also hold the context-transfer row (LLM-Inference-Bench, `data/llmib-runs.csv`).
EVAL_TABLE2 = f"{EVAL}; context-transfer row: {LLMIB}"
AIC_H100_H200_B200 = (
    "NVIDIA AIConfigurator measured vLLM kernel timings (aiconfigurator-core 0.12.0 wheel, Apache-2.0): "
    "FlashAttention-3 decode attention and GEMMs, vLLM 0.24.0 on H100 SXM 80 GB, H200 SXM and B200 SXM; "
    "`data/aic-*.csv`"
)
AIC_MOE_MLA = (
    "NVIDIA AIConfigurator measured vLLM kernel timings (aiconfigurator-core 0.12.0 wheel, Apache-2.0): fused-MoE "
    "layers with a balanced router (vLLM 0.24.0 on H100 SXM 80 GB, H200 SXM and B200 SXM), DeepSeek-V3's "
    "MLA module and DeepEP expert all-to-all (vLLM 0.24.0 on H100 SXM, H200 SXM, B200 SXM); `data/aic-moe.csv`, "
    "`data/aic-mla.csv`, `data/aic-moe-a2a.csv`"
)
AIC_GDN = (
    "NVIDIA AIConfigurator measured vLLM kernel timings (aiconfigurator-core 0.12.0 wheel, Apache-2.0): Gated "
    "DeltaNet decode kernels (recurrent state update and convolution update) of the Qwen3.5 family's head shapes, "
    "vLLM 0.24.0 on H100 SXM, H200 SXM and B200 SXM; `data/aic-gdn.csv`"
)
PLATEAU_HYBRIDS = (
    "the recommended model calibrated on the H200's kernel-composed curves of dense and MoE models (bf16 and fp8, one "
    "to eight GPUs) "
    "(NVIDIA AIConfigurator measured vLLM 0.24.0 kernel timings, aiconfigurator-core 0.12.0 wheel, Apache-2.0; "
    "`data/aic-*.csv`); the models' shapes from their published config.json files; predictions, not measurements"
)
AITER = (
    "AMD ROCm aiter's tuned-kernel tables (github.com/ROCm/aiter at e4048607, MIT licence): the fastest GEMM and "
    "fused-MoE kernel its tuner timed per shape on one MI300X-class (gfx942, 304 CUs: MI300X or MI325X) or "
    "MI355X-class (gfx950, 256 CUs: MI355X or MI350X) GPU, no ROCm version or date recorded, clean rows only; "
    "`data/aiter-gemm.csv`, `data/aiter-moe.csv`"
)
AITER_GDN = (
    "AMD ROCm aiter's tuned Gated DeltaNet recurrent decode kernel (FlyDSL; github.com/ROCm/aiter at e4048607, MIT "
    "licence) on an MI355X-class GPU (gfx950: MI355X or MI350X), no ROCm version or date recorded; "
    "`data/aiter-gdn.csv`"
)
AIC_GDN_PREFILL = (
    "NVIDIA AIConfigurator measured vLLM kernel timings (aiconfigurator-core 0.12.0 wheel, Apache-2.0): Gated "
    "DeltaNet prefill kernels (chunk_gated_delta_rule_flashinfer and causal_conv1d_fn over a batch of prompts) of the "
    "Qwen3.5 family's head shapes, vLLM 0.24.0 on H100 SXM, H200 SXM and B200 SXM; `data/aic-gdn-prefill.csv`"
)
AIC_KDA = (
    "NVIDIA AIConfigurator measured vLLM kernel timings (aiconfigurator-core 0.12.0 wheel, Apache-2.0): Kimi Delta "
    "Attention decode kernels (convolution update, fused_kda_decode and fused_recurrent_kda_packed_decode) of Kimi-K3's "
    "heads at tensor parallel 1 to 8, a vLLM development build (0.1.dev19262) on H100 SXM, H200 SXM and B200 SXM; "
    "`data/aic-kda.csv`"
)
AIC_DSV4 = (
    "NVIDIA AIConfigurator measured vLLM kernel timings (aiconfigurator-core 0.12.0 wheel, Apache-2.0): DeepSeek-V4's "
    "compressed sparse (CSA, 4:1 with its indexer) and heavily compressed (HCA, 128:1) attention decode modules of "
    "DeepSeek-V4-Flash and -Pro at tensor parallel 1 with fp8 KV, vLLM 0.24.0 on H100 SXM, H200 SXM and B200 SXM; "
    "`data/aic-dsv4.csv`"
)
AIC_DSA = (
    "NVIDIA AIConfigurator measured vLLM kernel timings (aiconfigurator-core 0.12.0 wheel, Apache-2.0): the DeepSeek "
    "sparse attention decode module (FlashMLA sparse, lightning indexer, projections) of DeepSeek-V3.2 and GLM-5 at "
    "tensor parallel 1, vLLM 0.24.0 on H100 SXM, H200 SXM and B200 SXM; `data/aic-dsa.csv`"
)
AIC_MSA = (
    "NVIDIA AIConfigurator measured vLLM kernel timings (aiconfigurator-core 0.12.0 wheel, Apache-2.0): MiniMax-M3's "
    "block-sparse attention (MSA) decode module (projections, K-only indexer, block selection, sparse attention; "
    "Triton on H100/H200, fmha_sm100 on B200) at tensor parallel 1 with bf16 GEMMs and bf16 or fp8 KV, vLLM 0.24.0 on "
    "H100 SXM, H200 SXM and B200 SXM; `data/aic-msa.csv`"
)
AIC_MHC = (
    "NVIDIA AIConfigurator measured vLLM kernel timings (aiconfigurator-core 0.12.0 wheel, Apache-2.0): DeepSeek-V4's "
    "manifold-constrained hyper-connection kernels (TileLang mhc_pre and mhc_post, each at one layer's two sites; "
    "hc_mult 4, 20 Sinkhorn iterations, hidden size 4096 and 7168), vLLM 0.24.0 on H100 SXM, H200 SXM and B200 SXM; "
    "`data/aic-mhc.csv`"
)
ENGINE_CPU = (
    "the project's CPU-engine campaign (`data/engine-cpu-medians.csv`: per configuration the median over the "
    "repeats that pass the physical checks in the sessions of the same command, from `data/engine-cpu-runs.csv`; "
    "`data/engine-cpu/`, `data/engine-cpu-rerun/`, `data/engine-cpu-rerun2/` and, for opt-13b-s8 and qwen3s-h512, "
    "`data/engine-cpu-rerun3/`, each with its manifest): "
    "`vllm bench serve` on vLLM 0.32.0's CPU build, with its default prefix caching on (a configuration's repeated "
    "prompts partly skip their prefill: `engine_offline_prefix_cache` measures how much), serving scaled engine "
    "models (slimlib.registry.engine_models) with random weights (--load-format dummy) on the 2-core host CPU "
    "(device `cpu`); measurements of the engine, not of trained models"
)
ENGINE_CPU_OFFLINE = (
    "the offline campaign `data/engine-cpu-offline/` (runs and manifest): `LLM.generate` on vLLM 0.32.0's CPU build, "
    "prefix caching off, on the 2-core host CPU (device `cpu`)"
)

ENGINE_CPU_AMX = (
    "the project's served-latency campaign on an Intel Xeon host with AMX (`data/engine-cpu-amx-medians.csv`: per "
    "configuration the median over the passing repeats, from `data/engine-cpu-amx/`; device `cpu-amx`): `vllm bench "
    "serve` at --max-concurrency B (a closed loop) on vLLM 0.32.0's CPU build, prefix caching off, scaled engine models "
    "with random weights; measurements of the engine, not of trained models"
)


@dataclass(frozen=True)
class Caption:
    """One output's caption: paper item it corresponds to ("" if none), status, caption text, data source."""

    paper_item: str
    status: str
    text: str
    source: str


_KIT_PROXY = "proxy (slimlib's PyTorch engine stands in for vLLM; same Nsight Compute metrics as the paper)"

#: Output stem -> caption. Keep one entry per stem written to figures/.
CAPTIONS: dict[str, Caption] = {
    # notebook 01
    "fig01_plateau": Caption(
        "Fig. 1",
        "reproduced (other models and vLLM version than the paper)",
        "Throughput plateau: (a) total-token throughput and (b) mean inter-token latency of online serving "
        "(<<sharegpt_prompts>> ShareGPT prompts at request rate inf) against the batch-size cap; (c) end-to-end "
        f"latency of one offline batch (<<offline_sweep_lengths>>; {OFFLINE_NSYS}). Circles mark the knee, "
        "crosses the first cap at which the KV cache is full or vLLM preempts.",
        f"{MEMGAP_SHAREGPT}; {MEMGAP_OFFLINE}",
    ),
    "fig01_plateau_summary": Caption(
        "Fig. 1",
        "reproduced (numbers behind the figure)",
        "Knee, throughput at the knee as a share of the maximum, ITL growth to the knee and first KV-full cap "
        "per model (online ShareGPT workload).",
        MEMGAP_SHAREGPT,
    ),
    # notebook 02
    "fig02_saturation": Caption(
        "Fig. 2",
        "reproduced (batch-size and output-length panels; the public data has no input-length sweep)",
        "Throughput saturation against the batch-size cap for output lengths <<advisor_output_lengths>> at a fixed "
        "input length (<<advisor_input_lengths>>), one panel per model; circles mark each curve's knee.",
        MEMGAP_ONLINE,
    ),
    "fig02_active_context": Caption(
        "Fig. 2",
        "reproduced (active-context view of Eq. 3)",
        "Throughput against the mean active context A = C (IL + OL/2) (Eq. 3): (a) online fixed-length runs, "
        "(b) offline batch sweeps.",
        f"{MEMGAP_ONLINE}; {MEMGAP_OFFLINE}",
    ),
    "fig02_knees": Caption(
        "Fig. 2",
        "reproduced (numbers behind the figure)",
        "Knee per model and output length, with the maximum throughput and the active context at the knee.",
        MEMGAP_ONLINE,
    ),
    # notebook 03
    "fig03_prefill_decode": Caption(
        "Fig. 3",
        "reproduced (batch-size panel only; no IL/OL sweep with valid timings in the public data)",
        "Prefill/decode split against the batch size (<<offline_sweep_lengths>>): (a) decode share of "
        f"prefill + decode time, (b) absolute phase times; {OFFLINE_NSYS}.",
        MEMGAP_OFFLINE,
    ),
    "fig03_prefill_decode_summary": Caption(
        "Fig. 3",
        "reproduced (numbers behind the figure)",
        "Prefill and decode time and shares of the large-batch summary runs, one per model (all four ran under "
        "Nsight Systems, `prefill_vs_decode/summary_table`).",
        MEMGAP_OFFLINE,
    ),
    # notebook 04
    "fig04_gpu_utilization_proxy": Caption(
        "Fig. 4",
        "proxy (nvidia-smi duty cycles and board power stand in for the paper's Tensor-Core, SM-issue and "
        "DRAM-read counters)",
        "GPU activity against the batch-size cap: (a) SM duty cycle (share of time any kernel runs), "
        "(b) memory duty cycle (share of time device memory is read or written), (c) mean board power. Duty "
        "cycles, not the paper's counters; clock-throttled runs are flagged.",
        MEMGAP_TELEMETRY,
    ),
    # notebook 05
    "fig05_decode_breakdown": Caption(
        "Fig. 5",
        "proxy (Vidur per-operator timings on an A100 stand in for vLLM kernel shares on an H100)",
        "Decode-step time by operator class: (a) attention, dense GEMMs and other operators against the batch "
        "size at one KV context, (b) attention share against batch size and context.",
        VIDUR,
    ),
    "fig06_attention_roofline": Caption(
        "Fig. 6",
        "proxy (analytic FLOPs and bytes over measured Vidur times stand in for Nsight Compute counters)",
        "Decode attention on the A100 roofline: (a) arithmetic intensity against achieved FLOP/s, "
        "(b) achieved DRAM bandwidth as a share of peak against the KV context.",
        VIDUR,
    ),
    "table01_attention_roofline": Caption(
        "Table I",
        "proxy (analytic FLOPs and bytes over measured Vidur times stand in for Nsight Compute counters)",
        "Attention kernel per batch size and KV context: time, arithmetic intensity, achieved FLOP/s and DRAM "
        "bandwidth. Markdown/LaTeX show a short subset in the paper's shape; the CSV holds every row.",
        VIDUR,
    ),
    # notebook 06
    "table02_mape": Caption(
        "Table II",
        "reproduced (other models, vLLM version and scenarios' lengths than the paper)",
        "Throughput and latency MAPE of every method in every scenario (long form) with bootstrap 95% "
        "intervals over test configurations and the paired comparison with SLIM (paper) on the same rows "
        "(mean difference, paired-bootstrap and Wilcoxon signed-rank p-values; the signed-rank test exact over every "
        "sign of up to 12 non-zero differences), and per cell the number of "
        "non-physical predictions (<= 0), counted as failures. The input-length row is the paper's experiment "
        '(its row measured on the project vLLM CPU engine, labelled so); the row "context transfer IL = OL (LLM-Inference-Bench, '
        'MI300X/MI250)" is a different experiment on AMD GPUs, on which the decode-attention rule of '
        f"{method_label('slim')} (added as the retired method `longctx`) was developed, so that cell is marked "
        '"†" (not held out) in the Note column. The notes give each scenario\'s ground truth.',
        EVAL_TABLE2,
    ),
    "table02_mape_throughput": Caption(
        "Table II",
        "reproduced (in the paper's shape: scenarios as rows, methods as columns)",
        "Throughput MAPE (%) with bootstrap 95% interval and the Wilcoxon p-value against SLIM (paper). A row's "
        "lowest MAPE is bold only where it is significantly lowest (its interval apart from every other "
        "method's and, unless it is SLIM (paper), Wilcoxon p < 0.05 against SLIM (paper)); never bold: a cell with "
        'non-physical predictions (marked "(k <= 0)") or not held out (marked "†"). The notes give each '
        "scenario's ground truth.",
        EVAL_TABLE2,
    ),
    "table02_mape_latency": Caption(
        "Table II",
        "reproduced (in the paper's shape; online latency is the in-engine request time by Little's law)",
        "E2E-latency MAPE (%) with bootstrap 95% interval and the Wilcoxon p-value against SLIM (paper). A row's "
        "lowest MAPE is bold only where it is significantly lowest (its interval apart from every other "
        "method's and, unless it is SLIM (paper), Wilcoxon p < 0.05 against SLIM (paper)); never bold: a cell with "
        'non-physical predictions (marked "(k <= 0)") or not held out (marked "†"). The notes give each '
        "scenario's ground truth.",
        EVAL_TABLE2,
    ),
    "eval_curves": Caption(
        "",
        "extension (not in the paper)",
        "Measured test throughput (filled) and training points (open) of selected curves with every method's "
        "prediction on a dense batch-size grid.",
        EVAL,
    ),
    "eval_parity": Caption(
        "",
        "extension (not in the paper)",
        "Predicted against measured throughput of every test row, one panel per method, coloured by scenario; "
        "predictions <= 0 are drawn on the panel floor and counted in its title.",
        EVAL_TABLE2,
    ),
    "eval_slim_params": Caption(
        "",
        "extension (not in the paper)",
        f"Fitted parameters of {method_label('paper')} and {method_label('slim')} per scenario and fold, with the "
        "device each fold was fitted on (the H100 of the public runs, the MI300X and MI250 of LLM-Inference-Bench, "
        "the CPU of the project's engine): estimate, standard error and normal-approximation 95% interval, with "
        "units; parameters at a bound are flagged.",
        f"{EVAL_TABLE2}; input-length row: the project's vLLM CPU engine (`data/engine-cpu-medians.csv`)",
    ),
    # notebook 07
    "bca_curves": Caption(
        "",
        "extension (not in the paper): figure of the SLIM-BCA evaluation of Sec. VII-B1",
        "Measured throughput and in-engine latency (Little's law: mean running requests / request throughput, "
        "not a client-measured E2E) per model and output length with the tight-SLO recommendation of "
        "faithful SLIM-BCA (+, Eq. 13 on the paper model) and of the project's variant (x, extended model with "
        "KV-memory constraint); squares mark the measured best configuration.",
        MEMGAP_ONLINE,
    ),
    "bca_recommendations": Caption(
        "Sec. VII-B1",
        "reproduced (faithful SLIM-BCA) and extension (project variant), labelled per row",
        "B_cap per model, output length, SLO and advisor variant against the measured best configuration within "
        "Eq. 13's constraints (E2E within the SLO, efficiency above epsilon): quality (throughput at B_cap / best, "
        "%; 0 where B_cap breaks a constraint), SLO violation, measured efficiency, and whether the run at B_cap "
        "preempted requests (reported, not scored: Eq. 13 does not model preemption).",
        MEMGAP_ONLINE,
    ),
    "bca_summary": Caption(
        "Sec. VII-B1",
        "reproduced (faithful SLIM-BCA) and extension (project variant), labelled per row",
        "Per advisor variant and SLO: mean recommendation quality (scored by Eq. 13's constraints; picks whose run "
        "preempted are counted, not scored) and the MAPE of the predicted throughput at "
        "B_cap, each with a bootstrap 95% interval over curves, and the Wilcoxon signed-rank p-value of the paired "
        "comparison with faithful SLIM-BCA (exact over every sign of the non-zero differences where at most 12 differ "
        "from zero, else scipy's).",
        MEMGAP_ONLINE,
    ),
    "bca_effort": Caption(
        "Sec. VII-B2",
        "reproduced (project variant of SLIM-BCA)",
        "Profiling effort (runs, GPU-seconds) against recommendation quality for k calibration runs per curve.",
        MEMGAP_ONLINE,
    ),
    "bca_quality_vs_effort": Caption(
        "",
        "extension (not in the paper): figure of the Sec. VII-B2 evaluation",
        "Mean and worst recommendation quality against profiling GPU-hours for k calibration runs per curve.",
        MEMGAP_ONLINE,
    ),
    "bca_memory": Caption(
        "Sec. VII-B3",
        "reproduced (faithful and project variants, labelled per row)",
        "KV-cache memory B_cap needs against vLLM's default allocation, loose SLO.",
        MEMGAP_ONLINE,
    ),
    "bca_memory_saved": Caption(
        "",
        "extension (not in the paper): figure of the Sec. VII-B3 evaluation",
        "Avoidable KV-cache memory (default allocation minus the blocks B_cap needs) per model and output "
        "length, loose SLO, both advisor variants.",
        MEMGAP_ONLINE,
    ),
    "bca_slo_eval": Caption(
        "",
        "extension (not in the paper): SLIM-BCA under TTFT/TPOT/E2E SLOs",
        "Per curve and SLO level (each limit the 25% or 75% quantile of the curve's measured values): the "
        "advisor's pick (TP, batch, binding constraint) against the measured best throughput per GPU, whether it "
        "meets the measured constraints and reaches 90% of the best.",
        f"{ENGINE_CPU}; {MEMGAP_ONLINE}; {MEMGAP_OFFLINE}; {LLMIB}",
    ),
    "bca_slo_summary": Caption(
        "",
        "extension (not in the paper): SLIM-BCA under TTFT/TPOT/E2E SLOs",
        "Per source and SLO level: share of picks meeting the measured constraints and reaching 90% of the "
        "measured best, with bootstrap 95% intervals over curves, and the profiling runs saved against the full "
        "sweep.",
        f"{ENGINE_CPU}; {MEMGAP_ONLINE}; {MEMGAP_OFFLINE}; {LLMIB}",
    ),
    "bca_frontier": Caption(
        "",
        "extension (not in the paper): predicted Pareto set of the deployment search",
        "Throughput per GPU against per-user output tokens/s over TP degrees, precisions and batch sizes on a "
        "node, predicted by the project model fitted on a few single-GPU runs, with Eq. 13's pick and the "
        "search's best marked.",
        MEMGAP_ONLINE,
    ),
    # notebook 08 (written only when kit tables exist)
    "fig04_kit_decode_counters": Caption(
        "Fig. 4",
        _KIT_PROXY,
        "Duration-weighted tensor-pipe activity, SM issue and DRAM read bandwidth over a whole decode step.",
        KIT,
    ),
    "fig05_kit_kernel_shares": Caption(
        "Fig. 5", _KIT_PROXY, "Decode-step time by kernel category, sorted by active context.", KIT
    ),
    "fig06_kit_attention_roofline": Caption(
        "Fig. 6", _KIT_PROXY, "The decode attention kernel on the roofline of the profiled GPU.", KIT
    ),
    "table01_kit_attention_roofline": Caption(
        "Table I",
        _KIT_PROXY,
        "Attention kernel per profiled point: time, arithmetic intensity, FLOP/s and DRAM bandwidth.",
        KIT,
    ),
    "fig07_kit_cache_hit_rates": Caption(
        "Fig. 7", _KIT_PROXY, "L1/TEX and L2 hit rates of the attention kernel against active context.", KIT
    ),
    "fig08_kit_stalls_occupancy": Caption(
        "Fig. 8",
        _KIT_PROXY,
        "Long-scoreboard stalls and occupancy of the attention kernel against active context.",
        KIT,
    ),
    "fig07_fig08_kit_attention_memory": Caption(
        "Figs. 7-8", _KIT_PROXY, "Numbers behind the kit's Figs. 7 and 8.", KIT
    ),
    # -- notebook 09: kernel-level figures on measured vLLM kernel timings (AIConfigurator) --------------------
    "fig02_length_panels_aic": Caption(
        "Fig. 2",
        "proxy (decode and prefill time composed from measured vLLM kernels stand in for end-to-end serving "
        "runs; no scheduling, sampling or launch overheads)",
        "Throughput of a Mistral-7B batch composed from measured kernels as the input length and the output length "
        "grow, at fixed batch sizes: the input- and output-length panels of Fig. 2. The lengths are notebook 09's "
        "parameters `input_lens` and `output_lens` (on the axes); every composed point, and any left out for lying "
        "outside the measured kernel grids, is in `fig03_length_panels_aic.csv`.",
        AIC,
    ),
    "fig03_length_panels_aic": Caption(
        "Fig. 3",
        "proxy (composed from measured vLLM kernels; no serving overheads)",
        "Prefill and decode time of a Mistral-7B batch composed from measured kernels, and their split, as the "
        "input length and the output length grow at fixed batch sizes: the length panels of Fig. 3.",
        AIC_H100_H200,
    ),
    "fig04_step_utilization_aic": Caption(
        "Fig. 4",
        "proxy (effective tensor-FLOP and DRAM-bandwidth utilization derived as analytic FLOPs/bytes over measured "
        "time, not Tensor-Core/SM-issue/DRAM counters)",
        "Decode step's effective tensor-FLOP utilization and DRAM-bandwidth utilization by batch size (Mistral-7B, "
        "Granite-8B shapes).",
        AIC_H100_H200,
    ),
    "fig05_decode_breakdown_aic": Caption(
        "Fig. 5",
        "reproduced (measured vLLM kernels of the paper's GPU class and model shapes; norms, RoPE and activations "
        "not timed)",
        "Decode-step time by kernel (attention vs GEMMs) as the batch size and the cached context grow, with the "
        "batch size where attention overtakes the GEMMs marked.",
        AIC_H100_H200,
    ),
    "fig05_crossover_aic": Caption(
        "Fig. 5",
        "reproduced (measured vLLM kernel times of attention and GEMMs, no analytic counts; the batch size is "
        "interpolated between the measured ones)",
        "The batch size at which the measured decode-attention time exceeds the measured time of all GEMMs of "
        "the step, by cached context and GPU (H100, H200); n/a where attention stays below the GEMMs at every "
        "measured batch size.",
        AIC_H100_H200,
    ),
    "fig06_attention_roofline_aic": Caption(
        "Fig. 6",
        _AIC_ROOFLINE_PROXY,
        "Decode-attention roofline for the paper's (batch, context) grid on H100 and H200: arithmetic intensity "
        "against achieved FLOP/s, with the GPU's ridge point; the bandwidth is not a DRAM counter.",
        AIC_H100_H200,
    ),
    "table01_attention_roofline_aic": Caption(
        "Table I",
        _AIC_ROOFLINE_PROXY,
        "Decode attention per layer on H100 and H200: arithmetic intensity, achieved FLOP/s and effective "
        "bandwidth by batch size and context, against peak.",
        AIC_H100_H200,
    ),
    "kernels_plateau_by_gpu": Caption(
        "",
        "extension (not in the paper)",
        "How the plateau moves from H100 to H200 to B200 for Mistral-7B: the batch size where batching efficiency "
        "falls below one half, the attention share there, and the peak decode throughput.",
        AIC_H100_H200_B200,
    ),
    "kernels_eta_m_check": Caption(
        "",
        "extension (not in the paper)",
        "Physics check of the calibrated models: the decode-attention bandwidth efficiency implied by the kernel "
        f"data against eta_m as fitted by {method_label('paper')}, and the weight-read efficiency eta_w as fitted "
        f"by {method_label('slim')} (its eta_attn is the kernel median itself on this GPU, so not checked).",
        f"{AIC}; {MEMGAP_ONLINE}",
    ),
    "kernels_moe_check": Caption(
        "",
        "extension (not in the paper)",
        "The MoE term (weight bytes of the experts a balanced router touches over bandwidth, or FLOPs over the "
        "dtype's peak, over one efficiency per GPU and dtype fitted on steps of at most 16 tokens) against the "
        "measured fused-MoE layer time by tokens per step, log-log, with the expert-touch knee (experts / top-k) "
        "marked; the table gives the MAPE beyond the fit range per GPU, dtype and shape with bootstrap 95% "
        "intervals.",
        AIC_MOE_MLA,
    ),
    "kernels_moe_layouts": Caption(
        "",
        "extension (not in the paper)",
        "MoE term error per expert layout (experts unsplit, split by expert parallelism 8, or by tensor "
        "parallelism 8; balanced router): MAPE beyond the fit range without and with a fitted per-step floor, "
        "bootstrap 95% intervals.",
        AIC_MOE_MLA,
    ),
    "kernels_mla_check": Caption(
        "",
        "extension (not in the paper)",
        "The MLA decode term (latent KV bytes (512 + 64) x context over bandwidth, or the absorbed attention's "
        "FLOPs over the bf16 peak, on top of the module time at the smallest context) against DeepSeek-V3's "
        "measured MLA module by cached context, efficiency per GPU and KV dtype fitted on contexts up to 8192; "
        "the table adds the prefill module against FLOPs over peak, MAPEs with bootstrap 95% intervals.",
        AIC_MOE_MLA,
    ),
    "kernels_gdn_check": Caption(
        "",
        "extension (not in the paper)",
        "The linear-attention decode term (a Gated DeltaNet layer's fp32 recurrent state and bf16 convolution "
        "state, read and written per sequence and step, over the device's decode-attention bandwidth efficiency; "
        "nothing fitted) against the summed measured latency of vLLM's two decode kernels of one layer, per GPU "
        "at batches of 128 to 1024 over every measured head shape: MAPE with bootstrap 95% intervals and the "
        "predicted/measured ratio's median and 10th-90th percentiles.",
        AIC_GDN,
    ),
    "kernels_gdn_prefill_check": Caption(
        "",
        "extension (not in the paper)",
        "The linear-attention prefill term (one layer: each prompt's chunked recurrence in order at a measured time "
        "per token until the batch's FLOPs fill the GPU at a measured FLOP/s, plus the causal convolution's bytes at "
        "a measured bandwidth) against the summed measured latency of vLLM's two Gated DeltaNet prefill kernels, per "
        "GPU over prompts of 256+ tokens in steps of 1,024+ tokens: MAPE with bootstrap 95% intervals with each "
        "head shape scored on rates read from the other shapes' rows (held out) and on the GPU's rates from "
        "every row (the registry's), the held-out predicted/measured ratio's median and 10th-90th percentiles, and "
        "the rates with their efficiencies against the bf16 peak and the bandwidth.",
        AIC_GDN_PREFILL,
    ),
    "kernels_kda_check": Caption(
        "",
        "extension (not in the paper)",
        "The linear-attention decode term (as in kernels_gdn_check: the fp32 recurrent state and the bf16 convolution "
        "state read and written per sequence and step over the device's decode-attention bandwidth efficiency; "
        "nothing fitted) against the summed measured latency of the convolution update and each of vLLM's two "
        "recurrent Kimi Delta Attention decode kernels (the path), per GPU at batches of 128 and more over Kimi-K3's "
        "head counts: MAPE with bootstrap 95% intervals and the predicted/measured ratio's median and 10th-90th "
        "percentiles.",
        AIC_KDA,
    ),
    "kernels_gdn_check_amd": Caption(
        "",
        "extension (not in the paper)",
        "The linear-attention decode term (the recurrent state, 2 B H_v d_k d_v elements of its dtype read and "
        "written per step, over the bandwidth at the NVIDIA-measured decode-attention efficiency prior; nothing "
        "fitted) against AMD's tuned Gated DeltaNet recurrent decode kernel of one layer on an MI355X-class GPU, "
        "per state dtype at batches of 128 to 256 over seven head shapes: MAPE with bootstrap 95% intervals and "
        "the predicted/measured ratio's median and 10th-90th percentiles.",
        AITER_GDN,
    ),
    "kernels_gemm_vendors": Caption(
        "",
        "extension (not in the paper)",
        "The dense-GEMM term (max of 2 m n k FLOPs over the dtype's peak and the n k weight bytes over the "
        "bandwidth) at the medians of its NVIDIA-measured efficiency priors, nothing fitted, over the measured "
        "kernel time, against the tokens per GEMM m (binned by powers of two): median and 10th-90th percentile "
        "band over the measured shapes, AMD (ROCm aiter) beside NVIDIA (vLLM's GEMMs, AIConfigurator); the table "
        "gives the same per band of m.",
        f"{AITER}; {AIC}",
    ),
    "kernels_gemm_corner": Caption(
        "",
        "extension (not in the paper)",
        "The dense-GEMM term's corner: per GPU and dtype, the weight-read efficiency and a floor fitted on GEMMs "
        "of at most 16 tokens and the compute efficiency on GEMMs of at least 4096, then the GEMMs between scored "
        "(the shapes measured at both ends), for the term's form (the larger of the two times) and for their sum: "
        "MAPE with bootstrap 95% intervals and mean signed error (negative: the term is faster than the kernel).",
        f"{AITER}; {AIC}",
    ),
    "kernels_moe_check_amd": Caption(
        "",
        "extension (not in the paper)",
        "The MoE term (as in kernels_moe_check: one efficiency per GPU and dtype fitted on steps of at most 16 "
        "tokens, larger steps scored) against AMD's fused-MoE layers (both stages, near-uniform random routing; "
        "a fused shared expert counted as one more routed expert; some rows include token sorting and activation "
        "quantization, others not): MAPE per GPU, dtype and shape with bootstrap 95% intervals.",
        AITER,
    ),
    "plateau_hybrids": Caption(
        "",
        "extension (not in the paper): the model's extrapolation, not measured",
        "Decode throughput (B over the decode step) and decode step against the batch of a static batch at 1k, 8k "
        "and 32k-token contexts with 128 output tokens on one H200, for Qwen3.5-27B beside Qwen3-32B, "
        "Qwen3.5-35B-A3B (Gated DeltaNet hybrids) and Nemotron 3 Nano 30B-A3B (Mamba-2 hybrid) beside "
        "Qwen3-30B-A3B, and on eight H200s at fp8 DeepSeek-V3.2 (sparse attention) beside DeepSeek-V3, predicted "
        "from each model's layer list by the recommended model calibrated on kernel-composed curves up to "
        "2.5k-token contexts (beyond them: extrapolation); each curve ends at the sequences the KV "
        "pool holds; the star marks the knee (a doubling adds under 10%, else the memory cap, else the largest "
        "batch computed, 1024); the CSV adds "
        "the share of the decode step the context causes.",
        PLATEAU_HYBRIDS,
    ),
    "plateau_hybrids_knees": Caption(
        "",
        "extension (not in the paper): the model's extrapolation, not measured",
        "Per model and context of the hybrid plateau figure: the sequences the server's KV pool holds, the knee batch "
        "and why, the decode throughput and step there, the share of the step the context causes "
        "(1 - step at a 1-token prompt / step at the context) and the peak decode throughput.",
        PLATEAU_HYBRIDS,
    ),
    "kernels_dsa_check": Caption(
        "",
        "extension (not in the paper)",
        "The sparse-attention decode term (the latent of at most index_topk selected tokens and the indexer's key "
        "of every cached token, per sequence and layer, over the device's decode-attention bandwidth efficiency; "
        "nothing fitted) added to the measured module time at the smallest context, against the measured module "
        "at cached contexts of 4,096 tokens and more, per GPU and KV dtype: MAPE with bootstrap 95% intervals and "
        "the modelled/measured growth beyond the smallest context (median, 10th-90th percentiles).",
        AIC_DSA,
    ),
    "kernels_dsv4_check": Caption(
        "",
        "extension (not in the paper)",
        "DeepSeek-V4's compressed-attention decode term (the 128-token window, a CSA layer's at most index_topk "
        "selected 4:1 entries and its indexer's key of every entry, an HCA layer's every 128:1 entry, per sequence "
        "and layer, over the device's decode-attention bandwidth efficiency; nothing fitted) added to the measured "
        "module time at 1,024 cached tokens, against the measured module at 4,096 tokens and more, per GPU and "
        "module: MAPE with bootstrap 95% intervals, the median modelled/measured module time and the "
        "modelled/measured growth beyond the base (median, 10th-90th percentiles) over rows whose growth is at "
        "least a tenth of the base.",
        AIC_DSV4,
    ),
    "kernels_msa_check": Caption(
        "",
        "extension (not in the paper)",
        "MiniMax-M3's block-sparse attention decode term (the K/V of at most index_topk = 16 x 128 selected tokens "
        "and the indexer's 256-byte bf16 key of every cached token, per sequence and sparse layer, over the device's "
        "decode-attention bandwidth efficiency; nothing fitted) added to the measured module time at the smallest "
        "context, against the measured module by cached context (markers measured, lines modelled; batches 8, 128 "
        "and 1024), and in the table at 4,095 cached tokens and more per GPU and KV dtype: MAPE with bootstrap 95% "
        "intervals, the median modelled/measured module time, the modelled/measured growth beyond the base (median, "
        "10th-90th percentiles, rows whose growth is at least a tenth of the base) and its median at the "
        "selection's fill (2,047 tokens). Not priced: with fp8 KV the term halves the selected blocks' read (its "
        "growth to the fill 0.56 of bf16's), while the measured fp8 module grows <<msa_fp8_fill>> times as much as "
        "the bf16 one (median over batches of 16 and more); the projections, index scoring and block selection are "
        "in the base only.",
        AIC_MSA,
    ),
    "kernels_mhc_check": Caption(
        "",
        "extension (not in the paper)",
        "DeepSeek-V4's hyper-connections against vLLM's measured mhc_pre and mhc_post kernels by tokens per step "
        "(markers measured: pre circles, post crosses; solid lines the widened residual stream's traffic, dotted the "
        "charge before it; dashed at 1,024 tokens). Both charges are added to the measured time at the curve's "
        "smallest token count, nothing fitted. Before: the mixing projection's weights and FLOPs among the decode "
        "GEMMs (a roofline at the registry's peaks; mhc_post has no weights). Traffic "
        "(`slimlib.model.terms.HYPER_CONNECTIONS`): per token and site, mhc_pre reads the 4 bf16 residual copies "
        "twice and writes the layer's input, mhc_post reads the copies and the layer's output and writes the copies, "
        "2 x 2 x 9 D bytes per token and layer over the peak memory bandwidth. Table: per GPU and band (below and "
        "from 1,024 tokens, and all), each charge's MAPE with bootstrap 95% intervals and the traffic charge's median "
        "modelled/measured time; not priced: the kernels' bandwidth below peak (the large steps run at about 0.9 of "
        "it on H100/H200, 0.65-0.85 on B200) and the split-K mixing GEMM's partial sums.",
        AIC_MHC,
    ),
    "kernels_moe_a2a": Caption(
        "",
        "extension (not in the paper)",
        "Expert-parallel all-to-all (DeepEP dispatch and combine, 8 GPUs in one node) latency by tokens per GPU: "
        "latency floor and effective bandwidth at the largest message per GPU, backend and MoE shape, for the "
        "expert-parallel term.",
        AIC_MOE_MLA,
    ),
    # -- notebook 10: transfer on LLM-Inference-Bench and peers --------------------------------------------------
    "transfer_context_mape": Caption(
        "",
        "extension (not in the paper)",
        "IL = OL context transfer (LLM-Inference-Bench): throughput MAPE per device and method, fit L <= 256, "
        "validate L >= 512; the same design is Table II's own row \"context transfer IL = OL\" (not the paper's "
        "input-length row).",
        LLMIB,
    ),
    "transfer_context_by_length": Caption(
        "",
        "extension (not in the paper)",
        "Context transfer: throughput MAPE by validation length (512, 1024, 2048) per device and method.",
        LLMIB,
    ),
    "transfer_context_residuals": Caption(
        "",
        "extension (not in the paper)",
        "Context transfer: signed latency residual of the extended model (measured minus predicted E2E per "
        "decode step, in ms/step) against context length L, by model and batch size (the time the model misses, "
        "which grows with context when its attention or KV-capacity terms are wrong).",
        LLMIB,
    ),
    "extrap_cv": Caption(
        "",
        "extension (not in the paper)",
        "Selection by extrapolation: throughput MAPE (%) [bootstrap 95% interval] and bias (mean signed % error) of "
        "each candidate model fitted on one region and validated on another, per axis a user extrapolates on "
        "(batch B <= 4 -> B >= 8 and pre-knee -> post-knee, input and output length, IL = OL context, model size "
        "leave-largest-out, GPU transfer, tensor parallelism) and dataset, with folds and test rows; the last row is "
        "each candidate's worst axis, by which the recommended model is chosen.",
        f"{EVAL}; {LLMIB}; {ENGINE_CPU}; {ENGINE_CPU_AMX}",
    ),
    "extrap_coverage": Caption(
        "",
        "extension (not in the paper)",
        "Coverage of the 90% prediction intervals (a residual quantile learned in the extrapolation "
        "cross-validation, scaled by extrapolation distance, training error and parameter uncertainty) on held-out rows, nested (a fold's residual quantiles come from the other "
        "folds of its axis), per candidate, axis and dataset, with the median interval width high/low.",
        f"{EVAL}; {LLMIB}; {ENGINE_CPU}; {ENGINE_CPU_AMX}",
    ),
    "extrap_paired": Caption(
        "",
        "extension (not in the paper)",
        "Selection by extrapolation, paired: each candidate's throughput MAPE minus the recommended model's on the "
        "same held-out rows, per axis and dataset, with the paired bootstrap 95% interval, and the difference of "
        "the mean over the cells (the selection's tie-break).",
        f"{EVAL}; {LLMIB}; {ENGINE_CPU}; {ENGINE_CPU_AMX}",
    ),
    "extrap_latency": Caption(
        "",
        "extension (not in the paper)",
        "Served latencies by extrapolation: MAPE (%) [bootstrap 95% interval] and bias of the mean TTFT and TPOT "
        "and their 50th, 90th and 99th percentiles over the requests, as the client measured them, on the held-out "
        "rows of extrap_cv's folds that measured them, per candidate that predicts them.",
        f"{MEMGAP_ONLINE}; {ENGINE_CPU_AMX}",
    ),
    "extrap_cv_models": Caption(
        "",
        "extension (not in the paper)",
        "Selection by extrapolation, per held-out model: the recommended model's throughput MAPE [bootstrap 95% "
        "interval] and bias in each cell of extrap_cv whose held-out rows hold several models, split by model.",
        f"{EVAL}; {LLMIB}; {ENGINE_CPU}; {ENGINE_CPU_AMX}",
    ),
    "transfer_tp_mape": Caption(
        "",
        "extension (not in the paper)",
        "Tensor-parallel transfer: fit one device's degree, validate larger degrees (throughput MAPE).",
        LLMIB,
    ),
    "transfer_gpu_mape": Caption(
        "",
        "extension (not in the paper)",
        "GPU transfer MI250 <-> MI300X: fit one device, re-target the parameter file with `slim transfer`, "
        "validate the other (throughput MAPE).",
        LLMIB,
    ),
    "transfer_parity": Caption(
        "",
        "extension (not in the paper)",
        "Predicted against measured throughput in the three transfer scenarios.",
        LLMIB,
    ),
    "transfer_mi300x_knee": Caption(
        "",
        "extension (not in the paper)",
        "MI300X throughput curves at IL = OL = L (notebook 10's parameter `knee_length`, the table's `length` "
        "column) over every measured batch size (<<mi300x_knee_batches>>) with the B_cap that SLIM-BCA "
        f"recommends from the {method_label('slim')} fit (the recommended model `slim`, named on the figure) "
        "against the best measured batch under the same SLO; recommendations of B = 1 are flagged.",
        LLMIB,
    ),
    "transfer_mi250_evidence": Caption(
        "",
        "extension (not in the paper)",
        'Evidence that an LLM-Inference-Bench "MI250 GPU" is a whole card of two 64 GB dies: model sizes that '
        "run on one and two devices.",
        LLMIB,
    ),
    "peers_mape": Caption(
        "",
        "extension (not in the paper)",
        f"{method_label('slim')} (calibrated on at most 3 points per curve) against peer estimators run "
        "uncalibrated (GenZ, "
        "llm-analysis, AIConfigurator, a plain roofline): throughput MAPE, signed bias and calibration points per "
        "method and dataset; AIConfigurator runs on its 80 GB H100 model for the 64 GB H100 rows.",
        f"{LLMIB}; {MEMGAP_OFFLINE}; peer predictions in `data/peers/llmib-peer-predictions.csv` (tool, version "
        "and exact call per row)",
    ),
    # notebook 11 (the project's CPU-engine campaign)
    "engine_noise_floor": Caption(
        "",
        "extension (not in the paper)",
        "Noise floor of the CPU engine's medians (throughput and mean request E2E), averaged over configurations "
        "with bootstrap 95% intervals: across sessions, the expected deviation of a median pooled over the "
        "sessions, from the sessions' pairwise disagreement (the floor the fit table is read against); within, "
        "the expected deviation of a median of the passing repeats drawn again (bootstrap, repeats taken as "
        "exchangeable) and of a single run from the median.",
        ENGINE_CPU,
    ),
    "engine_served_vs_offline": Caption(
        "",
        "extension (not in the paper)",
        "The CPU engine behind its OpenAI server against the engine alone: per model and batch size, the mean over "
        "the lengths both campaigns ran of the served median E2E over the offline median E2E (`slim bench offline`: "
        "the same configurations, one static batch of `LLM.generate` in one process on the one OMP thread the served "
        "engine's worker has, no API server or benchmark client on the 2-core host), with a bootstrap 95% interval "
        "over those configurations and the range: what the serving front end costs the engine on this host, "
        "measured, plus the prefill the served campaign's prefix caching skipped (its servers cached prefixes, the "
        "offline re-run does not).",
        f"{ENGINE_CPU}; {ENGINE_CPU_OFFLINE}",
    ),
    "engine_offline_order": Caption(
        "",
        "extension (not in the paper)",
        "Whether a run's time on the CPU engine depends on what ran before it: per model, input and output length, "
        "and batch size, the offline campaign's median E2E in its reversed-order repeat over the median of its "
        "forward-order repeats (each repeat one process per model running the configurations by (IL, OL, B), in "
        "reverse on odd repeats); 1 within the repeat noise if the configuration alone sets the time.",
        ENGINE_CPU_OFFLINE,
    ),
    "engine_offline_prefix_cache": Caption(
        "",
        "extension (not in the paper)",
        "What vLLM's default prefix caching hid on the CPU engine: per model, input and output length, and batch "
        "size, the median E2E of the first offline campaign (caching on, prompt i the same in every run of a "
        "process, so a run skipped the prefill of prompts an earlier run had prefilled) over the median of its "
        "re-run (caching off, prompts distinct per run); below 1 by the share of the time caching skipped.",
        "the offline campaigns `data/engine-cpu-offline-prefix-cached/` (prefix caching on, vLLM's default) and "
        f"{ENGINE_CPU_OFFLINE.removeprefix('the offline campaign ')}",
    ),
    "engine_rerun_check": Caption(
        "",
        "extension (not in the paper)",
        "Each session of the CPU-engine campaign held out in turn against the medians pooled over the others, on "
        "the configurations both hold: mean |session / pooled - 1| of the medians and the drift (mean signed "
        "difference), with bootstrap 95% intervals over configurations, beside the disagreement expected from the "
        "other sessions' spread (two or more) or, with one other session, from its repeats; 'within floor' when "
        "the held-out session is no further apart than that. The third session's expectation was stated before "
        "it was measured (`data/engine-cpu-rerun/README.md`).",
        ENGINE_CPU,
    ),
    "fig01_engine_plateau": Caption(
        "Fig. 1",
        "analogue on the CPU engine (the paper's measurement on vLLM's CPU build, another device, random weights)",
        "Throughput and mean request E2E (medians over passing repeats) against the batch cap for every engine "
        "model at the shortest input length (<<engine_shortest_il>>) and one output length (notebook 11's parameter "
        "`plateau_ol`; IL and OL on the axis label), bars spanning the repeats' minimum to maximum; a circle marks "
        "each curve's knee (the first doubling that adds under the package's knee threshold), and a curve without "
        "one within the sweep says so in the legend: latency keeps growing while throughput flattens past the knee.",
        ENGINE_CPU,
    ),
    "fig02_engine_saturation": Caption(
        "Fig. 2",
        "analogue on the CPU engine (the paper's measurement on vLLM's CPU build, another device, random weights), including the input-length panels",
        "Throughput (medians) against the batch cap by output length (shortest IL, top) and by input length (at "
        "the output length with the most input lengths, bottom), one column per model.",
        ENGINE_CPU,
    ),
    "fig03_engine_phases": Caption(
        "Fig. 3",
        "analogue on the CPU engine (the paper's measurement on vLLM's CPU build, another device, random weights); client-side TTFT stands in for the prefill time",
        "Decode share of the request E2E and absolute TTFT and decode time against the batch cap, by input "
        "length, for the largest model of the first family at the output length of the input-length curves.",
        ENGINE_CPU,
    ),
    "table02_engine_mape": Caption(
        "Table II",
        "analogue on the CPU engine (the paper's measurement on vLLM's CPU build, another device, random weights): the paper's five scenarios",
        "Throughput and latency MAPE of every registered method in the paper's five scenarios (same curve, model "
        "transfer, output-length transfer, input-length transfer, combined; one row per model family) on the "
        "medians, with bootstrap 95% intervals, the paired comparison with SLIM (paper), and in the notes the "
        "noise floor of the medians and which differences are resolved (paired interval excluding zero) or within "
        "noise.",
        ENGINE_CPU,
    ),
    "engine_bca_summary": Caption(
        "",
        "extension (SLIM-BCA, Sec. VII-B, evaluated on the CPU engine)",
        "SLIM-BCA recommendation quality against the measured best under the tight (2x) and loose (4x) SLOs, "
        "with bootstrap intervals, SLO violations and the profiling effort saved.",
        ENGINE_CPU,
    ),
    "engine_bca_recommendations": Caption(
        "",
        "extension (SLIM-BCA on the CPU engine)",
        "Per advisor variant, curve and SLO: recommended B_cap, the measured best batch size, and the measured "
        "throughput, E2E and efficiency at B_cap.",
        ENGINE_CPU,
    ),
    # notebook 12
    "paper_differences": Caption(
        "",
        "extension (what this package reproduces of the paper's claims, and what it does not)",
        "Differences from the paper: each claim of the paper's text (Figs. 1-8, Tables I-II, Eqs. 7-11 and 13) "
        "with its section, this package's figure on it read from the other outputs of the same run, and the "
        "verdict by the rule written beside it (agree, disagree, not comparable: another quantity than the "
        "paper's, values given; not testable: the paper's text prints no Table II or ablation MAPE, so none is "
        "quoted as the paper's, or the output needs a GPU counter campaign).",
        "the outputs named in each row (their own data sources are in their captions)",
    ),
}


#: Notebook -> the outputs it writes (every `CAPTIONS` stem in exactly one notebook; a test checks it against the
#: notebooks' save calls). The README's paper-item table is generated from this and `CAPTIONS`.
NOTEBOOK_OUTPUTS: dict[str, tuple[str, ...]] = {
    "01_plateau": (
        "fig01_plateau",
        "fig01_plateau_summary",
    ),
    "02_active_context": (
        "fig02_saturation",
        "fig02_active_context",
        "fig02_knees",
    ),
    "03_prefill_decode": (
        "fig03_prefill_decode",
        "fig03_prefill_decode_summary",
    ),
    "04_gpu_utilization": ("fig04_gpu_utilization_proxy",),
    "05_kernels_roofline": (
        "fig05_decode_breakdown",
        "fig06_attention_roofline",
        "table01_attention_roofline",
    ),
    "06_slim_evaluation": (
        "table02_mape",
        "table02_mape_throughput",
        "table02_mape_latency",
        "eval_curves",
        "eval_parity",
        "eval_slim_params",
    ),
    "07_advisor": (
        "bca_curves",
        "bca_recommendations",
        "bca_summary",
        "bca_effort",
        "bca_quality_vs_effort",
        "bca_memory",
        "bca_memory_saved",
        "bca_slo_eval",
        "bca_slo_summary",
        "bca_frontier",
    ),
    "08_kernel_counters": (
        "fig04_kit_decode_counters",
        "fig05_kit_kernel_shares",
        "fig06_kit_attention_roofline",
        "table01_kit_attention_roofline",
        "fig07_kit_cache_hit_rates",
        "fig08_kit_stalls_occupancy",
        "fig07_fig08_kit_attention_memory",
    ),
    "09_kernels_measured": (
        "fig02_length_panels_aic",
        "fig03_length_panels_aic",
        "fig04_step_utilization_aic",
        "fig05_decode_breakdown_aic",
        "fig05_crossover_aic",
        "fig06_attention_roofline_aic",
        "table01_attention_roofline_aic",
        "kernels_plateau_by_gpu",
        "kernels_eta_m_check",
        "kernels_moe_check",
        "kernels_moe_layouts",
        "kernels_mla_check",
        "kernels_moe_a2a",
        "kernels_gdn_check",
        "kernels_dsa_check",
        "kernels_dsv4_check",
        "kernels_msa_check",
        "kernels_mhc_check",
        "kernels_gdn_check_amd",
        "kernels_kda_check",
        "kernels_gdn_prefill_check",
        "kernels_gemm_vendors",
        "kernels_gemm_corner",
        "kernels_moe_check_amd",
        "plateau_hybrids",
        "plateau_hybrids_knees",
    ),
    "10_transfer": (
        "transfer_context_mape",
        "transfer_context_by_length",
        "transfer_context_residuals",
        "transfer_tp_mape",
        "transfer_gpu_mape",
        "transfer_parity",
        "transfer_mi300x_knee",
        "transfer_mi250_evidence",
        "peers_mape",
    ),
    "11_engine_cpu": (
        "engine_noise_floor",
        "engine_rerun_check",
        "engine_served_vs_offline",
        "engine_offline_prefix_cache",
        "engine_offline_order",
        "fig01_engine_plateau",
        "fig02_engine_saturation",
        "fig03_engine_phases",
        "table02_engine_mape",
        "engine_bca_summary",
        "engine_bca_recommendations",
    ),
    "12_paper_differences": ("paper_differences",),
    "13_model_selection": ("extrap_cv", "extrap_paired", "extrap_latency", "extrap_cv_models"),
    "14_intervals": ("extrap_coverage",),
}

#: The README's paper-item table lies between these lines (`readme_table` writes it).
README_MARKERS = ("<!-- paper_items:start -->", "<!-- paper_items:end -->")


def notebook_of(stem: str) -> str:
    """The notebook that writes output `stem` (`NOTEBOOK_OUTPUTS`); DataError for an output no notebook lists."""
    for nb, stems in NOTEBOOK_OUTPUTS.items():
        if stem in stems:
            return nb
    raise DataError(f"output {stem!r} is in no notebook's list: add it to captions.NOTEBOOK_OUTPUTS")


def _item_order(item: str) -> tuple[int, int, str]:
    """Sort key of a paper item: figures by number, then tables, other paper sections, outputs of no paper item."""
    m = re.match(r"(Figs?\.|Table) ([0-9IVX]+)", item)
    if not m:
        return (2 if item else 3, 0, item)
    roman = {"I": 1, "II": 2}
    number = int(m.group(2)) if m.group(2).isdigit() else roman.get(m.group(2), 9)
    return (0 if m.group(1).startswith("Fig") else 1, number, item)


def readme_table(figures_dir: str | Path | None = None) -> str:
    """The README's paper-item table: one row per output of `CAPTIONS` (paper item, notebook, files, status in
    the registry's words, as in CAPTIONS.md), ordered by paper item. With `figures_dir`, an output not there is
    marked "not generated" (the kit outputs of notebook 08 need a GPU campaign)."""
    present = set(output_stems(figures_dir)) if figures_dir is not None else set(CAPTIONS)
    rows = sorted(CAPTIONS.items(), key=lambda kv: (_item_order(kv[1].paper_item), notebook_of(kv[0]), kv[0]))
    lines = ["| Paper item | Notebook | Output (`figures/`) | Status |", "|---|---|---|---|"]
    for stem, c in rows:
        shown = f"`{stem}.*`" + ("" if stem in present else " (not generated)")
        status = c.status.replace("|", "/")
        lines.append(f"| {c.paper_item or 'none'} | `{notebook_of(stem)}` | {shown} | {status} |")
    return "\n".join(lines) + "\n"


#: `<<name>>` in a caption: a number computed from the committed tables (`caption_facts`), never typed by hand.
_FACT = re.compile(r"<<(\w+)>>")


def _joined(values) -> str:
    return "/".join(f"{v:.0f}" for v in sorted({float(x) for x in values}))


def caption_facts() -> dict[str, str]:
    """The numbers quoted in captions, computed from the committed tables in `data/` with the selections the
    figures use: the offline batch sweeps' lengths and profilers (`offline_batch_sweeps`), the online advisor
    runs' input length per model and output lengths (notebook 02), the prompts of the online ShareGPT runs
    (notebook 01), the shortest input length of the CPU engine's medians (notebook 11) and the batch sizes of the
    one-device MI300X curves (notebook 10) and the MiniMax-M3 fp8-KV module's fill growth (notebook 09)."""
    sweeps = offline_batch_sweeps(load("memgap-offline"))
    per_model = list(sweeps.groupby("model", sort=True))
    nsys = [str(m) for m, g in per_model if (g["profiler"] == "nsys").all()]
    others = [f"{m}'s `{g['family'].iloc[0]}`" for m, g in per_model if str(m) not in nsys]
    online = load("memgap-online")
    advisor = online[(online["family"] == "advisor") & (online["n_replicas"] == 1)]
    sharegpt = online[
        (online["family"] == "background") & (online["n_replicas"] == 1) & (online["profiler"] == "none")
    ]
    by_il: dict[str, list[str]] = {}
    for m, g in advisor.groupby("model", sort=True):
        by_il.setdefault(_joined(g["input_len"]), []).append(str(m))
    return {
        "offline_sweep_lengths": f"IL = {_joined(sweeps['input_len'])}, OL = {_joined(sweeps['output_len'])}",
        "offline_nsys": f"{len(nsys)} of the {len(per_model)} offline sweeps"
        + (f" (all but {', '.join(others)})" if others else "")
        + " ran under Nsight Systems",
        "advisor_input_lengths": "IL = "
        + "; ".join(f"{il} tokens for {', '.join(models)}" for il, models in by_il.items()),
        "advisor_output_lengths": _joined(advisor["output_len"]),
        "sharegpt_prompts": _joined(sharegpt["num_prompts"]),
        "engine_shortest_il": f"IL = {load('engine-cpu-medians')['input_len'].min():.0f}",
        "mi300x_knee_batches": f"B = {_joined(device_rows(llmib_table(), 'mi300x')['batch_size'])}",
        "msa_fp8_fill": _msa_fp8_fill(),
    }


def _msa_fp8_fill() -> str:
    """The measured fp8-KV MiniMax-M3 module's growth to the selection's fill over the bf16 one's, per GPU
    (`block_sparse_check.fp8_fill_ratios`)."""
    return ", ".join(f"{v:.2f} ({gpu_label(g)})" for g, v in fp8_fill_ratios(msa_points()).items())


def fill_facts(text: str, facts: dict[str, str]) -> str:
    """`text` with every `<<name>>` replaced by its computed value; DataError names an unknown fact."""

    def value(m: re.Match[str]) -> str:
        if m.group(1) not in facts:
            raise DataError(f"caption fact <<{m.group(1)}>> is not computed by captions.caption_facts")
        return facts[m.group(1)]

    return _FACT.sub(value, text)


def caption_text(stem: str, facts: dict[str, str] | None = None) -> str:
    """The caption of output `stem` as CAPTIONS.md prints it (computed numbers filled in)."""
    return fill_facts(CAPTIONS[stem].text, caption_facts() if facts is None else facts)


def paper_item_of(stem: str) -> str | None:
    """The paper item an output name claims by its prefix (``fig06_...`` -> "Fig. 6"), or None."""
    m = _PAPER_PREFIX.match(stem)
    if not m:
        return None
    key = m.group(1)
    return PAPER_FIGURES.get(key) or PAPER_TABLES.get(key) or key


def name_problems(stem: str, caption: Caption | None = None) -> list[str]:
    """Why `stem` (with its registry entry) breaks the naming rule: a paper number that is not the item it is
    captioned as, or a paper item without the paper's prefix; empty when it is fine."""
    caption = caption or CAPTIONS.get(stem)
    claimed = paper_item_of(stem)
    problems = []
    if claimed and not claimed.startswith(("Fig. ", "Table ")):
        problems.append(f"{stem}: prefix {claimed!r} is not a paper item (paper: Figs. 1-8, Tables I-II)")
    if caption is None:
        return problems
    if not caption.status.startswith(STATUSES):
        problems.append(f"{stem}: status {caption.status!r} must start with one of {STATUSES}")
    if claimed and claimed.startswith(("Fig. ", "Table ")):
        first = caption.paper_item.replace("Figs. ", "Fig. ").split("-")[0].strip()
        if first != claimed:
            problems.append(
                f"{stem}: named {claimed} but captioned as {caption.paper_item or 'no paper item'}"
            )
    elif caption.paper_item.startswith(("Fig. ", "Figs. ", "Table ")):
        problems.append(
            f"{stem}: reproduces {caption.paper_item} but lacks the paper's figNN_/tableNN_ prefix"
        )
    return problems


def output_stems(figures_dir: str | Path) -> dict[str, list[str]]:
    """Stem -> sorted extensions of the output files in `figures_dir` (CAPTIONS.md and hidden files excluded)."""
    folder = Path(figures_dir)
    if not folder.is_dir():
        raise DataError(
            f"figures folder {str(folder)!r} does not exist; run the notebooks first (slim reproduce)"
        )
    stems: dict[str, list[str]] = {}
    for p in sorted(folder.iterdir()):
        if p.is_file() and p.name != CAPTIONS_FILE and not p.name.startswith("."):
            stems.setdefault(p.stem, []).append(p.suffix.lstrip("."))
    return {k: sorted(v) for k, v in sorted(stems.items())}


def render_captions(stems: dict[str, list[str]], registry: dict[str, Caption] | None = None) -> str:
    """The text of CAPTIONS.md for the outputs `stems` (stem -> extensions), computed numbers filled in
    (`caption_facts`, read once and only when a listed caption quotes one)."""
    registry = CAPTIONS if registry is None else registry
    facts: dict[str, str] | None = None
    lines = [
        "# Captions of the generated figures and tables",
        "",
        "Generated by `slimlib.experiments.outputs.captions` from its registry (do not edit by hand). Names: `figNN_` / "
        "`tableNN_` reproduce or stand in for the paper's item of that number; other outputs carry a topic "
        "prefix. Status: *reproduced*, *analogue* (the paper's measurement on another device or engine), *proxy* "
        "(what it stands in for) or *extension* (not in the paper).",
        "",
    ]
    for stem, exts in stems.items():
        lines.append(f"## {stem}")
        lines.append("")
        lines.append(f"Files: {', '.join(f'`{stem}.{e}`' for e in exts)}")
        lines.append("")
        c = registry.get(stem)
        if c is None:
            lines += [
                "",
                "**Caption missing**: add an entry to `slimlib.experiments.outputs.captions.CAPTIONS`.",
                "",
            ]
            continue
        text, source = c.text, c.source
        if "<<" in text + source:
            facts = caption_facts() if facts is None else facts
            text, source = fill_facts(text, facts), fill_facts(source, facts)
        lines += [
            f"Paper item: {c.paper_item or 'none'}. Status: {c.status}.",
            "",
            text,
            "",
            f"Data: {source}.",
            "",
        ]
    return "\n".join(lines).rstrip("\n") + "\n"


def write_captions(figures_dir: str | Path = "figures") -> Path | None:
    """Write `figures_dir/CAPTIONS.md` for the outputs present there (atomically) and return its path; write
    nothing and return None when the folder holds no output (a notebook that drew nothing adds no file)."""

    if not Path(figures_dir).is_dir():
        return None
    stems = output_stems(figures_dir)
    if not stems:
        return None
    return write_text(Path(figures_dir) / CAPTIONS_FILE, render_captions(stems))


def check_captions(figures_dir: str | Path = "figures") -> list[str]:
    """Problems with `figures_dir`: outputs without a registry entry, names breaking the naming rule, and a
    CAPTIONS.md that does not list exactly the outputs present; empty when all is well."""
    stems = output_stems(figures_dir)
    problems = [
        f"{s}: no caption in slimlib.experiments.outputs.captions.CAPTIONS"
        for s in stems
        if s not in CAPTIONS
    ]
    for s in stems:
        problems += name_problems(s)
    path = Path(figures_dir) / CAPTIONS_FILE
    if not path.is_file():
        problems.append(f"{path} is missing; run write_captions")
    else:
        listed = re.findall(r"^## (\S+)$", path.read_text(encoding="utf-8"), flags=re.M)
        if listed != list(stems):
            extra, lacking = sorted(set(listed) - set(stems)), sorted(set(stems) - set(listed))
            problems.append(f"{path}: lists {extra} without files and lacks {lacking}; rerun write_captions")
    return problems
