"""Baselines of the SLIM evaluation (paper Sec. VII-A), behind the same estimator contract as SLIM."""

from slimlib.model.baselines.imai import IMAI_FEATURES, ImaiOodLR, llm_roofline_time
from slimlib.model.baselines.llmvisor import LLMVisorAgg

__all__ = ["IMAI_FEATURES", "ImaiOodLR", "LLMVisorAgg", "llm_roofline_time"]
