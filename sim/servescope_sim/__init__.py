"""servescope-sim: a simulated GPU node that answers through the same interfaces as the real hardware
(NVML, `dcgmi`, vLLM's /metrics, the kubelet), the demo stack, and a mock OpenAI server. Never part of
the production package; servescope finds it through entry points."""

__version__ = "0.1.0"
