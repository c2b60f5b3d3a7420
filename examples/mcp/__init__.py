"""A small MCP server for the example config: ``python -m examples.mcp.tickets``."""
