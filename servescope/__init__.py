"""servescope: observability and alerting for LLM serving on NVIDIA GPUs."""

import sys

__version__ = "0.1.0"

# httpx imports its own command-line client (click, rich and pygments: ~3 MiB of resident memory and
# ~0.1 s) whenever it is imported, and stands a stub in for it when that import fails. Nothing here
# runs the httpx CLI, and the exporter's memory is a product figure: the DaemonSet's limit is sized
# from it. A None entry makes that one import fail, as Python's import system documents.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
