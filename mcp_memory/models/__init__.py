"""Pydantic models: stored records (`records`) and tool results (`results`)."""
