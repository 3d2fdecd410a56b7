"""Outbound requests: the SSRF guard, its connect-time transport, total deadlines, URL masking."""
