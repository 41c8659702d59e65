"""Over stdio, a JSON-RPC batch and a request without a usable id are answered with an error, never dropped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests._servers import initialized_stdio_server
from tests.test_stdio import _answers, _call

NOTIFICATION = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def _save(request_id: int) -> dict[str, Any]:
    arguments = {"content": f"Batched note {request_id}."}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call"} | {
        "params": {"name": "memory_save", "arguments": arguments}
    }


def test_a_batch_is_refused_per_request_and_nothing_of_it_runs(tmp_path: Path) -> None:
    lines = [
        json.dumps(NOTIFICATION),
        json.dumps([_save(2), _save(3), NOTIFICATION]),
        json.dumps([NOTIFICATION]),  # no request in it: one answer, under a null id
        json.dumps([]),
        '{"jsonrpc": "2.0", "id": null, "method": "ping"}',  # a request without a usable id
        '{"jsonrpc": "2.0", "method": "notifications/progress", "params": "not an object"}',  # a notification: silence
        '{"jsonrpc": "2.0", "id": 7, "method": "ping"}',
        _call(8, "memory_export"),
    ]
    with initialized_stdio_server(tmp_path / "batch.db") as proc:
        assert proc.stdin is not None
        proc.stdin.write(("\n".join(lines) + "\n").encode())
        proc.stdin.flush()
        answers = _answers(proc, 7)

    assert [a.get("id") for a in answers] == [2, 3, None, None, None, 7, 8]
    refused = [a["error"] for a in answers[:5]]
    assert [e["code"] for e in refused] == [-32600] * 5
    batch_reason = "batches are not supported; send one request per message"
    assert [e["message"] for e in refused[:4]] == [batch_reason] * 4
    assert refused[4]["message"].startswith("could not read: ")
    assert answers[5]["result"] == {}
    exported = answers[6]["result"]
    assert not exported.get("isError"), exported
    assert "Batched note" not in json.dumps(exported)
