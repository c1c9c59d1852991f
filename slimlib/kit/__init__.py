"""GPU characterization kit: a minimal PyTorch timing harness (not vLLM), kernel breakdown, Nsight Compute
counters, a budgeted measurement campaign and its tidy tables. Importing this package never imports torch;
functions that measure need the profiling extra (``pip install 'slimlib[profiling]'``).
"""
