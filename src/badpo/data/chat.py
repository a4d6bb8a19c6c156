"""Chat-format rows: prompts and responses given as lists of ``{role, content}`` messages.

A conversation prompt is rendered with the tokenizer's chat template (:func:`render_chat`); a
response given as messages becomes its assistant's text, and a row without a prompt takes the
conversation before the chosen answer (TRL's conversational format). :class:`ChatRows` does this
for the rows of one source as :mod:`badpo.data.sources` reads them, and holds that every row has
the same format, so a mixed file is an error naming the row.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from badpo.core.config import ConfigError
from badpo.core.judgments import JudgmentError, describe_row

__all__ = ["TEXT_FIELDS", "ChatRows", "render_chat"]

TEXT_FIELDS = ("prompt", "chosen", "rejected", "response")  # may hold lists of chat messages


def render_chat(tokenizer, messages: list[dict[str, str]]) -> str:
    """The prompt a model sees before its answer: the conversation rendered with the tokenizer's
    chat template and ``add_generation_prompt=True``."""
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def _messages(value: Any) -> list[dict[str, str]] | None:
    """``[{role, content}, ...]`` with string roles and contents, or None if ``value`` is not a
    list (a list of anything else is an error for the caller to name)."""
    if not isinstance(value, list):
        return None
    out = []
    for message in value:
        if not (isinstance(message, Mapping) and isinstance(message.get("role"), str)
                and isinstance(message.get("content"), str)):
            raise ValueError(f"expected chat messages {{'role': str, 'content': str}}, got {message!r}")
        out.append({"role": message["role"], "content": message["content"]})
    if not out:
        raise ValueError("an empty list of messages")
    return out


class ChatRows:
    """Renders the chat-format fields of rows, and holds that every row has the same format.

    A conversation prompt becomes its rendered text (:func:`render_chat`); a response that is a
    list of messages becomes the text of its last message, which must be the assistant's (the
    messages before it, if any, must repeat the prompt, as in TRL's conversational format). A row
    whose ``prompt`` is missing takes the conversation before the chosen answer as its prompt.
    Attributes are then computed on the assistant's text alone.
    """

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.rendered: bool = False
        self.first: tuple | None = None  # label and format of the first row

    def render(self, label: tuple, row: Any) -> Any:
        if not isinstance(row, Mapping):
            return row
        where = describe_row(*label, row)
        parsed = {}
        for name in TEXT_FIELDS:
            try:
                parsed[name] = _messages(row.get(name))
            except ValueError as error:
                raise JudgmentError(f"{where}, field {name!r}: {error}", row=label[0],
                                    field=name) from None
        chat = parsed["prompt"] is not None or (row.get("prompt") is None and parsed["chosen"] is not None)
        self._check_format(label, where, chat)
        if not any(parsed.values()):
            return row
        out = dict(row)
        prompt = parsed["prompt"]
        if prompt is None and row.get("prompt") is None and parsed["chosen"] is not None:
            prompt = parsed["chosen"][:-1]  # TRL's implicit prompt: the conversation so far
            if not prompt:
                raise JudgmentError(f"{where}, field 'prompt': missing, and 'chosen' holds no "
                                    "conversation before its answer", row=label[0], field="prompt")
        context = prompt if prompt is not None else [{"role": "user", "content": row.get("prompt")}]
        for name in ("chosen", "rejected", "response"):
            if parsed[name] is not None:
                out[name] = _answer(parsed[name], context, where, name, label[0])
        if prompt is not None:
            out["prompt"] = self._render(prompt)
        return out

    def _render(self, messages: list[dict[str, str]]) -> str:
        if self.tokenizer is None:
            return json.dumps(messages, ensure_ascii=False)
        if not getattr(self.tokenizer, "chat_template", None):
            raise ConfigError(f"data: the prompts are chat messages but the tokenizer "
                              f"{getattr(self.tokenizer, 'name_or_path', '')!r} has no chat template")
        return render_chat(self.tokenizer, messages)

    def _check_format(self, label: tuple, where: str, chat: bool) -> None:
        if self.first is None:
            self.first = (label, chat)
            self.rendered = chat and self.tokenizer is not None
        elif self.first[1] != chat:
            kinds = {True: "chat messages", False: "text"}
            raise JudgmentError(f"{where}, field 'prompt': {kinds[chat]}, but row {self.first[0][0]} "
                                f"has {kinds[self.first[1]]}; one dataset holds one format",
                                row=label[0], field="prompt")


def _answer(messages: list[dict[str, str]], context: list[dict[str, str]], where: str, name: str,
            index: int) -> str:
    """The assistant's text of a response given as messages (module docstring of :class:`ChatRows`)."""
    *before, last = messages
    if last["role"] != "assistant":
        raise JudgmentError(f"{where}, field {name!r}: the last message is the {last['role']!r}'s, "
                            "not the assistant's answer", row=index, field=name)
    if before and before != context:
        raise JudgmentError(f"{where}, field {name!r}: the messages before the answer differ from "
                            "the prompt", row=index, field=name)
    return last["content"]
