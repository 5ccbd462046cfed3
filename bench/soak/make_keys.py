"""``python -m bench.soak.make_keys PROJECT N``: N agents in PROJECT with a key each; prints the keys as JSON.

One process for all of them (``create_agent_key`` once per agent would start
Django fifty times); the same services as that command.
"""

from __future__ import annotations

import json
import sys


def main(project_slug: str, count: int) -> list[str]:
    import django

    django.setup()
    from governance.context import actor_scope
    from governance.services import agents, credentials

    keys = []
    with actor_scope("command:soak"):
        project = agents.ensure_project(project_slug)
        for number in range(count):
            agent = agents.ensure_agent(project, f"agent-{number:02d}")
            _, secret = credentials.create_agent_key(agent, name="soak", scopes=credentials.key_scopes(None))
            keys.append(secret)
    return keys


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]))))
