"""The operations dashboard in the admin (``/admin/dashboard/``): charts, not tables.

A host mounts ``dashboard`` (``admin.site.admin_view``: staff login, CSRF, no cache) at
``admin/dashboard/`` under the name ``webhooks-dashboard``; it spans both apps, so it is no
ModelAdmin. Numbers come from
``dashboard_data``; charts are SVG rendered here (``charts``), so the page needs no
JavaScript and nothing from the internet.
"""

from dataclasses import replace

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.response import TemplateResponse

from deliveries.dashboard.charts import Series, bar_chart, hbar_chart, line_chart
from deliveries.selectors.dashboard import PERCENTILES, WINDOWS, DashboardData, dashboard_data
from webhooks_core.egress.urlmask import masked_url


def build_charts(data: DashboardData) -> dict[str, str]:
    labels, period = data.labels, data.window.label
    latency_colors = ("green", "orange", "red")
    charts: dict[str, str] = {
        "success_rate": line_chart(
            f"Attempt success rate, {period}",
            labels,
            [Series("success %", data.success_rate, "green")],
            unit="%",
            y_max=100.0,
        ),
        "throughput": bar_chart(
            f"Throughput: attempts per bucket, {period}",
            labels,
            [
                Series("2xx", data.attempts_ok, "green"),
                Series("failed", data.attempts_failed, "red"),
            ],
        ),
        "latency": line_chart(
            f"Delivery latency (commit to 2xx), {period}",
            labels,
            [
                Series(f"p{int(p * 100)}", data.latency[p], color)
                for p, color in zip(PERCENTILES, latency_colors, strict=True)
            ],
            unit="s",
        ),
        "dead_letters": bar_chart(
            f"Dead-lettered deliveries, {period} (queue size now: "
            f"{data.totals['dead_letter_size']})",
            labels,
            [Series("dead-lettered", data.dead_lettered, "purple")],
        ),
        "queue_age": hbar_chart(
            "Waiting deliveries by age (pending or sending, now)",
            data.queue_age,
            color="blue",
        ),
        "top_failing": hbar_chart(
            f"Top failing endpoints: failed attempts, {period}",
            data.top_failing,
            empty="no failed attempts",
        ),
    }
    if data.totals.get("inbox_failed") is not None:  # the receiving side is installed
        charts["receiver"] = bar_chart(
            f"Receiving: inbox events by outcome, {period}",
            labels,
            [
                Series("processed/ignored", data.inbox_ok, "green"),
                Series("failed/retrying", data.inbox_failed, "red"),
                Series("waiting", data.inbox_waiting, "grey"),
            ],
        )
    return charts


def dashboard_view(request: HttpRequest) -> HttpResponse:
    key = request.GET.get("window", "1h")
    window = WINDOWS.get(key)
    if window is None:
        return JsonResponse(
            {"window": [f"must be one of: {', '.join(WINDOWS)}"]},
            status=400,
        )
    data = dashboard_data(window)
    if not request.user.has_perm("deliveries.change_endpoint"):
        # URLs can carry credentials (userinfo, a token in the query): masked for those
        # who may not change the endpoint anyway.
        data = replace(data, top_failing=[(masked_url(url), n) for url, n in data.top_failing])
    context = {
        **admin.site.each_context(request),
        "title": "Webhooks dashboard",
        "window": window,
        "windows": WINDOWS.values(),
        "totals": data.totals,
        "charts": build_charts(data),
    }
    return TemplateResponse(request, "deliveries/dashboard.html", context)


dashboard = admin.site.admin_view(dashboard_view)
