"""Kubernetes manifests for servescope, rendered from options: `servescope deploy render`."""
