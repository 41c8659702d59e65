"""Random sequences of action creates and updates keep the graph's rules after every step: no cycle
through dependencies and children, a closed parent holds no open child, blocked_by lists exactly the
dependencies not done, roll-up counts match, and the frontier is the open unblocked leaves by
priority then age. A refused step is refused naming its field."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from mcp import Client

from tests.conftest import FakeClock, call

ALL = ["pending", "active", "blocked", "done", "cancelled"]
OPEN = {"pending", "active", "blocked"}
NAMES_A_FIELD = re.compile(r"^Error executing tool \w+: [\w.]+: ")

Action = dict[str, Any]


async def every_action(client: Client) -> dict[str, Action]:
    found: dict[str, Action] = {}
    offset: int | None = 0
    while offset is not None:
        page = await call(client, "memory_action_list", status=ALL, limit=100, offset=offset)
        found |= {a["id"]: a for a in page["actions"]}
        offset = page["next_offset"]
    return found


def children(actions: dict[str, Action], parent: Action) -> list[Action]:
    return [a for a in actions.values() if a["parent_id"] == parent["id"]]


def assert_acyclic(actions: dict[str, Action]) -> None:
    edges = {a["id"]: [*a["depends_on"], *(c["id"] for c in children(actions, a))] for a in actions.values()}
    done: set[str] = set()

    def walk(node: str, path: list[str]) -> None:
        for following in edges[node]:
            assert following not in path, f"cycle {[*path, following]}"
            if following not in done:
                walk(following, [*path, following])
        done.add(node)

    for node in edges:
        if node not in done:
            walk(node, [node])


def assert_rules_hold(actions: dict[str, Action], frontier: list[str]) -> None:
    for action in actions.values():
        kids = children(actions, action)
        assert action["children"] == len(kids)
        assert action["children_done"] == sum(c["status"] in ("done", "cancelled") for c in kids)
        if action["status"] not in OPEN:
            assert [c["id"] for c in kids if c["status"] in OPEN] == [], action
        elif action["parent_id"]:
            assert actions[action["parent_id"]]["status"] in OPEN, action
        assert action["blocked_by"] == [d for d in action["depends_on"] if actions[d]["status"] != "done"]
    assert_acyclic(actions)
    leaves = [
        a
        for a in actions.values()
        if a["status"] in ("pending", "active")
        and not a["blocked_by"]
        and not any(c["status"] in OPEN for c in children(actions, a))
    ]
    assert frontier == [a["id"] for a in sorted(leaves, key=lambda a: (-a["priority"], a["created_at"], a["id"]))]


def random_step(rng: random.Random, ids: list[str], step: int) -> tuple[str, dict[str, Any]]:
    if rng.random() < 0.3 or len(ids) < 3:
        args: dict[str, Any] = {
            "title": f"task {step}",
            "priority": rng.choice([0, 0, 1, 5, -1]),
            "status": rng.choice(["pending", "pending", "active", "blocked"]),
        }
        if ids and rng.random() < 0.5:
            args["parent_id"] = rng.choice(ids)
        if ids and rng.random() < 0.4:
            args["depends_on"] = rng.sample(ids, min(len(ids), rng.randint(1, 2)))
        return "memory_action_create", args
    args = {"id": rng.choice(ids)}
    pick = rng.random()
    if pick < 0.45:
        args["status"] = rng.choice(ALL)
    elif pick < 0.6:
        args["add_depends_on"] = [rng.choice(ids)]
    elif pick < 0.7:
        args["remove_depends_on"] = [rng.choice(ids)]
    elif pick < 0.85:
        args["parent_id"] = rng.choice(ids)
    elif pick < 0.9:
        args["clear_parent"] = True
    else:
        args["priority"] = rng.randint(-3, 3)
        if rng.random() < 0.5:
            args["status"] = rng.choice(ALL)
    return "memory_action_update", args


@pytest.mark.parametrize("seed", range(3))
async def test_random_changes_keep_the_action_graphs_rules(client: Client, clock: FakeClock, seed: int) -> None:
    rng = random.Random(seed)
    ids: list[str] = []
    refused_without_a_field = []
    for step in range(100):
        tool, args = random_step(rng, ids, step)
        result = await client.call_tool(tool, args)
        if result.is_error:
            text = " ".join(getattr(block, "text", "") for block in result.content)
            if not NAMES_A_FIELD.match(text):
                refused_without_a_field.append((tool, args, text))
        else:
            assert result.structured_content is not None
            action = result.structured_content["action"]
            ids += [action["id"]] if tool == "memory_action_create" else []
            if action["status"] in ("active", "done") and args.get("status") == action["status"]:
                assert action["blocked_by"] == [], (args, action)
        clock.advance(seconds=rng.randint(0, 5))
        frontier = await call(client, "memory_frontier", limit=100)
        try:
            assert_rules_hold(await every_action(client), [a["id"] for a in frontier["actions"]])
        except AssertionError as exc:
            raise AssertionError(f"after step {step}, {tool} {args}: {exc}") from exc
    assert refused_without_a_field == []
