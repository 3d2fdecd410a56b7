"""HTTP API of the receiving side (sources and the inbox), mounted under ``/api/v1/``."""
