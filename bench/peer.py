"""A fast webhook receiver for benchmarks: asyncio, HTTP/1.1 keep-alive, stdlib only.

Run as a separate process: `python -m bench.peer PORT LOGFILE [FAIL_RATE]`. It appends one
line per request, `<unix time> <path> <X-Webhook-Id>`, and answers 200 (or 500 for a
random FAIL_RATE share of requests). SIGTERM flushes the log and exits.
"""

import asyncio
import random
import signal
import sys
import time

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"
FAIL = b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\nfail"


async def serve(port: int, log_path: str, fail_rate: float) -> None:
    log = open(log_path, "a", buffering=1024 * 1024)  # noqa: SIM115 (closed on exit)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1]
                length, hook_id = 0, "-"
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    lowered = name.strip().lower()
                    if lowered == "content-length":
                        length = int(value)
                    elif lowered == "x-webhook-id":
                        hook_id = value.strip()
                if length:
                    await reader.readexactly(length)
                failed = fail_rate and random.random() < fail_rate
                log.write(f"{time.time():.6f} {path} {hook_id} {500 if failed else 200}\n")
                writer.write(FAIL if failed else OK)
        except (asyncio.IncompleteReadError, ConnectionError):
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
    asyncio.run(serve(int(sys.argv[1]), sys.argv[2], rate))
