"""What the benchmark scripts share: a private HF_HOME, and the plain-client baseline a scan
is measured against (every model's files fetched by as many threads as the scan has workers)."""

from __future__ import annotations

import os
import tempfile
import threading
from typing import Any


def private_hf_home() -> str:
    """Point HF_HOME (and XDG_CACHE_HOME, which a child stripped of HF_* falls back to) at a
    fresh temporary folder for this process and every child it starts."""
    home = tempfile.mkdtemp(prefix="slotdiff-bench-hf-")
    os.environ["HF_HOME"] = home
    os.environ["XDG_CACHE_HOME"] = os.path.join(home, "xdg")
    return home


def fetch_each(client: Any, url: str, ids: list[str], files: tuple[str, ...], workers: int) -> None:
    """GET ``files`` of every repo in ``ids`` from the server at ``url``, ``workers`` at a time."""
    todo = list(ids)
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                if not todo:
                    return
                rid = todo.pop()
            for name in files:
                client.get(f"{url}/{rid}/resolve/main/{name}").raise_for_status()

    threads = [threading.Thread(target=work) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
