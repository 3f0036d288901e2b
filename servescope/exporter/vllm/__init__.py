"""vLLM (and peer engines): scraping, fast exposition parsing, the alias layer, the engine-GPU join."""
