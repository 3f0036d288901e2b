"""DCGM: `dcgmi dmon` as a supervised subprocess, or an existing dcgm-exporter, as a source."""
