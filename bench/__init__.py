"""The benchmarks (`make bench`), a package so that tests import their libraries by name
(`bench.quality`, `bench.common`); each script also runs alone (`python bench/scrape.py`)."""
