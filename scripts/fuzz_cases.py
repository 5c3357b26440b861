"""Hand-written fuzz cases: the bodies schemathesis never sends (it generates valid Unicode and ordinary numbers).

For every string and number field of both POST operations in the server's own /openapi.json (so a new field is
covered as soon as it is declared), a valid body with that one field replaced by:
* text with a lone surrogate, high or low ("\\ud800", "ok \\udfff"), and text with a NUL ("a\\u0000b"); a map's
  keys get the surrogate and the NUL too;
* a number too long for its type: 1e400, -1e400, 30-digit integers of both signs, 5,000 digits, NaN;
and every field, leaf or not, nested 600 levels deep (arrays, then objects) and 10,000 levels deep; plus an unknown
field and the whole body 10,000 levels deep. Bodies go out as bytes, JSON-escaped the way a client sends them
(json.dumps with ensure_ascii). Every answer must come within the timeout and be below 500.
"""
import json
from collections import Counter
from dataclasses import dataclass

import httpx

BASES = {"/v1/chat/completions": {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2},
         "/v1/completions": {"prompt": "Hi", "max_tokens": 2}}  # valid bodies, quick to answer
TEXTS = {"lone high surrogate": "\ud800", "lone low surrogate": "ok \udfff", "NUL": "a\u0000b"}
KEYS = {"lone surrogate key": "\ud800", "NUL key": "a\u0000b"}
NUMBERS = ["1e400", "-1e400", "123456789012345678901234567890", "-123456789012345678901234567890", "9" * 5000, "NaN"]
DEEP = {"600 nested arrays": "[" * 600 + "]" * 600, "600 nested objects": '{"a":' * 600 + "1" + "}" * 600,
        "10,000 nested arrays": "[" * 10_000 + "]" * 10_000}
RAW = "\u2063raw\u2063"  # stands for a raw JSON literal until the body is written out
MAX_FAILURES = 20  # failures listed in the report


@dataclass(frozen=True)
class Case:
    name: str
    path: str
    body: bytes


def cases(doc: dict) -> list[Case]:
    """Every case for the POST operations of `doc` (an OpenAPI document) that have a base body."""
    out = []
    for path, base in BASES.items():
        schema = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
        for param, kind, fill in slots(schema, doc, base):
            for name, value, raw in values(kind):
                out.append(Case(f"{path} {param} = {name}", path, body(fill(value), raw)))
        for name, raw in [("an unknown field, 10,000 nested arrays", DEEP["10,000 nested arrays"])]:
            out.append(Case(f"{path} {name}", path, body({**base, "zz_unknown": RAW}, raw)))
        out.append(Case(f"{path} the body as 10,000 nested arrays", path, DEEP["10,000 nested arrays"].encode()))
        out.append(Case(f"{path} the body as 10,000 nested objects", path,
                        ('{"a":' * 10_000 + "1" + "}" * 10_000).encode()))
    return out


def values(kind: str) -> list[tuple[str, object, str | None]]:
    """(name, value, raw JSON literal standing for RAW or None) for one kind of slot."""
    if kind == "string":
        return [(name, text, None) for name, text in TEXTS.items()]
    if kind == "key":
        return [(name, key, None) for name, key in KEYS.items()]
    if kind in ("number", "integer"):
        return [(literal if len(literal) < 40 else f"{len(literal)} digits", RAW, literal) for literal in NUMBERS]
    return [(name, RAW, raw) for name, raw in DEEP.items()]  # "field": any field, nested


def body(value, raw: str | None) -> bytes:
    text = json.dumps(value)  # ensure_ascii: a lone surrogate goes out as the escape "\ud800", as clients send it
    return (text.replace(json.dumps(RAW), raw) if raw is not None else text).encode()


def slots(schema: dict, doc: dict, base=None, depth: int = 0):
    """(parameter, kind, fill) for each field, string, number and map key under `schema`: fill(value) is a value of
    `schema`, built on `base` where `base` fits, with `value` in that place."""
    if depth > 8:
        return
    seen = set()
    for option in _options(schema, doc):
        kind = option.get("type")
        if kind in ("string", "number", "integer"):
            if kind not in seen:
                seen.add(kind)
                yield "", kind, lambda v: v
        elif kind == "object":
            start = base if isinstance(base, dict) else example(option, doc)
            for name, sub in (option.get("properties") or {}).items():
                yield name, "field", lambda v, name=name: {**start, name: v}
                for param, k, fill in slots(sub, doc, start.get(name), depth + 1):
                    yield _join(name, param), k, lambda v, name=name, fill=fill: {**start, name: fill(v)}
            extra = option.get("additionalProperties")
            if isinstance(extra, dict):  # a map: its keys, and a value under a key it takes
                yield "(key)", "key", lambda v, extra=extra: {v: example(extra, doc)}
                for param, k, fill in slots(extra, doc, None, depth + 1):
                    yield _join("1", param), k, lambda v, fill=fill: {"1": fill(v)}
        elif kind == "array" and isinstance(option.get("items"), dict):
            first = base[0] if isinstance(base, list) and base else None
            for param, k, fill in slots(option["items"], doc, first, depth + 1):
                yield _join("[0]", param), k, lambda v, fill=fill: [fill(v)]


def example(schema: dict, doc: dict):
    """A small valid value of `schema`: required properties only, enums' first value, minimums, and "text" for a
    string (a content part's type must be "text")."""
    option = next((o for o in _options(schema, doc) if o.get("type") != "null"), {})
    kind = option.get("type")
    if "enum" in option or "const" in option:
        return option.get("enum", [option.get("const")])[0]
    if kind == "object":
        props = option.get("properties") or {}
        return {name: example(props[name], doc) for name in option.get("required", []) if name in props}
    if kind == "array":
        return [example(option["items"], doc)] if isinstance(option.get("items"), dict) else []
    return {"string": "text", "integer": option.get("minimum", 1), "number": option.get("minimum", 1),
            "boolean": False}.get(kind)


def run(url: str, api_key: str | None = None, timeout: float = 60) -> dict:
    """Send every case to the server at `url`; the statuses, the responses >= 500 and the cases that failed."""
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
    statuses, failures = Counter(), []
    with httpx.Client(base_url=url, timeout=timeout, headers=headers) as client:
        doc = client.get("/openapi.json").raise_for_status().json()
        todo = cases(doc)
        for case in todo:
            try:
                status = client.post(case.path, content=case.body).status_code
            except httpx.HTTPError as e:
                status = f"no response ({type(e).__name__})"
            statuses[status] += 1
            if not isinstance(status, int) or status >= 500:
                failures.append({"case": case.name, "status": status})
    return {"requests": len(todo), "statuses": dict(sorted(statuses.items(), key=str)),
            "responses_5xx": sum(k for s, k in statuses.items() if isinstance(s, int) and s >= 500),
            "failures": len(failures), "failed_cases": failures[:MAX_FAILURES]}


def _options(schema: dict, doc: dict) -> list[dict]:
    """The alternatives of `schema` (anyOf / oneOf members, else itself), each with its $ref resolved."""
    schema = _resolve(schema, doc)
    return [_resolve(s, doc) for s in schema.get("anyOf") or schema.get("oneOf") or [schema]]


def _resolve(schema: dict, doc: dict) -> dict:
    while isinstance(schema, dict) and "$ref" in schema:
        node = doc
        for part in schema["$ref"].removeprefix("#/").split("/"):
            node = node[part]
        schema = node
    return schema if isinstance(schema, dict) else {}


def _join(name: str, param: str) -> str:
    return f"{name}.{param}" if param else name
