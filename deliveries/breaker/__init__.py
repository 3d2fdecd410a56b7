"""The circuit breaker around each endpoint: its pure rules, its shared counters, its
transitions and its metrics."""
