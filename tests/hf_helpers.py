"""Small Hugging Face tokenizers and random-weight models for the hf tests, built offline.

byte_level_tokenizer(): GPT-2-style byte-level BPE (ByteLevel pre-tokenizer and decoder) with an
added non-special token. sentencepiece_tokenizer(): Llama-2-style BPE over "▁"-joined text with
<0xNN> byte-fallback tokens and the Replace/ByteFallback/Fuse/Strip decoder.
"""

from __future__ import annotations

import json

CORPUS = [
    '{"name":"Ana","age":31,"tags":["a","b"],"ok":true}',
    '{"verbo":"hablar","tiempo":"presente","persona":"yo","forma":"hablo"}',
    'hola mundo ñandú 12.5e-3 null false {"x":[1,2,3]}',
] * 40
SPECIALS = ["<unk>", "<s>", "</s>"]


def byte_level_tokenizer(vocab_size: int = 400):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    tok.add_tokens([AddedToken("hello world", normalized=False)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>")


def sentencepiece_tokenizer(vocab_size: int = 420):
    from tokenizers import Tokenizer, decoders, models, normalizers, trainers
    from transformers import PreTrainedTokenizerFast

    normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    trained = Tokenizer(models.BPE())
    trained.normalizer = normalizer
    trained.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=vocab_size - 259))
    model = json.loads(trained.to_str())["model"]
    vocab = {s: i for i, s in enumerate(SPECIALS + [f"<0x{b:02X}>" for b in range(256)])}
    for piece in sorted(model["vocab"], key=model["vocab"].get):
        vocab.setdefault(piece, len(vocab))
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    tok = Tokenizer(models.BPE(vocab, merges, byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    tok.normalizer = normalizer
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens(SPECIALS)
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                                   pad_token="</s>")
