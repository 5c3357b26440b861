"""Turning a prompt (text, chat messages or token ids) into token ids."""
from dataclasses import dataclass

from nsample.errors import InvalidRequest, check_text

ROLES = ("system", "developer", "user", "assistant")


def message_text(content, index: int) -> str:
    """A message's content as text: a string, or a list of {"type": "text", "text": ...} parts."""
    if isinstance(content, str):
        return check_text(content, f"messages.[{index}].content")
    if isinstance(content, list) and content:
        texts = []
        for j, part in enumerate(content):
            if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                raise InvalidRequest(f"messages[{index}].content: only text parts are supported.",
                                     param=f"messages.[{index}].content", code="invalid_value")
            texts.append(check_text(part["text"], f"messages.[{index}].content.[{j}].text"))
        return "".join(texts)
    raise InvalidRequest(f"messages[{index}].content must be a string or a list of text parts.",
                         param=f"messages.[{index}].content", code="invalid_type")


def normalize_messages(messages) -> list[dict]:
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("'messages' must be a non-empty list.", param="messages", code="invalid_value")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise InvalidRequest(f"messages[{i}].role must be one of {', '.join(ROLES)}.",
                                 param=f"messages.[{i}].role", code="invalid_value")
        role = "system" if m["role"] == "developer" else m["role"]
        out.append({"role": role, "content": message_text(m.get("content"), i)})
    return out


@dataclass(frozen=True)
class Chat:
    """Chat messages whose final assistant message is continued (its turn left open) instead of answered by a new
    turn: vLLM's `continue_final_message`. A plain list of messages always gets a new assistant turn, as OpenAI's."""

    messages: list[dict]
    continue_final_message: bool = True


def is_chat(prompt) -> bool:
    return isinstance(prompt, Chat) or (isinstance(prompt, list) and bool(prompt) and isinstance(prompt[0], dict))


def chat_ids(tokenizer, messages: list[dict], continue_final: bool = False) -> list[int]:
    """The chat template's token ids: a new assistant turn, or the final assistant message continued."""
    if continue_final and messages[-1]["role"] != "assistant":
        raise InvalidRequest("'continue_final_message' needs the last message to be from the assistant.",
                             param="messages", code="invalid_value")
    open_turn = continue_final
    try:
        return tokenizer.apply_chat_template(messages, add_generation_prompt=not open_turn,
                                             continue_final_message=open_turn, tokenize=True)["input_ids"]
    except ValueError as e:  # a template that rewrites the final message cannot leave it open
        raise InvalidRequest(f"This model's chat template cannot continue the final assistant message: {e}",
                             param="messages", code="invalid_value") from None


def prompt_ids(tokenizer, prompt, vocab_size: int) -> list[int]:
    """Token ids for a string (no special tokens added), chat messages (chat template) or token ids."""
    if isinstance(prompt, str):
        ids = tokenizer(check_text(prompt, "prompt"), add_special_tokens=False)["input_ids"]
        if not ids and tokenizer.bos_token_id is not None:  # an empty text prompt starts from BOS
            ids = [tokenizer.bos_token_id]
    elif isinstance(prompt, Chat) or (isinstance(prompt, list) and prompt and all(isinstance(m, dict) for m in prompt)):
        if not tokenizer.chat_template:
            raise InvalidRequest("This model has no chat template; use a text prompt.", param="messages",
                                 code="invalid_value")
        chat = prompt if isinstance(prompt, Chat) else Chat(prompt, continue_final_message=False)
        ids = chat_ids(tokenizer, normalize_messages(chat.messages), chat.continue_final_message)
    elif isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool)
                                                     for t in prompt):
        bad = [t for t in prompt if not 0 <= t < vocab_size]
        if bad:
            raise InvalidRequest(f"Token id {bad[0]} is outside the vocabulary (0..{vocab_size - 1}).",
                                 param="prompt", code="invalid_value")
        ids = list(prompt)
    else:
        raise InvalidRequest("The prompt must be a string, a list of chat messages or a list of token ids.",
                             param="prompt", code="invalid_type")
    if not ids:
        raise InvalidRequest("The prompt is empty.", param="prompt", code="invalid_value")
    return ids
