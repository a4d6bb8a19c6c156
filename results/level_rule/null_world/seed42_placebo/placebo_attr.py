"""A placebo attribute for issue 51: a fair coin per response text (SHA-256's first bit), unrelated
to the labels, the length and the markup, so that a learned theta on it perturbs the logit by
noise only."""

import hashlib


def coin(prompt: str, response: str) -> float:
    return float(hashlib.sha256(response.encode("utf-8")).digest()[0] & 1)
