"""A wake-up signal from the driver thread to long-polling lease requests on the event loop."""

from __future__ import annotations

import asyncio


class JobSignal:
    """``notify()`` from any thread wakes every coroutine in ``wait()``; waiters also time out,
    so jobs queued by another replica are found by the periodic re-check."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event: asyncio.Event | None = None

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._event = asyncio.Event()

    def notify(self) -> None:
        if self._loop is not None and self._event is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._event.set)

    async def wait(self, timeout: float) -> None:
        if self._event is None:
            await asyncio.sleep(timeout)
            return
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
        except TimeoutError:
            pass
        finally:
            self._event.clear()
