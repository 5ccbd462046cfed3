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

        parser.add_argument(
            "--scopes",
            default="",
            help="Comma-separated scopes of the key: read, write, forget (default: all three).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        requested = [s.strip() for s in options["scopes"].split(",") if s.strip()]
        try:
            # Checked before anything is created: a typo must not leave a new project behind.
            scopes = credentials.key_scopes(requested or None)
        except credentials.ScopeError as exc:
            raise CommandError(str(exc)) from exc
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
            key, secret = credentials.create_agent_key(agent, name=options["name"], scopes=scopes)
        self.stdout.write(secret)
        self.stderr.write(
            f"Agent key for {agent} with scopes {', '.join(key.scopes)} (shown once; store it now)."
        )
