"""The expressions the console search matches on, shared by the indexes and the queries.

An expression index is used only when the query repeats its expression
exactly, so both come from here (docs/console.md, "Finding anything"):

- full text: ``to_tsvector('simple', text)``. The 'simple' configuration
  lower-cases and splits on non-letters without stemming or stop words, so a
  statement in any language is found by any of its words;
- substring: ``UPPER(text) LIKE UPPER('%…%')``, which is what Django's
  ``icontains`` sends, served by a pg_trgm GIN index on ``UPPER(text)``
  (part of a word, an id such as "carol@", a word the full text split
  differently).
"""

from __future__ import annotations

from django.contrib.postgres.indexes import GinIndex, OpClass
from django.contrib.postgres.search import SearchQuery, SearchVector
from django.db.models.functions import Upper

CONFIG = "simple"


def search_vector(field: str) -> SearchVector:
    return SearchVector(field, config=CONFIG)


def search_query(text: str) -> SearchQuery:
    # websearch syntax never fails to parse: quotes, "or" and "-word" work, stray symbols are ignored.
    return SearchQuery(text, config=CONFIG, search_type="websearch")


def full_text_index(field: str, name: str) -> GinIndex:
    return GinIndex(search_vector(field), name=name)


def substring_index(field: str, name: str) -> GinIndex:
    return GinIndex(OpClass(Upper(field), name="gin_trgm_ops"), name=name)
