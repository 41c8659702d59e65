"""Which later observation a session summary names as an error's fix."""

from __future__ import annotations

from mcp import Client

from tests.conftest import call
from tests.test_summary_fixes import summary_of

ERROR = "TypeError: unsupported operand Decimal * float in compute_tax (shop/pricing.py)"


async def test_the_change_to_the_errors_file_is_its_fix_not_a_rerun_that_still_fails(client: Client) -> None:
    lines = await summary_of(
        client,
        [
            ("error", ERROR),
            ("file_change", "Changed compute_tax in shop/pricing.py to use a Decimal rate"),
            ("tool_use", "Re-ran pytest: test_tax_rounding passes now; test_stripe_webhook still fails with 401"),
        ],
    )

    assert f"- {ERROR} -> fixed: Changed compute_tax in shop/pricing.py to use a Decimal rate" in lines
    assert not [line for line in lines if "Decimal rate" in line and "->" not in line]  # not again under Also:


async def test_a_line_that_reports_a_failure_fixes_nothing(client: Client) -> None:
    lines = await summary_of(
        client,
        [
            ("error", ERROR),
            ("tool_use", "Re-ran pytest on compute_tax: test_tax_rounding passes; test_stripe_webhook still fails"),
            ("note", "Bumped the Decimal precision for compute_tax but it doesn't work"),
        ],
    )

    assert f"- {ERROR} -> unresolved" in lines


async def test_a_note_saying_the_error_no_longer_happens_is_still_a_fix(client: Client) -> None:
    lines = await summary_of(
        client,
        [
            ("error", ERROR),
            ("note", "Cast the rate in compute_tax; it no longer fails and the failing test passes"),
        ],
    )

    assert f"- {ERROR} -> fixed: Cast the rate in compute_tax; it no longer fails and the failing test passes" in lines


CYCLE = "ImportError: cannot import name 'Cart' from partially initialized module 'shop.models' (circular import)"
BROKE = "Broke the circular import by moving the Cart type hints under TYPE_CHECKING in shop/models.py"


async def test_an_observation_typed_fix_is_a_fix_whatever_verb_it_opens_with(client: Client) -> None:
    lines = await summary_of(
        client,
        [
            ("error", f"{CYCLE}, attempt 1"),
            ("error", f"{CYCLE}, attempt 2"),
            ("fix", BROKE),  # "broke" is a failure word, but the agent called it a fix
        ],
    )

    start = lines.index("Errors and fixes:") + 1
    assert lines[start : start + 3] == [
        f"- {CYCLE}, attempt 1 -> fixed: {BROKE}",
        f"- {CYCLE}, attempt 2 -> same fix as above",
        lines[start + 2],
    ]
    assert not lines[start + 2].startswith("- ")  # the fix is said once, and not again as a fix of its own


async def test_a_change_that_says_it_broke_something_is_still_no_fix(client: Client) -> None:
    lines = await summary_of(
        client,
        [
            ("error", CYCLE),
            ("file_change", "Tried moving Cart out of shop.models into shop.cart; it broke the checkout view"),
        ],
    )

    assert f"- {CYCLE} -> unresolved" in lines


async def test_reflect_names_a_fix_typed_fix_whatever_verb_it_opens_with(client: Client) -> None:
    for n in (1, 2):
        await call(client, "memory_observe", content=f"{CYCLE}, attempt {n}", type="error", session_id="s")
    await call(client, "memory_observe", content=BROKE, type="fix", session_id="s", end_session=True)

    result = await call(client, "memory_reflect", session_id="s")

    [anti] = result["anti_patterns"]
    assert anti["context"] == f"Seen 2 times. Fixed by: {BROKE}"
