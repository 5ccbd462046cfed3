"""Quick start: the MCP server over stdio, driven by the SDK's client session.

Run from the repository root with MEMORY_API_URL and MEMORY_API_KEY set; it starts
``python manage.py mcp_server`` itself, as an MCP host (Claude Desktop, an IDE) would.
"""

import asyncio
import os
import sys

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent


def text(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


async def main() -> None:
    server = StdioServerParameters(
        command=sys.executable, args=["manage.py", "mcp_server"], env=dict(os.environ)
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for tool in (await session.list_tools()).tools:
            print(f"tool {tool.name}: {(tool.description or '').splitlines()[0]}")
        stored = await session.call_tool("remember", {"principal": "user-7", "statement": "Is vegetarian."})
        print("remember ->", text(stored))
        recalled = await session.call_tool("recall", {"principal": "user-7", "query": "dinner ideas"})
        print("recall ->", text(recalled))


asyncio.run(main())
