"""The HTTP client of the send step: one request within its deadline, through the
SSRF guard and the egress proxy, with the endpoint's TLS and OAuth2 credentials."""
