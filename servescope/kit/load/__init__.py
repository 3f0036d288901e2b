"""Load generation against OpenAI-compatible engines, and the records every load step produces."""
