"""`python -m mcp_memory` runs the same command line as `mcp-memory`."""

from mcp_memory.launch import main

if __name__ == "__main__":
    raise SystemExit(main())
