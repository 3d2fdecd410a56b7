"""The portal's browser tests: fresh pages, screenshots, the product's link."""

import json
import os
import shutil
from typing import Any

from deliveries.models import ApiToken
from tests.browser import DOCS_SCREENSHOTS, SCREENSHOTS
from tests.fixtures import api_client


def new_page(browser: Any) -> Any:
    """A fresh browser context: its own cookies, like another person's browser."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(20_000)
    return context.new_page()


def shot(page: Any, name: str, *, full_page: bool = True) -> None:
    page.screenshot(path=str(SCREENSHOTS / f"portal-{name}.png"), full_page=full_page)
    if os.environ.get("UPDATE_DOCS_SCREENSHOTS") == "1":
        shutil.copyfile(SCREENSHOTS / f"portal-{name}.png", DOCS_SCREENSHOTS / f"portal-{name}.png")


def portal_link(live_server: Any, tenant: str) -> str:
    """The link the product asks for over the API, aimed at the live server."""
    _, plain = ApiToken.issue(f"product for {tenant}")
    api = api_client(plain)
    response = api.post(
        "/api/v1/portal-sessions",
        data=json.dumps({"tenant": tenant, "expires_in": 900}),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    url: str = response.json()["url"]
    return url.replace("http://testserver", live_server.url)
