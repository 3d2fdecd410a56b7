"""A fast webhook receiver for benchmarks: asyncio, HTTP/1.1 keep-alive, stdlib only.

Run as a separate process:
`python -m bench.peer PORT LOGFILE [FAIL_RATE [SEED [DELAY [MAX_DELAY]]]]`. It appends one
line per request, `<unix time> <path> <event id> <status> <unix time of its request>`, and
answers 200, or 500 for a FAIL_RATE share of requests drawn from a random generator seeded
with SEED (default 1), so that two runs fail the same request numbers. With DELAY (seconds)
every answer comes that long after its request, as a real receiver's work would (the line
is written when it answers); with MAX_DELAY too, each answer's delay is drawn between the
two (from a generator of its own, so the failures stay the same). SIGTERM flushes the log
and exits.

The event id is our `X-Webhook-Id` header. Senders without such a header (django-webhook, the
peer we compare with) are identified by `object.ref` in the JSON body: the bench's model there
carries its own id in that field.
"""

import asyncio
import json
import random
import signal
import sys
import time

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"
FAIL = b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\nfail"


def id_from_body(body: bytes) -> str:
    try:
        document = json.loads(body)
        return str(document["object"]["ref"])
    except (ValueError, KeyError, TypeError):
        return "-"


async def serve(
    port: int, log_path: str, fail_rate: float, seed: int, delay: float, max_delay: float
) -> None:
    log = open(log_path, "a", buffering=1024 * 1024)  # noqa: SIM115 (closed on exit)
    draw = random.Random(seed).random
    draw_delay = random.Random(seed + 1).uniform

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                began = time.time()
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1]
                length, hook_id = 0, ""
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    lowered = name.strip().lower()
                    if lowered == "content-length":
                        length = int(value)
                    elif lowered == "x-webhook-id":
                        hook_id = value.strip()
                body = await reader.readexactly(length) if length else b""
                if not hook_id:
                    hook_id = id_from_body(body)
                # One draw per request, in arrival order: the same seed fails the same numbers.
                failed = fail_rate > 0 and draw() < fail_rate
                if delay:
                    await asyncio.sleep(draw_delay(delay, max(delay, max_delay)))
                status = 500 if failed else 200
                log.write(f"{time.time():.6f} {path} {hook_id} {status} {began:.6f}\n")
                writer.write(FAIL if failed else OK)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except asyncio.CancelledError:
            # Stopping with keep-alive connections still open: nothing left to answer.
            pass
        finally:
            writer.close()

    async def flush_now_and_then() -> None:
        # The benchmark reads the log while we run; keep it at most 0.2 s behind.
        while True:
            await asyncio.sleep(0.2)
            log.flush()

    flusher = asyncio.create_task(flush_now_and_then())
    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    async with server:
        await stop.wait()
    flusher.cancel()
    log.close()


if __name__ == "__main__":
    rate = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    delay = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    max_delay = float(sys.argv[6]) if len(sys.argv) > 6 else delay
    asyncio.run(serve(int(sys.argv[1]), sys.argv[2], rate, seed, delay, max_delay))
