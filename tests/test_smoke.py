from mcp import Client

from tests.conftest import call


async def test_observe_then_recall(client: Client) -> None:
    saved = await call(
        client, "memory_observe", content="Fixed the flaky test in tests/test_db.py by adding a lock.", type="fix"
    )
    hits = await call(client, "memory_recall", query="flaky test lock")
    assert hits["hits"][0]["id"] == saved["id"]
