"""An opt-in memory trace of a worker process, to find what grows (a leak hunt, never in
production): with `WEBHOOKS_TRACEMALLOC_DIR` set, a worker starts `tracemalloc` once it is
ready and writes a snapshot there every `WEBHOOKS_TRACEMALLOC_SECONDS` (60), named by its
pid and the seconds since; compare two with `Snapshot.load(a).compare_to(b, "traceback")`.
Off by default: tracing slows every allocation and costs memory of its own."""

import os
import threading
import time
import tracemalloc
from pathlib import Path

# Frames kept per allocation: enough to see which of our calls made it.
FRAMES = 12


def start_if_asked() -> None:
    directory = os.environ.get("WEBHOOKS_TRACEMALLOC_DIR", "")
    if not directory or tracemalloc.is_tracing():
        return
    every = float(os.environ.get("WEBHOOKS_TRACEMALLOC_SECONDS", "60"))
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    tracemalloc.start(FRAMES)
    started = time.monotonic()
    pid = os.getpid()

    def snapshots() -> None:
        while True:
            time.sleep(every)
            elapsed = round(time.monotonic() - started)
            tracemalloc.take_snapshot().dump(str(folder / f"{pid}-{elapsed:05d}.trace"))

    # A thread (a greenlet under gevent's patching): the snapshots take no task slot.
    threading.Thread(target=snapshots, name="tracemalloc-snapshots", daemon=True).start()
