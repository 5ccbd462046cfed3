"""The API's JSON parser: DRF's, with a bound on nesting (docs/operations.md, "Limits")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from governance.api.limits import MAX_JSON_DEPTH


class BoundedJSONParser(JSONParser):
    """Refuses JSON nested deeper than ``MAX_JSON_DEPTH`` with a 400.

    5,000 nested arrays made ``json.load`` raise RecursionError, which DRF
    does not catch (a 500); a body just under the interpreter's limit would
    parse and then break the first code that walks it recursively.
    """

    def parse(
        self, stream: IO[Any], media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError as exc:
            raise ParseError(_too_deep()) from exc
        if _depth_exceeds(data, MAX_JSON_DEPTH):
            raise ParseError(_too_deep())
        return data


def _too_deep() -> str:
    return f"The JSON body is nested too deeply (at most {MAX_JSON_DEPTH} levels)."


def _depth_exceeds(data: Any, limit: int) -> bool:
    # Iterative, so the check itself cannot overflow the stack.
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children = list(value.values())
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
