"""Whether llama.cpp's own grammar engine admits a text, token by token, through to EOS.

Built on the grammar sampler of the loaded SmolLM2 vocabulary: each token of the text is
offered alone; the grammar either leaves its logit alone (admitted) or masks it to -inf.
"""

from __future__ import annotations

import ctypes
import math
from typing import Any

import llama_cpp


def admits(llm: Any, grammar: str, text: str) -> bool:
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
    assert sampler, "llama.cpp could not parse the grammar"
    try:
        eos = llm.token_eos()
        tokens = llm.tokenize(text.encode(), add_bos=False, special=False) if text else []
        for token in [*tokens, eos]:
            data = (llama_cpp.llama_token_data * 1)(llama_cpp.llama_token_data(token, 0.0, 0.0))
            array = llama_cpp.llama_token_data_array(data, 1, -1, False)
            llama_cpp.llama_sampler_apply(sampler, ctypes.byref(array))
            if math.isinf(data[0].logit):
                return False
            if token != eos:
                llama_cpp.llama_sampler_accept(sampler, token)
        return True
    finally:
        llama_cpp.llama_sampler_free(sampler)
