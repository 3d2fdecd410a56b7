"""Pure pieces of the soak scenario (`bench.soak`): reading the delivery process's log and
the receivers' logs, and the soak's rows of the bench table with their verdicts."""

from bench.common import Row
from bench.soak import Soak, concurrent_sends, soak_rows, time_limit_lines


def test_hard_time_limits_are_counted_apart_from_soft_ones() -> None:
    log = "\n".join(
        [
            "[2026-12-06 19:00:00,000: INFO/MainProcess] Task deliveries.endpoint_work[a] received",
            "[2026-12-06 19:10:00,000: WARNING/MainProcess] Soft time limit (600s) exceeded "
            "for deliveries.endpoint_work[a]",
            "[2026-12-06 19:10:00,001: ERROR/MainProcess] celery.exceptions."
            "SoftTimeLimitExceeded: SoftTimeLimitExceeded()",
            "[2026-12-06 19:11:00,000: ERROR/MainProcess] Hard time limit (660s) exceeded for "
            "deliveries.endpoint_work[b]",
            "[2026-12-06 19:11:00,001: ERROR/MainProcess] Task deliveries.endpoint_work[b] "
            "raised unexpected: TimeLimitExceeded(660)",
        ]
    )

    assert time_limit_lines(log) == (2, 2)
    assert time_limit_lines("[INFO] Task deliveries.endpoint_work[a] succeeded") == (0, 0)


def test_only_requests_of_one_delivery_that_overlap_are_sent_at_the_same_time() -> None:
    # answer time, path, event id, status, request time
    lines = [
        "10.4 /soak/1/g0?v=0 e1 500 10.0",
        "11.2 /soak/1/g0?v=1 e1 200 11.0",  # a retry after the answer (the query changed)
        "10.3 /soak/2/g0?v=0 e1 200 10.1",  # the same event at another endpoint
        "10.9 /soak/3/g0?v=0 e2 200 10.0",
        "10.8 /soak/3/g0?v=2 e2 200 10.5",  # while the first was still open
        "12.0 /soak/3/g0?v=2 e2 200 11.0",  # after both were answered
        "10.0 /ceiling ceiling 200",  # a line of the older form: not the soak's
    ]

    assert concurrent_sends(lines) == (6, 1, 2)


def soaked(**changes: object) -> Soak:
    fields: dict[str, object] = {
        "minutes": 15.0,
        "asked_rate": 200.0,
        "events": 36_000,
        "rate": 195.0,
        "operations": {"created": 62, "updated": 200, "suspended": 90, "resumed": 90},
        "refused": [],
        "hard_limit_lines": 0,
        "soft_limit_lines": 0,
        "requests": 185_000,
        "overlapping": 0,
        "sent_again": 5_000,
        "open_events": 0,
        "statuses": {"succeeded": 179_000, "dead_lettered": 120},
        "not_received": 0,
        "seconds": 900.0,
        "drained": 21.0,
        "rss": [(60.0, 150.0), (120.0, 160.0), (500.0, 171.0), (900.0, 170.0)],
    }
    fields.update(changes)
    return Soak(**fields)  # type: ignore[arg-type]


def rows_of(soak: Soak) -> dict[str, Row]:
    return {row.measure.split(":")[1].strip().split(" (")[0]: row for row in soak_rows(soak)}


def test_a_clean_soak_meets_every_target() -> None:
    rows = soak_rows(soaked())

    assert rows[0].measure.startswith("soak, 15 min over 50 endpoints (5 answering 500 or")
    assert (rows[0].ours, rows[0].target, rows[0].met) == ("195 (36000)", "200/s asked", None)
    assert all(row.met for row in rows[1:])
    by_name = rows_of(soaked())
    assert by_name[
        "operator's API calls, created / updated / suspended / resumed / deleted"
    ].ours == ("62 / 200 / 90 / 90 / 0")
    assert by_name["hard time-limit lines in the delivery process's log"].ours == "0 (0)"
    assert by_name["deliveries sent twice at the same time"].ours == "0 (185000; 5000)"
    assert by_name["events neither delivered nor dead-lettered after the drain"].ours == (
        "0 of 36000 (179000 / 120; 21 s)"
    )
    rss = soak_rows(soaked())[-1]
    assert rss.measure == "soak: delivery process RSS at 2 min -> end (MB)"
    assert (rss.ours, rss.target) == ("160 -> 170 (1.06x; peak 171)", "<= 1.10x")


def test_each_soak_row_fails_on_its_own_defect() -> None:
    def failed(**changes: object) -> list[str]:
        return [row.measure for row in soak_rows(soaked(**changes)) if row.met is False]

    assert failed(refused=["updated: 500 oops"]) == [
        "soak: operator's API calls, created / updated / suspended / resumed / deleted"
    ]
    assert failed(hard_limit_lines=2) == [
        "soak: hard time-limit lines in the delivery process's log (soft)"
    ]
    assert failed(soft_limit_lines=2) == []
    assert failed(overlapping=1) == [
        "soak: deliveries sent twice at the same time (requests; sent again after an answer)"
    ]
    unsettled = [
        "soak: events neither delivered nor dead-lettered after the drain "
        "(deliveries succeeded / dead-lettered; drain)"
    ]
    assert failed(open_events=3) == unsettled
    assert failed(open_events=3, drained=None) == unsettled
    [events] = [row for row in soak_rows(soaked(drained=None)) if row.measure == unsettled[0]]
    assert events.ours.endswith("; not over)")
    assert failed(not_received=1) == [
        "soak: deliveries recorded as succeeded that the receiver never answered 200"
    ]
    assert failed(rss=[(120.0, 160.0), (900.0, 177.0)]) == [
        "soak: delivery process RSS at 2 min -> end (MB)"
    ]


def test_a_short_soak_takes_its_memory_base_half_way() -> None:
    short = soaked(minutes=1.0, seconds=60.0, rss=[(25.0, 100.0), (30.0, 101.0), (60.0, 104.0)])

    rss = soak_rows(short)[-1]
    assert rss.measure == "soak: delivery process RSS at 0 min -> end (MB)"
    assert rss.ours.startswith("101 -> 104 (1.03x")
    assert rss.met is True
    assert soak_rows(soaked(rss=[]))[-1].ours == "no figure"
    assert soak_rows(soaked(rss=[]))[-1].met is False
