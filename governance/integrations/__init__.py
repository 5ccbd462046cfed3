"""Integrations served by the product itself (docs/integrations.md): the MCP server.

The LangGraph store lives in the client package (memoryadmin_client.langgraph_store),
since it runs inside the agent's process.

Each one reaches the product only through the agent API, with the shipped client
(clients/python), so every rule of the service still holds: nothing here imports a
model, a service or a selector.
"""
