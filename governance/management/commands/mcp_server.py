"""``manage.py mcp_server``: the memory tools for MCP clients (stdio, or Streamable HTTP).

The server talks to the agent API at ``MEMORY_API_URL`` (default: the address
``make run`` serves) with the shipped client; see docs/integrations.md.
"""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.integrations.mcp_server import Endpoint, build_server

DEFAULT_API_URL = "http://127.0.0.1:8000"


class Command(BaseCommand):
    help = (
        "Serve the memory tools (remember, recall, forget, what_do_you_know_about) over MCP. "
        "stdio by default, with the agent key from MEMORY_API_KEY; --http PORT serves Streamable "
        "HTTP at /mcp, where each caller sends its own agent key as a bearer token."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--http", type=int, metavar="PORT", help="Serve Streamable HTTP on this port.")
        parser.add_argument("--host", default="127.0.0.1", help="Address to listen on with --http.")

    def handle(self, *args: Any, **options: Any) -> None:
        url = os.environ.get("MEMORY_API_URL", DEFAULT_API_URL)
        key = os.environ.get("MEMORY_API_KEY") or None
        port = options["http"]
        if port is None:
            if not key:
                raise CommandError("Set MEMORY_API_KEY to an agent key (manage.py create_agent_key).")
            # stdout is the protocol channel: nothing else may be printed there.
            build_server(Endpoint(url, key)).run("stdio")
            return
        if not 0 < port < 65536:
            raise CommandError("--http takes a port number between 1 and 65535.")
        http_url = f"http://{options['host']}:{port}/mcp"
        self.stderr.write(f"MCP over Streamable HTTP at {http_url} (agent API: {url})")
        build_server(Endpoint(url, key), http_url=http_url).run(
            "streamable-http", host=options["host"], port=port
        )
