"""The rules of mcp-memory, one module per concern; tools call these and nothing below them."""
