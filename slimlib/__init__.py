"""slimlib: the SLIM performance model of LLM serving (equations, registries, fitters, advisor, data)."""

__version__ = "0.1.0"
