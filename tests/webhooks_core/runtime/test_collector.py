"""`webhooks_core.runtime.collector`: what start-up made is frozen out of the collector's sight,
and the reference deployment's processes do it once they are ready."""

import gc
from collections.abc import Iterator
from typing import Any

import pytest
from celery import signals

from webhooks_core.runtime.collector import WORKER_YOUNG_GENERATION_THRESHOLD, settle_after_start_up


@pytest.fixture
def collector_restored() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


@pytest.mark.usefixtures("collector_restored")
def test_settling_freezes_what_exists_and_leaves_the_thresholds_unless_asked() -> None:
    gc.unfreeze()
    made_at_start_up: list[list[int]] = [[] for _ in range(3)]  # (gc tracks containers)
    assert gc.get_freeze_count() == 0
    threshold = gc.get_threshold()

    settle_after_start_up()

    assert gc.get_freeze_count() > len(made_at_start_up)
    assert gc.get_threshold() == threshold

    settle_after_start_up(5_000)
    assert gc.get_threshold() == (5_000, *threshold[1:])


@pytest.mark.usefixtures("collector_restored")
def test_a_celery_worker_of_the_reference_deployment_settles_once_ready() -> None:
    from webhooks_project import celery as app_module

    # Connected to both (not sent here: other receivers of these signals, Celery's
    # Django fix-up among them, would act on this test process).
    for signal in (signals.worker_ready, signals.worker_process_init):
        live: Any = signal._live_receivers  # type: ignore[attr-defined]  # (no public list)
        assert app_module._settle_garbage_collection in live(None)
    gc.unfreeze()
    app_module._settle_garbage_collection()
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold()[0] == WORKER_YOUNG_GENERATION_THRESHOLD
