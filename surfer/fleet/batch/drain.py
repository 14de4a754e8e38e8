"""A bounded pool of workers over a list of items: how a batch (and a QA run) runs its sessions."""

from __future__ import annotations

import asyncio
from typing import Any, Iterable


async def drain(items: Iterable[Any], concurrency: int, handle: Any, keep_going: Any, slots: Any = None) -> None:
    """`await handle(item)` for every item, `concurrency` at a time, while
    `keep_going()`; the workers are cancelled when this is. With `slots` (a
    resizable semaphore, concurrency.Slots), each item also holds a slot."""
    queue: asyncio.Queue[Any] = asyncio.Queue()
    for item in items:
        queue.put_nowait(item)

    async def one() -> bool:
        try:
            item = queue.get_nowait()
        except asyncio.QueueEmpty:
            return False
        await handle(item)
        return True

    async def worker() -> None:
        while keep_going():
            if slots is None:
                if not await one():
                    return
                continue
            async with slots:
                if not await one():
                    return

    workers = [asyncio.create_task(worker()) for _ in range(min(concurrency, queue.qsize()))]
    try:
        await asyncio.gather(*workers)
    finally:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
