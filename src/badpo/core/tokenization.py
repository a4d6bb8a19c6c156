"""The tokenization settings: length limits and the chat-template switch. Apart from the encoding
(:mod:`badpo.engine.tokenize`, which needs torch) so that a run folder's record
(:mod:`badpo.run_folder.external`) and a config hold them without loading torch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from badpo.core.config import ConfigError

__all__ = ["DEFAULT_TOKENIZATION", "TokenizationConfig"]


@dataclass(frozen=True)
class TokenizationConfig:
    """Length limits and the chat-template switch (paper defaults: 384 / 1280 tokens)."""

    max_prompt_tokens: int = 384  # prompt tokens kept (from the left end: the last ones are kept)
    max_length: int = 1280  # prompt + response tokens; the response is cut from the right
    # auto: use the tokenizer's template when it has one; rendered: the prompts are text a chat
    # template already wrote, tokenized as they are without special tokens
    chat_template: Literal["auto", "always", "never", "rendered"] = "auto"

    def __post_init__(self) -> None:
        if not 0 < self.max_prompt_tokens < self.max_length:
            raise ConfigError(
                f"tokenization.max_prompt_tokens: need 0 < max_prompt_tokens ({self.max_prompt_tokens}) < "
                f"max_length ({self.max_length})"
            )


DEFAULT_TOKENIZATION = TokenizationConfig()
