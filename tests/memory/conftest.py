"""The backend fixtures of tests/store (SQLite and PostgreSQL), shared without a copy.

tests/ is not a package, so the store conftest is loaded by path; its fixtures re-exported
here are registered for this directory as if defined in it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

_path = Path(__file__).resolve().parent.parent / "store" / "conftest.py"
_spec = importlib.util.spec_from_file_location("_thinkloop_store_backends", _path)
assert _spec is not None and _spec.loader is not None
_backends = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_backends)

backend = _backends.backend
store_url = _backends.store_url
store = _backends.store
