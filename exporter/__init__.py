"""servescope: observability and alerting for LLM serving on NVIDIA GPUs."""

__version__ = "0.1.0"
