"""What a host mounts in its URLconf or middleware: the 400/503 middleware, liveness and
readiness, `/metrics`, the page that shows secrets once."""
