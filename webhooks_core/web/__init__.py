"""What a host mounts in its URLconf or middleware: the 400 middleware (the 503 one is
`db.unavailable`), liveness and readiness, `/metrics`, the page that shows secrets once."""
