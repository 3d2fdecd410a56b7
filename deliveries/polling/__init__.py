"""Pull delivery: polling endpoints and catch-up feeds read with a key.

A polling endpoint (``mode`` poll) gets its deliveries from the same fan-out, with the
same filters, tenant, pins, erasure and retention as a push endpoint; they wait in the
``available`` state, which no owner claims, and its consumer reads them. Modules:
``positions`` and ``params`` (pure: the feed's position, the iterator, the request's
bounds), ``keys`` (the consumer's key), ``feed`` (reading and rendering messages),
``groups`` (consumer groups: commit, seek, leases), ``waiters`` (long polling),
``records`` (records and metrics), ``services`` (what the API, portal and admin call),
``views`` and ``urls`` (the consumer's API).

Nothing is re-exported here: import the module you need.
"""
