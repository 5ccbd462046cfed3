"""Integrations that meet agents where they live (docs/integrations.md).

Each one reaches the product only through the agent API, with the shipped client
(clients/python), so every rule of the service still holds: nothing here imports a
model, a service or a selector.
"""
