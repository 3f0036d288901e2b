"""Derived signals: memory curves, trends, leak detection, pictures of them."""
