"""Pure policy functions: no ORM, no I/O (docs/architecture.md, "Layers").

Rule numbers (R1-R18) cited here are the sections of docs/rules.md.
"""
