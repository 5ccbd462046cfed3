"""Governed memory for LLM agents: the Django app.

Rule numbers in comments and tests (R1-R18) are the sections of docs/rules.md;
the layers and the flow from write to retrieval event are in docs/architecture.md.
"""
