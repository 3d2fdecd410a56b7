"""Celery tasks of the sending side: thin wrappers that take ids and call services."""

from dataclasses import asdict
from typing import Any

from deliveries import conf, services
from deliveries.endpoints import validation
from webhooks_core import conf as core_conf
from webhooks_core.runtime.tasking import (
    QUEUE_DELIVERY,
    QUEUE_FANOUT,
    QUEUE_MAINTENANCE,
    every,
    periodic,
    webhook_task,
)


@webhook_task("deliveries.tasks.fan_out_events", queue=QUEUE_FANOUT)
def fan_out_events(event_ids: list[str]) -> int:
    """These events and the others waiting (see `fanout_mark`); returns deliveries created."""
    return services.events_fan_out(event_ids=event_ids, top_up=True)


# An owner's turn (WEBHOOKS_DELIVERY_TURN_SECONDS) plus its last requests (connect + read
# timeout, at most the sum of their bounds in `field_rules.NUMERIC`) always ends well
# within these; the host's task-wide limits, which
# may be shorter, do not apply to it.
OWNER_SOFT_TIME_LIMIT_SECONDS = 600
OWNER_TIME_LIMIT_SECONDS = 660


@webhook_task(
    "deliveries.tasks.work_endpoint",
    queue=QUEUE_DELIVERY,
    soft_time_limit=OWNER_SOFT_TIME_LIMIT_SECONDS,
    time_limit=OWNER_TIME_LIMIT_SECONDS,
)
def work_endpoint(endpoint_id: str) -> int:
    """ "Endpoint E has work": own it and send what is due; returns how many were sent."""
    return services.endpoint_work(endpoint_id=endpoint_id).sent


@webhook_task("deliveries.tasks.sweep", queue=QUEUE_MAINTENANCE)
def sweep() -> dict[str, int]:
    return asdict(services.sweep())


@webhook_task("deliveries.tasks.validate_endpoint", queue=QUEUE_MAINTENANCE)
def validate_endpoint(endpoint_id: str) -> str | None:
    """The CloudEvents handshake of one endpoint; returns its new validation state."""
    return validation.endpoint_handshake(endpoint_id=endpoint_id)


@webhook_task("deliveries.tasks.validate_endpoints_due", queue=QUEUE_MAINTENANCE)
def validate_endpoints_due() -> int:
    return validation.handshakes_due()


@webhook_task("deliveries.tasks.run_replay", queue=QUEUE_MAINTENANCE)
def run_replay(replay_id: int) -> bool:
    return services.replay_step(replay_id=replay_id)


@webhook_task("deliveries.tasks.resume_stalled_replays", queue=QUEUE_MAINTENANCE)
def resume_stalled_replays() -> int:
    return services.replays_resume_stalled()


@webhook_task("deliveries.tasks.purge", queue=QUEUE_MAINTENANCE)
def purge() -> dict[str, int]:
    return {
        **asdict(services.purge_expired()),
        "portal_links_deleted": services.portal_links_purge(),
    }


@webhook_task("deliveries.erasure.run", queue=QUEUE_MAINTENANCE)
def run_erasure(erasure_id: int) -> str:
    """One tenant erasure, started once its request commits (runs in short batches)."""
    return services.tenant_erasure_run(erasure_id=erasure_id)


@webhook_task("deliveries.erasure.resume", queue=QUEUE_MAINTENANCE)
def resume_erasures() -> int:
    """Every erasure still running (beat): a crash or a lost message only delays it."""
    return services.tenant_erasures_resume()


@periodic
def beat_entries() -> dict[str, dict[str, Any]]:
    sweep_interval = core_conf.scheduling().sweep_interval_seconds
    return {
        "deliveries-sweep": every("deliveries.tasks.sweep", sweep_interval),
        "deliveries-resume-stalled-replays": every(
            "deliveries.tasks.resume_stalled_replays", sweep_interval
        ),
        "deliveries-purge": every("deliveries.tasks.purge", conf.get().purge_interval_seconds),
        "deliveries-validate-endpoints-due": every(
            "deliveries.tasks.validate_endpoints_due", sweep_interval
        ),
        "deliveries-resume-erasures": every("deliveries.erasure.resume", sweep_interval),
    }
