"""Help for the OpenAI endpoint served next to the page: a short text and a copyable `openai` snippet."""


def api_base(page_url: str | None) -> str:
    """The server's base URL from the page's own URL (the UI is mounted at the root, /v1 next to it)."""
    url = (page_url or "http://127.0.0.1:7860").split("#")[0].split("?")[0]
    return url.rstrip("/")


def api_markdown(base: str, model: str) -> str:
    return (f"This server also speaks the **OpenAI API** at `{base}/v1`, on the same engine as this page "
            f"(model `{model}`). `n` is real there too: one request, n independently seeded choices, "
            f"computed together. Routes: `GET /v1/models`, `POST /v1/chat/completions`, "
            f"`POST /v1/completions` (add `\"stream\": true` for server-sent events). "
            f"Interactive schema: [{base}/docs]({base}/docs).")


def api_snippet(base: str, model: str, key_required: bool = False) -> str:
    """Python for the `openai` client; a server with a key gets it from the environment, never from the page."""
    key = 'os.environ["NSAMPLE_API_KEY"]' if key_required else '"not-needed"'
    imports = "import os\n\n" if key_required else ""
    return f'''{imports}from openai import OpenAI

client = OpenAI(base_url="{base}/v1", api_key={key})
response = client.chat.completions.create(
    model="{model}",
    messages=[{{"role": "user", "content": "Write a haiku about the sea."}}],
    n=4,            # four choices, computed together
    seed=1234,      # choice i uses seed + i: rerun one with n=1, seed=1234 + i
    temperature=1.0,
    max_tokens=64,
)
for choice in response.choices:
    print(choice.index, choice.finish_reason, choice.message.content)
'''
