"""vLLM's and SGLang's metric names across versions."""
