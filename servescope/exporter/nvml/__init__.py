"""NVML: the library boundary, the per-GPU collector and the XID event watcher."""
