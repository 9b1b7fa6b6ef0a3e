"""Scale out: ``thinkloop worker`` processes execute the runs gateways queue (arq on Redis),
with PostgreSQL shared for sessions, run records and checkpoints.

* :mod:`~thinkloop.workers.fleet`    the gateway's side (``thinkloop serve --queue``)
* :mod:`~thinkloop.workers.worker`   the worker process (``thinkloop worker``)
* :mod:`~thinkloop.workers.executor` one worker's runs: leases, resumes, hand-backs
* :mod:`~thinkloop.workers.schedules` cron schedules in PostgreSQL, fired by the workers
* :mod:`~thinkloop.workers.bus`      the Redis keys both sides share
"""
