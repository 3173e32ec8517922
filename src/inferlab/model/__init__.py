"""The MiniGPT engine: tokenizer, numpy GPT, KV cache, generate with a mask hook, tracing."""
