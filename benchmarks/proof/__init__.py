"""``ge-plugin bench``: end-to-end throughput and latency, measured the way Triton users measure."""
