"""Query parameters of the API checked at the edge, and what the schema says about them.

Kept apart from the viewsets: the pagination class is named in settings and imported by DRF
while its own modules load.
"""

from __future__ import annotations

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination

#: The largest id or offset PostgreSQL's bigint holds; beyond it a query fails, not a lookup.
MAX_BIGINT = 2**63 - 1
ID_SCHEMA = {"type": "integer", "minimum": 1, "maximum": MAX_BIGINT}


def int_param(params, name: str, *, minimum: int, maximum: int) -> int | None:
    """The query parameter ``name`` as an int within bounds, None when absent; else 400."""
    raw = params.get(name)
    if raw is None:
        return None
    if not (raw.isascii() and raw.lstrip("-").isdigit()):
        raise ValidationError({name: f"{raw[:40]!r} is not an integer"})
    value = int(raw)
    if not minimum <= value <= maximum:
        raise ValidationError({name: f"must be between {minimum} and {maximum}"})
    return value


def enum_param(params, name: str, choices) -> str | None:
    """The query parameter ``name`` if it is one of ``choices``, None when absent; else 400."""
    raw = params.get(name)
    if raw is None:
        return None
    if raw not in choices:
        raise ValidationError({name: f"{raw[:40]!r} is not one of {', '.join(choices)}"})
    return raw


class BoundedPagination(LimitOffsetPagination):
    """Limit and offset checked at the edge: a bad one is 400, never a database error."""

    max_limit = 1000
    max_offset = MAX_BIGINT

    def get_limit(self, request):
        limit = int_param(request.query_params, self.limit_query_param, minimum=1,
                          maximum=self.max_limit)
        return self.default_limit if limit is None else limit

    def get_offset(self, request):
        offset = int_param(request.query_params, self.offset_query_param, minimum=0,
                           maximum=self.max_offset)
        return offset or 0

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        bounds = {
            self.limit_query_param: {"minimum": 1, "maximum": self.max_limit},
            self.offset_query_param: {"minimum": 0, "maximum": self.max_offset},
        }
        for parameter in parameters:
            parameter["schema"].update(bounds.get(parameter["name"], {}))
        return parameters


NO_NUL = r"^[^\x00]*$"


def document_errors(result, generator, request, public):
    """drf-spectacular postprocessing: the answers every operation can give besides its own.

    A parameter can be refused (400), an id in the path may name nothing (404), and strings
    never hold a NUL byte (PostgreSQL cannot store one; the middleware answers 400).
    """
    error = {"application/json": {"schema": {"type": "object"}}}
    for path, operations in result.get("paths", {}).items():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            parameters = operation.get("parameters", [])
            if parameters or "requestBody" in operation:
                responses.setdefault("400", {"description": "a parameter is invalid",
                                             "content": error})
            if "{" in path:
                responses.setdefault("404", {"description": "no such object", "content": error})
            for parameter in parameters:
                schema = parameter.get("schema", {})
                if schema.get("type") == "string" and "enum" not in schema:
                    schema.setdefault("pattern", NO_NUL)
                if parameter.get("in") == "path" and schema.get("type") == "integer":
                    schema.setdefault("minimum", 1)
                    schema.setdefault("maximum", MAX_BIGINT)
    return result
