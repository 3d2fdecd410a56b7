"""Pull delivery's settings (registered with the sending side's in ``DeliveriesConfig``)."""

from dataclasses import dataclass

from webhooks_core.conf import Registry, Setting

SETTINGS: tuple[Setting, ...] = (
    Setting(
        "WEBHOOKS_POLL_MAX_WAITS_PER_KEY",
        10,
        "Long polls (`wait` > 0 on `GET /api/v1/poll/...`) one consumer key may hold open at "
        "once in one web process; one more is answered 429 with `Retry-After`.",
    ),
    Setting(
        "WEBHOOKS_POLL_MAX_WAITS_PER_PROCESS",
        1000,
        "Long polls one web process holds open at once, all keys together; one more is "
        "answered 429 with `Retry-After`. A waiting long poll holds no database connection "
        "(under the `web` process's gevent workers, no thread either).",
    ),
    Setting(
        "WEBHOOKS_POLL_RECHECK_SECONDS",
        0.5,
        "How often a waiting long poll reads its feed again when no notice can reach it "
        "(no Redis: the embedded default); with Redis, fan-out's notice wakes it and it "
        "reads again every 5 s at most besides.",
    ),
)

value = Registry(SETTINGS)


@dataclass(frozen=True)
class PollSettings:
    max_waits_per_key: int
    max_waits_per_process: int
    recheck_seconds: float


def get() -> PollSettings:
    return PollSettings(
        max_waits_per_key=max(1, int(value("WEBHOOKS_POLL_MAX_WAITS_PER_KEY"))),
        max_waits_per_process=max(1, int(value("WEBHOOKS_POLL_MAX_WAITS_PER_PROCESS"))),
        recheck_seconds=max(0.05, float(value("WEBHOOKS_POLL_RECHECK_SECONDS"))),
    )
