"""The worker's wiring: Celery tasks and queues, redispatching lost messages, gevent, the
garbage collector."""
