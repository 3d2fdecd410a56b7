"""The admin dashboard: staff only, charts with the seeded numbers, both windows, bad input."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from deliveries.dashboard import charts
from deliveries.selectors.dashboard import WINDOWS, dashboard_data

from .dashboard_data import seed_dashboard

pytestmark = pytest.mark.django_db


def test_dashboard_needs_a_staff_login(client: Client) -> None:
    response = client.get("/admin/dashboard/")
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_dashboard_renders_charts_for_both_windows(staff: Client) -> None:
    seed_dashboard()
    for key in WINDOWS:
        response = staff.get(f"/admin/dashboard/?window={key}")
        assert response.status_code == 200
        html = response.content.decode()
        for chart in (
            "success_rate",
            "throughput",
            "latency",
            "dead_letters",
            "queue_age",
            "top_failing",
            "receiver",
        ):
            assert f'id="chart-{chart}"' in html
        assert html.count('<svg xmlns="http://www.w3.org/2000/svg" class="chart"') == 7
        assert "flaky.example.org" in html  # top failing endpoint
        assert "<script" not in html.split('id="content-main"')[1]  # server-side SVG only


def test_dashboard_refuses_an_unknown_window(staff: Client) -> None:
    response = staff.get("/admin/dashboard/?window=7d")
    assert response.status_code == 400
    assert "window" in response.json()


def test_admin_index_links_to_the_dashboard(staff: Client) -> None:
    html = staff.get("/admin/").content.decode()
    assert 'href="/admin/dashboard/"' in html


def test_dashboard_numbers_match_the_seeded_data() -> None:
    seed_dashboard()
    data = dashboard_data(WINDOWS["1h"])
    # 29 rounds of two attempts; the flaky endpoint fails when minute % 6 != 0.
    failures = sum(1 for minute in range(0, 58, 2) if minute % 6)
    assert data.totals["attempts"] == 58
    assert sum(data.attempts_failed) == failures
    assert sum(data.attempts_ok) == 58 - failures
    assert data.top_failing == [("https://flaky.example.org/webhooks", float(failures))]
    assert data.totals["dead_letter_size"] == sum(dead_lettered_minutes())
    assert sum(data.dead_lettered) == data.totals["dead_letter_size"]
    assert sum(data.inbox_failed) == 3
    assert sum(data.inbox_ok) == 9
    p50, p99 = data.latency[0.5], data.latency[0.99]
    assert all(a is None or b is None or a <= b for a, b in zip(p50, p99, strict=True))
    assert any(v is not None and 1.0 < v < 3.0 for v in p50)
    rates = [r for r in data.success_rate if r is not None]
    assert rates
    assert all(0 <= r <= 100 for r in rates)
    waiting = sum(n for _, n in data.queue_age)
    assert waiting == data.totals["pending"]


def dead_lettered_minutes() -> list[int]:
    return [1 for minute in range(0, 58, 2) if minute % 6 and minute % 10 == 2]


def test_buckets_cover_the_window_and_ignore_older_rows() -> None:
    data = dashboard_data(WINDOWS["24h"], now=timezone.now() + timedelta(days=3))
    assert len(data.labels) == 24
    assert data.totals["attempts"] == 0
    assert data.success_rate == [None] * 24


# --- charts (pure) ---------------------------------------------------------------------


def test_line_chart_escapes_text_and_leaves_gaps() -> None:
    svg = charts.line_chart(
        "<b>title</b>", ["a", "b", "c", "d"], [charts.Series("s&p", [1.0, None, 2.0, 3.0])]
    )
    assert "<b>" not in svg
    assert "&lt;b&gt;title&lt;/b&gt;" in svg
    assert "s&amp;p" in svg
    assert svg.count("<polyline") == 1  # the gap splits the first point off
    assert svg.count("<circle") == 3


def test_bar_and_hbar_charts() -> None:
    bars = charts.bar_chart(
        "t", ["x", "y"], [charts.Series("ok", [1, 2], "green"), charts.Series("ko", [0, 3])]
    )
    assert bars.count('class="bar"') == 3  # zero-height bars are not drawn
    empty = charts.hbar_chart("t", [], empty="nothing failed")
    assert "nothing failed" in empty
    long = charts.hbar_chart("t", [("https://" + "x" * 80, 2.0)])
    assert "…" in long


@pytest.mark.parametrize(
    ("value", "expected"), [(0, 1.0), (0.04, 0.05), (3, 5.0), (10, 10.0), (101, 200.0)]
)
def test_nice_max(value: float, expected: float) -> None:
    assert charts.nice_max(value) == pytest.approx(expected)


def test_python_percentiles_match_postgresql(monkeypatch: pytest.MonkeyPatch) -> None:
    """The embedded SQLite default computes percentiles in Python: same answers."""
    from django.db import connection

    seed_dashboard()
    now = timezone.now()
    in_sql = dashboard_data(WINDOWS["1h"], now=now).latency
    monkeypatch.setattr(connection, "vendor", "sqlite")
    in_python = dashboard_data(WINDOWS["1h"], now=now).latency
    for p, values in in_sql.items():
        assert in_python[p] == pytest.approx(values), p
