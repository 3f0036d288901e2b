"""A simulated GPU fleet that answers through the same interfaces as the real hardware."""
