"""Which later observation a session summary names as an error's fix."""

from __future__ import annotations

from mcp import Client

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
