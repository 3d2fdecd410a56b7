"""What `python -m bench` asks of the peer, one command per process, run with the peer's
virtualenv: `python -m bench.peer_django_webhook.drive COMMAND ...`. Each command prints one
JSON document on its last line of output.

  setup                    migrate (the shop app has no migrations: --run-syncdb)
  subscribe URL [URL...]   a webhook on shop.Order/create to each URL; every other one inactive
  emit N PER_TX OUT        N orders, PER_TX per transaction; OUT gets {ref: commit time}
  paced RATE SECONDS OUT   one order per transaction at a steady rate; same OUT
  rollback N               N orders in a transaction that rolls back
  park N MIN MAX           N webhook tasks waiting MIN..MAX s, as a retry leaves them
  count                    orders and stored webhook events by status
"""

import json
import os
import random
import sys
import time
import uuid

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.peer_django_webhook.settings")


def main(argv: list[str]) -> object:
    from bench.peer_django_webhook.celery_app import app  # noqa: F401 (binds the tasks)

    django.setup()
    from django.core.management import call_command
    from django.db import transaction
    from django.db.models import Count
    from django_webhook.models import Webhook, WebhookEvent, WebhookSecret, WebhookTopic

    from bench.peer_django_webhook.shop.models import Order

    command, args = argv[0], argv[1:]
    if command == "setup":
        call_command("migrate", run_syncdb=True, verbosity=0)
        from django_webhook.models import populate_topics_from_settings

        populate_topics_from_settings()
        return {"topics": WebhookTopic.objects.count()}
    if command == "subscribe":
        Webhook.objects.update(active=False)
        topic = WebhookTopic.objects.get(name="shop.Order/create")
        ids = []
        for url in args:
            webhook = Webhook.objects.create(url=url)
            webhook.topics.add(topic)
            WebhookSecret.objects.create(webhook=webhook, token="peer-bench-secret-" + "x" * 16)
            ids.append(webhook.id)
        return {"webhooks": ids}
    if command == "emit":
        count, per_tx, out = int(args[0]), int(args[1]), args[2]
        committed: dict[str, float] = {}
        started = time.perf_counter()
        for offset in range(0, count, per_tx):
            with transaction.atomic():
                refs = [
                    str(Order.objects.create(n=n, text="x" * 200).ref)
                    for n in range(offset, min(offset + per_tx, count))
                ]
            now = time.time()
            committed.update((ref, now) for ref in refs)
        seconds = time.perf_counter() - started
        with open(out, "w") as file:
            json.dump(committed, file)
        return {"emitted": count, "seconds": seconds}
    if command == "paced":
        from django.db import connections

        from bench.common import run_paced

        rate, seconds, out = float(args[0]), float(args[1]), args[2]

        def create_one(n: int) -> str:
            with transaction.atomic():
                return str(Order.objects.create(n=n).ref)

        committed = run_paced(rate, seconds, create_one, on_lane_exit=connections.close_all)
        with open(out, "w") as file:
            json.dump(committed, file)
        return {"emitted": len(committed)}
    if command == "rollback":
        refs = []
        try:
            with transaction.atomic():
                refs = [str(Order.objects.create(n=n).ref) for n in range(int(args[0]))]
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
        return {"rolled_back": refs}
    if command == "park":
        from django_webhook.tasks import fire_webhook

        count, low, high = int(args[0]), float(args[1]), float(args[2])
        webhook = Webhook.objects.get(active=True)
        draw = random.Random(7).uniform
        for n in range(count):
            # What a failed attempt leaves behind: the same task, sent again with a countdown.
            payload = json.dumps({"object": {"ref": str(uuid.uuid4()), "n": n}})
            fire_webhook.apply_async(
                (webhook.id, payload),
                {"topic": "shop.Order/create", "object_type": "shop.Order"},
                countdown=draw(low, high),
            )
        return {"parked": count}
    if command == "count":
        statuses = dict(
            WebhookEvent.objects.values_list("status").annotate(n=Count("id")).order_by()
        )
        return {"orders": Order.objects.count(), "events": statuses}
    raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])), flush=True)
