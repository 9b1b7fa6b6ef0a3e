"""A model that loads once, in a background thread, so a cold start never holds up the first
message: the detectors that run torch models (encoder, fine-tuned) load through this."""

from __future__ import annotations

import threading
from collections.abc import Callable


class BackgroundLoad:
    """Runs ``load`` once in a daemon thread on the first :meth:`start`; a failure is kept in
    :attr:`error` (the other detectors still run), never raised into the caller."""

    def __init__(self, load: Callable[[], None], name: str, *, done: bool = False) -> None:
        self._load = load
        self._name = name
        self._ready = threading.Event()
        self._lock = threading.Lock()
        self._started = done
        self.error: BaseException | None = None
        if done:
            self._ready.set()

    def start(self) -> None:
        with self._lock:
            if self._started:
                return
            self._started = True
        threading.Thread(target=self._run, name=self._name, daemon=True).start()

    def _run(self) -> None:
        try:
            self._load()
        except BaseException as exc:  # reported through .error
            self.error = exc
        finally:
            self._ready.set()

    @property
    def ready(self) -> bool:
        return self._ready.is_set() and self.error is None

    def wait(self) -> bool:
        """Start the load if needed and wait for it; whether it succeeded."""
        self.start()
        self._ready.wait()
        return self.error is None


class LoadsInBackground:
    """What a detector behind a :class:`BackgroundLoad` says of its load: it sets
    ``self._loader``; :meth:`warm` starts the load, :attr:`ready` and :attr:`error` report it."""

    _loader: BackgroundLoad

    def warm(self) -> None:
        """Load the model in a background thread (once); the detector answers after that."""
        self._loader.start()

    @property
    def error(self) -> BaseException | None:
        return self._loader.error

    @property
    def ready(self) -> bool:
        return self._loader.ready
