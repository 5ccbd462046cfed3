"""Quick start: the Python client. Run with MEMORY_API_URL and MEMORY_API_KEY set."""

import os

from memoryadmin_client import Client

with Client(os.environ["MEMORY_API_URL"], os.environ["MEMORY_API_KEY"]) as memory:
    written = memory.write(principal="user-42", statement="Prefers email over phone calls.", key="contact")
    print("write:", written.status, "fact", written.fact.id if written.fact else None)

    recalled = memory.retrieve(principal="user-42", query="how should I contact them?", session="demo-1")
    print("tokens:", recalled.tokens_used, "of", recalled.token_budget)
    print(recalled.context)
