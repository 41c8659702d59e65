"""Stdin for the stdio transport: lines read off the event loop, and every line answered.

The SDK's stdio reader hands the server an exception for a line its JSON parser refuses (a lone
UTF-16 surrogate escape such as `\\udc00`, which JavaScript clients can send, or arguments
nested a few hundred levels deep), and the server drops it: the client waits for an answer that
never comes. Here such a line is read again by Python's own parser: with lone surrogates made
U+FFFD it is served, and a request that still cannot be read gets a JSON-RPC error under its own
id, so the caller hears why. A batch (a JSON array, which the SDK cannot serve) gets an error for
each request in it, and a request whose id is not a string or an integer (which the SDK would take
for a notification) one under a null id; none of them runs.
"""

from __future__ import annotations

import codecs
import json
import logging
import os
import sys
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

import anyio
import anyio.lowlevel
import mcp_types as types
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

logger = logging.getLogger(__name__)


class StdinLines:
    """Lines of stdin read by a daemon thread, so that stopping never waits on a blocked read.

    The SDK reads stdin in an anyio worker thread, which cancellation cannot interrupt: a server
    whose parent died (or that got SIGTERM) with stdin still open would never exit. The lines
    handed out and not yet matched to what the SDK made of them wait in `pending`.
    """

    def __init__(self) -> None:
        self._send, self._receive = anyio.create_memory_object_stream[str](64)
        self._token = anyio.lowlevel.current_token()
        self._fd = sys.stdin.fileno()
        self.pending: deque[str] = deque()
        threading.Thread(target=self._pump, name="mcp-memory-stdin", daemon=True).start()

    def _pump(self) -> None:
        # Raw os.read, not sys.stdin: a daemon thread blocked inside a buffered reader at exit
        # makes the interpreter abort ("could not acquire lock ... at interpreter shutdown").
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pending = ""
        try:
            while chunk := os.read(self._fd, 65536):
                pending += decoder.decode(chunk)
                *lines, pending = pending.split("\n")
                for line in lines:
                    anyio.from_thread.run(self._send.send, line + "\n", token=self._token)
            if pending.strip():
                anyio.from_thread.run(self._send.send, pending, token=self._token)
            anyio.from_thread.run_sync(self._send.close, token=self._token)
        except Exception:  # the event loop is gone: the server is shutting down anyway
            return

    def __aiter__(self) -> StdinLines:
        return self

    async def __anext__(self) -> str:
        try:
            line = await self._receive.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None
        self.pending.append(line)
        return line


