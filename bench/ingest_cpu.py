"""Where one request at an ingest door goes, in one process: `python -m bench.ingest_cpu`.

Each door's requests (`POST /api/v1/events`, `POST /receivers/<slug>/`, the writing view
`/bench/write`, the trivial view) are handed to the web process's WSGI application
(`webhooks_project.wsgi`: the body buffering, Django, the views) one after another, with
no HTTP server or client in the way, on a pooled database connection as the Procfile's
`web` line has. Per request it prints this process's CPU, the wall time, the SQL
statements and the Redis commands (Celery's messages included); with `--profile N`, the N
costliest functions of each door (cProfile, cumulative). Not counted: PostgreSQL's and
Redis's own CPU, and gunicorn's parsing of the request.
"""

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from bench.common import BROKER_URL, ENV, recreate_database

EVENT_TYPE = "bench.load"


def environ(path: str, body: bytes, headers: dict[str, str]) -> dict[str, Any]:
    env: dict[str, Any] = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
        "wsgi.url_scheme": "http",
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        "wsgi.version": (1, 0),
    }
    for name, value in headers.items():
        env["HTTP_" + name.upper().replace("-", "_")] = value
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500, help="per door")
    parser.add_argument("--endpoints", type=int, default=1, help="subscribed to the API's events")
    parser.add_argument("--profile", type=int, default=0, help="costliest functions to print")
    parser.add_argument("--doors", default="trivial,write,api,receiver")
    args = parser.parse_args()
    os.environ.update(ENV)
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    os.environ.setdefault("DATABASE_POOL_MAX_SIZE", "10")  # as the gevent web process has
    recreate_database()
    import django

    django.setup()
    import redis
    from django.core.management import call_command
    from django.db import connection

    from bench.anchor import create_table
    from deliveries import services as sending
    from receivers import services as receiving
    from webhooks_core.crypto import signing
    from webhooks_core.models import ApiToken
    from webhooks_project.wsgi import application

    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        create_table(cursor)
    redis.Redis.from_url(BROKER_URL).flushdb()
    for n in range(args.endpoints):
        sending.endpoint_create(url=f"http://127.0.0.1:9/{n}", event_types=[EVENT_TYPE])
    _, token = ApiToken.issue("bench-cpu")
    _, secret = receiving.source_create(slug="bench", scheme="ours", tolerance_seconds=3600)
    bearer = {"Authorization": f"Bearer {token}"}

    def api(n: int) -> dict[str, Any]:
        body = json.dumps({"type": EVENT_TYPE, "data": {"n": n}}).encode()
        return environ("/api/v1/events", body, bearer)

    def receiver(n: int) -> dict[str, Any]:
        event_id = str(uuid.uuid4())
        body = json.dumps(
            {"id": event_id, "type": "bench.burst", "version": 1, "data": {"n": n}}
        ).encode()
        timestamp = int(time.time())
        headers = signing.signature_headers(
            [secret], msg_id=event_id, timestamp=timestamp, body=body
        )
        headers = {**headers, "X-Webhook-Id": event_id, "X-Webhook-Timestamp": str(timestamp)}
        return environ("/receivers/bench/", body, {**headers, "X-Webhook-Event": "bench.burst"})

    doors: dict[str, Callable[[int], dict[str, Any]]] = {
        "trivial": lambda n: environ("/bench/noop", b'{"n": %d}' % n, {}),
        "write": lambda n: environ("/bench/write", b'{"n": %d}' % n, bearer),
        "api": api,
        "receiver": receiver,
    }
    counts = {"sql": 0, "redis": 0}

    from django.db.backends import utils

    plain_sql = getattr(utils.CursorWrapper, "_execute_with_wrappers")  # noqa: B009

    def count_sql(self: Any, *call_args: Any, **options: Any) -> Any:
        counts["sql"] += 1
        return plain_sql(self, *call_args, **options)

    plain_execute = redis.Redis.execute_command
    plain_pipeline = redis.client.Pipeline.execute

    def count_redis(self: Any, *command: Any, **options: Any) -> Any:
        counts["redis"] += 1
        return plain_execute(self, *command, **options)

    def count_pipeline(self: Any, *call_args: Any, **options: Any) -> Any:
        counts["redis"] += len(self.command_stack)
        return plain_pipeline(self, *call_args, **options)

    setattr(utils.CursorWrapper, "_execute_with_wrappers", count_sql)  # noqa: B010
    redis.Redis.execute_command = count_redis  # type: ignore[method-assign]
    redis.client.Pipeline.execute = count_pipeline  # type: ignore[method-assign]

    def call(env: dict[str, Any]) -> None:
        statuses: list[str] = []
        answer = application(env, lambda status, headers, *_: statuses.append(status))
        b"".join(answer)
        getattr(answer, "close", lambda: None)()
        if not statuses[0].startswith("2"):
            raise RuntimeError(f"{statuses[0]} from {env['PATH_INFO']}")

    print(f"{'door':<10} {'cpu ms':>7} {'wall ms':>8} {'sql':>5} {'redis':>6}  per request")
    for name in [d.strip() for d in args.doors.split(",") if d.strip()]:
        make = doors[name]
        for n in range(50):  # warm-up: imports, connections, prepared statements
            call(make(n))
        envs = [make(n) for n in range(args.requests)]
        counts.update(sql=0, redis=0)
        profile = cProfile.Profile(time.process_time) if args.profile else None
        started, cpu = time.perf_counter(), time.process_time()
        if profile:
            profile.enable()
        for env in envs:
            call(env)
        if profile:
            profile.disable()
        cpu_ms = (time.process_time() - cpu) * 1000 / args.requests
        wall_ms = (time.perf_counter() - started) * 1000 / args.requests
        sql, red = counts["sql"] / args.requests, counts["redis"] / args.requests
        print(f"{name:<10} {cpu_ms:7.2f} {wall_ms:8.2f} {sql:5.1f} {red:6.1f}", flush=True)
        if profile:
            pstats.Stats(profile).sort_stats("cumulative").print_stats(args.profile)


if __name__ == "__main__":
    main()
