from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from governance.context import actor_scope
from governance.services import agents, credentials


class Command(BaseCommand):
    help = "Create an API key for AGENT in PROJECT (both created if missing); prints the key once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project", help="Project slug")
        parser.add_argument("agent", help="Agent slug")
        parser.add_argument("--name", default="", help="A label for the key")

    def handle(self, *args: Any, **options: Any) -> None:
        with actor_scope("command:create_agent_key"):
            project = agents.ensure_project(options["project"])
            agent = agents.ensure_agent(project, options["agent"])
            _, secret = credentials.create_agent_key(agent, name=options["name"])
        self.stdout.write(secret)
        self.stderr.write(f"Agent key for {agent} (shown once; store it now).")
