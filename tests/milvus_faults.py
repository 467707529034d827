"""Fault injection for the reconnect tests: close a client's gRPC channel, stop a Lite server.

Both make the next call fail the way a dropped connection does, without waiting minutes:
a closed channel raises "Cannot invoke RPC on closed channel" / "Channel is closed", a stopped
Milvus Lite server refuses connections ("Fail connecting to server on 127.0.0.1:<port>").
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from llama_index_ext_advrag.milvus import AsyncReconnectingClient, ReconnectingClient


class Faults:
    """Breaks connections during a test and mends pymilvus' shared handlers afterwards, so
    later tests reusing a server connection do not start on a closed channel."""

    def __init__(self) -> None:
        self._broken: list[Any] = []

    def break_channel(self, client: ReconnectingClient) -> None:
        handler = client.wrapped._handler
        handler._channel.close()
        self._broken.append(handler)

    def break_store(self, *stores: Any) -> None:
        """Close the sync channel of each store (stores sharing one handler break together)."""
        for store in stores:
            self.break_channel(store.client)

    async def abreak_channel(self, client: AsyncReconnectingClient) -> None:
        handler = await client.wrapped._get_connection()
        await handler._async_channel.close()

    async def abreak_store(self, *stores: Any) -> None:
        for store in stores:
            await self.abreak_channel(store.aclient)

    @staticmethod
    def stop_lite_server(path: str) -> None:
        """Stop the in-process Milvus Lite 3 server of ``path`` as a crash would: it stays in
        milvus-lite's registry, so a client opening the file is handed its dead port."""
        from milvus_lite.server_manager import server_manager_instance

        server = server_manager_instance._servers[os.path.abspath(path)][0]
        server.stop(grace=0).wait()

    def mend(self) -> None:
        """Give broken handlers a new channel (a Lite server stopped meanwhile stays dead)."""
        for handler in self._broken:
            if handler._channel is not None:
                with contextlib.suppress(Exception):
                    handler.reconnect(timeout=5)
        self._broken.clear()
