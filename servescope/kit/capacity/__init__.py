"""Capacity: the highest offered rate whose tail latency meets the SLO, and the fleet to provision."""
