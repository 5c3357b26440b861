"""Links anyone can replay: a run's whole request in the page URL's query string, or, when that is too long for
a URL, a short id of the request kept server-side in a bounded store.

Choice i is seeded seed + i, so opening the link on the same model and settings gives the same cards. The link
holds the base seed the run actually used (the drawn one when the seed box was empty).
"""
import hashlib
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

from nsample.errors import InvalidRequest
from nsample.ui.run import MODES, Run, RunSpec, parse_schema

MAX_LINK_CHARS = 8000  # whole URL; longer ones are refused by common servers and proxies (8 KiB request lines)
STORE_RUNS = 256  # short links kept per server process, oldest dropped first
STORE_CHARS = 8_000_000  # and at most this many characters of requests in all
NUMBERS = {"n": int, "seed": int, "temperature": float, "top_p": float, "max_tokens": int}


@dataclass
class Link:
    """What a link asks for: the request, the model it was made on, and the card it points at (with a cut)."""

    spec: RunSpec
    model: str | None = None
    card: int | None = None
    cut: int | None = None


def link_params(run: Run) -> dict:
    """The query parameters of `run`'s link: its request with the seed it used, its model, the picked card."""
    spec = replace(run.spec, seed=run.cards[0].seed if run.cards else run.spec.seed)
    params = {"mode": spec.mode}
    if spec.mode == "chat":
        params |= {"system": spec.system, "user": spec.user}
    else:
        params["prompt"] = spec.prompt
    params |= {k: getattr(spec, k) for k in NUMBERS}
    params |= {"stop": list(spec.stop), "logprobs": int(spec.logprobs), "model": run.model}
    if spec.continuation:
        params["continuation"] = spec.continuation
    if spec.json_schema:
        params["json_schema"] = spec.json_schema
    picked = run.cut or ((run.ratings.best, None) if run.ratings.best is not None else None)
    if picked is not None:
        params["card"] = picked[0]
        if picked[1] is not None:
            params["cut"] = picked[1]
    return params


def link_url(page_url: str, params: dict) -> str:
    """The page's own address with `params` as its query string (anything after ? or # replaced)."""
    parts = urlsplit(page_url or "http://127.0.0.1:7860/")
    return urlunsplit((parts.scheme, parts.netloc, parts.path or "/", urlencode(params, doseq=True), ""))


def parse_link(query: str) -> Link | None:
    """The link in a page's query string (`?mode=...` or `?...` of link_params); None when it holds no run."""
    q = parse_qs((query or "").lstrip("?"), keep_blank_values=True)
    if "mode" not in q:
        return None
    one = {k: v[-1] for k, v in q.items()}
    if one["mode"] not in MODES:
        raise InvalidRequest(f"The link's mode must be one of {', '.join(MODES)}, got {one['mode']!r}.", param="mode")
    try:
        numbers = {k: kind(one[k]) for k, kind in NUMBERS.items() if one.get(k, "") != ""}
        card = int(one["card"]) if one.get("card", "") != "" else None
        cut = int(one["cut"]) if one.get("cut", "") != "" else None
    except ValueError as e:
        raise InvalidRequest(f"The link has a malformed number: {e}.", param="link") from None
    spec = RunSpec(mode=one["mode"], system=one.get("system", ""), user=one.get("user", ""),
                   prompt=one.get("prompt", ""), stop=tuple(s for s in q.get("stop", []) if s),
                   logprobs=one.get("logprobs", "0") in ("1", "true"), continuation=one.get("continuation", ""),
                   json_schema=parse_schema(one.get("json_schema", "")), **numbers)
    return Link(spec, one.get("model") or None, card, cut)


class LinkStore:
    """Requests too long for a URL, by a short content id; bounded in count and characters, oldest out first."""

    def __init__(self, max_runs: int = STORE_RUNS, max_chars: int = STORE_CHARS):
        self.max_runs, self.max_chars = max_runs, max_chars
        self._items: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, params: dict) -> str | None:
        """Keep `params` and return its id; None if it alone is larger than the whole store."""
        text = json.dumps(params, ensure_ascii=False, sort_keys=True)
        if len(text) > self.max_chars:
            return None
        key = hashlib.sha256(text.encode()).hexdigest()[:12]
        with self._lock:
            self._items[key] = text
            self._items.move_to_end(key)
            while len(self._items) > self.max_runs or sum(map(len, self._items.values())) > self.max_chars:
                self._items.popitem(last=False)
        return key

    def get(self, key: str) -> dict | None:
        with self._lock:
            text = self._items.get(key)
        return None if text is None else json.loads(text)

    def __len__(self) -> int:
        return len(self._items)


def make_link(page_url: str, run: Run, store: LinkStore) -> tuple[str | None, str]:
    """(url, note) for `run`: the request in the query string, or a short id kept by `store` when too long."""
    params = link_params(run)
    url = link_url(page_url, params)
    if len(url) <= MAX_LINK_CHARS:
        return url, f"Link to this run ({len(url)} characters): opening it runs the same request again."
    key = store.put(params)
    if key is None:
        return None, "This prompt is too long for a link, even a short one kept on this server."
    note = (f"The request is too long for a URL ({len(url)} characters), so this short link names a copy kept "
            f"on this server (the last {store.max_runs} such runs; a restart forgets them).")
    return link_url(page_url, {"run": key}), note


def resolve(query: str, store: LinkStore) -> Link | None:
    """The Link in a page's query string, looking a short `?run=<id>` up in `store`."""
    q = parse_qs((query or "").lstrip("?"))
    if "run" in q and "mode" not in q:
        params = store.get(q["run"][-1])
        if params is None:
            raise InvalidRequest("This short link's run is no longer kept on this server (it keeps the last "
                                 f"{store.max_runs}, and forgets them on a restart).", param="run")
        query = urlencode(params, doseq=True)
    return parse_link(query)


def model_note(link: Link, model: str) -> str:
    """What the page says when the link was made on another model: the cards will not be the same."""
    if link.model and link.model != model:
        return (f"This link was made on model `{link.model}`; this server runs `{model}`, so the cards will "
                "differ from the original run's.")
    return ""