class AnsweredMessages:
    """The SDK's stream of messages read from stdin, with the lines it could not parse read again
    (and served) or answered with an error, rather than dropped.

    The SDK turns each line into exactly one item, in order, so the oldest line still pending is
    the one the item at hand came from.
    """

    def __init__(
        self,
        inner: ReadStream[SessionMessage | Exception],
        lines: StdinLines,
        replies: WriteStream[SessionMessage],
        before_end: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._inner = inner
        self._lines = lines
        self._replies = replies
        self._before_end = before_end

    @property
    def last_context(self) -> Any:
        """The sender's context of the last item, as the SDK's own stream keeps it."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item = await self._inner.receive()
            line = self._lines.pending.popleft() if self._lines.pending else ""
            if not isinstance(item, Exception):
                # The SDK's parser drops an id it cannot use (null, true, 1.5) and takes the request for a notification.
                if isinstance(item.message, types.JSONRPCNotification) and _has_id(_loads(line)):
                    await self._refuse_bad_id()
                    continue
                return item
            repaired = await self._reread(line, item)
            if repaired is not None:
                return repaired

    async def _reread(self, line: str, error: Exception) -> SessionMessage | None:
        """The message of a line the SDK refused, read by Python's parser; None once answered."""
        if not line.strip():
            return None  # a blank line between messages
        message = _loads(line)
        if message is not None:
            try:
                valid = types.jsonrpc_message_adapter.validate_python(_without_lone_surrogates(message), by_name=False)
            except (ValueError, RecursionError) as exc:
                error = exc
            else:
                if isinstance(valid, types.JSONRPCNotification) and _has_id(message):
                    await self._refuse_bad_id()
                    return None
                return SessionMessage(valid)
        if isinstance(message, list):
            await self._refuse_batch(message)
            return None
        request_id = _request_id(message)
        reason = _reason(error)
        logger.warning("could not read a message from stdin (request id %r): %s", request_id, reason)
        # JSON-RPC answers a parse error or an invalid request even without an id (under a null one);
        # only a notification (a method and no id) and a response (to us) are never answered.
        if message is None or request_id is not None or not _unanswered(message):
            code = types.PARSE_ERROR if message is None else types.INVALID_REQUEST
            await self._answer(request_id, code, f"could not read: {reason}")
        return None

    async def _refuse_bad_id(self) -> None:
        """Answer a request whose id is neither a string nor an integer, which the SDK reads as a notification."""
        logger.warning("could not read a message from stdin: a request id that is not a string or an integer")
        await self._answer(None, types.INVALID_REQUEST, "could not read: a request id must be a string or an integer")

    async def _refuse_batch(self, batch: list[Any]) -> None:
        """Answer a JSON-RPC batch, which the SDK cannot serve, with an error for each request in it (nothing
        of it runs), or with one error under a null id when none has an id, so that no caller waits forever."""
        ids: list[str | int | None] = [request_id for item in batch if (request_id := _request_id(item)) is not None]
        logger.warning("refused a JSON-RPC batch of %d message(s) from stdin (request ids %r)", len(batch), ids)
        reason = "batches are not supported; send one request per message"
        for request_id in ids or [None]:
            await self._answer(request_id, types.INVALID_REQUEST, reason)

    async def _answer(self, request_id: str | int | None, code: int, message: str) -> None:
        """Send the client a JSON-RPC error under `request_id` (null when there is none)."""
        answer = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))
        await self._replies.send(SessionMessage(answer))

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> AnsweredMessages:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            # The end of stdin ends the session, and the SDK then cancels what is still running:
            # a client that writes its requests and closes stdin (as the spec's shutdown begins)
            # would lose calls the server had read whole. They are answered first.
            # Once: the SDK may read on after the end (it does when stdin closes before any request).
            ending, self._before_end = self._before_end, None
            if ending is not None:
                await ending()
            raise StopAsyncIteration from None

    async def __aenter__(self) -> AnsweredMessages:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc_val: BaseException | None, exc_tb: TracebackType | None
    ) -> bool | None:
        await self.aclose()
        return None


def _without_lone_surrogates(value: Any) -> Any:
    """`value` with every lone UTF-16 surrogate in its strings made U+FFFD (pairs are joined)."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [_without_lone_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_without_lone_surrogates(k): _without_lone_surrogates(v) for k, v in value.items()}
    return value


def _request_id(message: Any) -> str | int | None:
    """The id of a request (or of what claims to be one: no method, but no result or error either)."""
    if not isinstance(message, dict) or "result" in message or "error" in message:
        return None
    request_id = message.get("id")
    return request_id if isinstance(request_id, str | int) and not isinstance(request_id, bool) else None


def _loads(line: str) -> Any:
    """The JSON value of a line, or None when Python's parser cannot read it either."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


def _has_id(message: Any) -> bool:
    """Whether `message` is an object with an id member (a notification has none, not even null)."""
    return isinstance(message, dict) and "id" in message


def _unanswered(message: Any) -> bool:
    """Whether JSON-RPC leaves `message` unanswered even when it is invalid: a notification (a method
    and no id) or a response to the server's own request."""
    if not isinstance(message, dict):
        return False
    return ("method" in message and "id" not in message) or "result" in message or "error" in message


def _reason(exc: Exception) -> str:
    """What was wrong with a message, in a line."""
    if isinstance(exc, ValidationError) and exc.errors():
        return str(exc.errors()[0]["msg"])
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
