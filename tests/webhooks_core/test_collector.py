"""`webhooks_core.collector`: what start-up made is frozen out of the collector's sight,
and the reference deployment's processes do it once they are ready."""

import gc
from collections.abc import Iterator

import pytest
from celery import signals

from webhooks_core.collector import WORKER_YOUNG_GENERATION_THRESHOLD, settle_after_start_up


@pytest.fixture
def collector_restored() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


@pytest.mark.usefixtures("collector_restored")
def test_settling_freezes_what_exists_and_leaves_the_thresholds_unless_asked() -> None:
    gc.unfreeze()
    made_at_start_up = [[] for _ in range(3)]  # (containers are what gc tracks)
    assert gc.get_freeze_count() == 0
    threshold = gc.get_threshold()

    settle_after_start_up()

    assert gc.get_freeze_count() > len(made_at_start_up)
    assert gc.get_threshold() == threshold

    settle_after_start_up(5_000)
    assert gc.get_threshold() == (5_000, *threshold[1:])


@pytest.mark.usefixtures("collector_restored")
@pytest.mark.parametrize("signal", [signals.worker_ready, signals.worker_process_init])
def test_a_celery_worker_of_the_reference_deployment_settles_once_ready(signal: object) -> None:
    import webhooks_project.celery  # noqa: F401 (connects the handlers)

    gc.unfreeze()
    signal.send(sender=None)  # type: ignore[attr-defined]
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold()[0] == WORKER_YOUNG_GENERATION_THRESHOLD
