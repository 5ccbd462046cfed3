from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.context import actor_scope
from governance.services import agents, credentials


class Command(BaseCommand):
    help = "Create an API key for AGENT in PROJECT (both created if missing); prints the key once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project", help="Project slug")
        parser.add_argument("agent", help="Agent slug")
        parser.add_argument("--name", default="", help="A label for the key")
        parser.add_argument(
            "--config-source",
            action="store_true",
            help="Mark the agent as one that syncs configuration, so it may write source type 'config'.",
        )
        parser.add_argument(
            "--sources",
            default="",
            help="Comma-separated source types the agent may claim (default: every type an agent may "
            "claim; 'reviewer' is never allowed to agents).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        with actor_scope("command:create_agent_key"):
            project = agents.ensure_project(options["project"])
            agent = agents.ensure_agent(project, options["agent"])
            sources = [s.strip() for s in options["sources"].split(",") if s.strip()]
            if sources or options["config_source"]:
                try:
                    agent = agents.set_source_claims(
                        agent,
                        allowed=sources or None,
                        is_config_source=True if options["config_source"] else None,
                        reason="Set with create_agent_key",
                    )
                except agents.SourceClaimError as exc:
                    raise CommandError(str(exc)) from exc
            _, secret = credentials.create_agent_key(agent, name=options["name"])
        self.stdout.write(secret)
        self.stderr.write(f"Agent key for {agent} (shown once; store it now).")
