"""What a request's types cannot say: its text is valid Unicode, and it nests no deeper than MAX_DEPTH levels.

Every value of a parsed request is walked with its OpenAI parameter name ("messages.[0].content.[1].text",
"metadata", "stop.[2]"), so that a new field is covered as soon as it is declared. A string holding a lone surrogate
is a 400 (nsample.errors.check_text); so is a value nested deeper than MAX_DEPTH, which no real request needs (a JSON
schema 100 levels deep) and which would exhaust Python's recursion limit further on, in a copy or a dump (a 500).
JSON deeper than the parser itself takes is refused before this, as unreadable JSON (nsample.server.errors).
"""
from pydantic import BaseModel

from nsample.errors import InvalidRequest, check_text

MAX_DEPTH = 100  # levels of objects and arrays, the body itself being level 0
SCALARS = (bool, int, float, type(None))


def check_values(request: BaseModel) -> None:
    """Raise InvalidRequest (400 invalid_value, naming the parameter) at the first string with a lone surrogate or
    the first value deeper than MAX_DEPTH, in the order of the body; iterative, so any depth that parsed is walked."""
    stack: list[tuple[object, str | None, int]] = [(request, None, 0)]
    while stack:
        value, param, depth = stack.pop()
        if isinstance(value, str):
            check_text(value, param)
            continue
        if isinstance(value, SCALARS):
            continue
        if depth >= MAX_DEPTH:
            top = param.split(".")[0] if param else None
            raise InvalidRequest(f"Invalid '{top}': it nests deeper than {MAX_DEPTH} levels.", param=top,
                                 code="invalid_value")
        stack.extend(reversed([(v, name, depth + 1) for name, v in _children(value, param)]))


def _children(value, param: str | None) -> list[tuple[str, object]]:
    """(parameter name, value) of each member of a model, object or array; an object's keys are checked here."""
    if isinstance(value, BaseModel):
        fields = [(f.alias or name, getattr(value, name)) for name, f in type(value).model_fields.items()]
        return [(_key(param, k), v) for k, v in fields + list((value.__pydantic_extra__ or {}).items())]
    if isinstance(value, dict):
        for k in value:
            check_text(str(k), param, "a key")
        return [(_key(param, str(k)), v) for k, v in value.items()]
    if isinstance(value, (list, tuple)):
        return [(f"{param}.[{i}]", v) for i, v in enumerate(value) if not isinstance(v, SCALARS)]
    return []


def _key(param: str | None, key: str) -> str:
    return key if param is None else f"{param}.{key}"
