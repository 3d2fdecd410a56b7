"""Endpoint health and isolation: the pure rules, the shared counters, the metrics.

The services that apply them live in `deliveries/services/` (`admission`, `breaker`,
`suspension`).
"""
