"""Kubernetes facts of this node: which pod and container holds each GPU (the kubelet's pod-resources)."""
