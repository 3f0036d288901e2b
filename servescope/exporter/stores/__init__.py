"""What the sources record and the derived signals read: 1 s memory curves and each engine's track.

The NVML and vLLM sources write here, the derived source reads from here; neither imports the other.
"""
