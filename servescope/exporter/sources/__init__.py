"""Collection sources and the machinery that runs each one in isolation."""
