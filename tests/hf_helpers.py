"""Small Hugging Face tokenizers for the hf and tokenizer tests, built offline with `tokenizers`.

byte_level_tokenizer(): GPT-2-style byte-level BPE (ByteLevel pre-tokenizer and decoder) with an
added non-special token. sentencepiece_tokenizer(): Llama-2-style BPE over "▁"-joined text with
<0xNN> byte-fallback tokens and the Replace/ByteFallback/Fuse/Strip decoder.
"""

from __future__ import annotations

import inspect
import json
import textwrap

from oracles import CORPUS

from inferlab.model.pretokenize import LLAMA3_PATTERN, QWEN_PATTERN

JSON_TEXTS = [
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
    tok.train_from_iterator(JSON_TEXTS, trainer)
    tok.add_tokens([AddedToken("hello world", normalized=False)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>")


def sentencepiece_tokenizer(vocab_size: int = 420):
    from tokenizers import Tokenizer, decoders, models, normalizers, trainers
    from transformers import PreTrainedTokenizerFast

    normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    trained = Tokenizer(models.BPE())
    trained.normalizer = normalizer
    trained.train_from_iterator(JSON_TEXTS, trainers.BpeTrainer(vocab_size=vocab_size - 259))
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


# --- tokenizer.json of the Llama-family formats (test_tokenizer_hf_families, test_generate_llama_cli) ---

SP = "\u2581"


# Training and test text: the shared multilingual corpus, real Python source and prose with code.
TRAIN = CORPUS + [inspect.getsource(json), inspect.getsource(textwrap), json.__doc__ or ""]


LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]


QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


SP_SPECIALS = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]"]


PLAIN_ADDED = "<tool_call>"          # a non-special added token (Qwen2.5 ships such)


def family_byte_level(split_pattern: str, specials: list[str], *, nfc: bool, ignore_merges: bool, bos: str | None):
    import tokenizers
    from tokenizers import decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = tokenizers.Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if nfc:
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(tokenizers.Regex(split_pattern), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1200, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(TRAIN, trainer)
    tok.add_tokens([tokenizers.AddedToken(PLAIN_ADDED, special=False, normalized=False)])
    if bos is not None:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, tok.token_to_id(bos))])
    return tok


def family_sentencepiece(style: str):
    """A Llama 2 / Mistral-style tokenizer: <unk> <s> </s>, 256 <0xNN> tokens, then a BPE learned on
    "▁word" pieces with a small alphabet, so that rare characters take the byte fallback."""
    import tokenizers
    from tokenizers import decoders, models, pre_tokenizers, processors, trainers

    learner = tokenizers.Tokenizer(models.BPE())
    learner.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SP, prepend_scheme="always", split=True)
    learner.train_from_iterator(TRAIN, trainers.BpeTrainer(vocab_size=900, limit_alphabet=70, show_progress=False))
    learned = json.loads(learner.to_str())["model"]
    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    order = SP_SPECIALS[:3] + byte_tokens + sorted(learned["vocab"], key=learned["vocab"].get)
    doc = json.loads(tokenizers.Tokenizer(models.BPE()).to_str())
    doc["model"].update(vocab={t: i for i, t in enumerate(order)}, merges=learned["merges"], byte_fallback=True,
                        fuse_unk=True, unk_token="<unk>")
    metaspace = {"type": "Metaspace", "replacement": SP, "prepend_scheme": "first", "split": False}
    if style == "llama2":
        doc["normalizer"] = {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": SP}, {"type": "Replace", "pattern": {"String": " "}, "content": SP}]}
        doc["pre_tokenizer"] = None
    else:
        doc["normalizer"] = None
        doc["pre_tokenizer"] = metaspace
    tok = tokenizers.Tokenizer.from_str(json.dumps(doc))
    tok.decoder = decoders.Sequence([decoders.Replace(SP, " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])        # both Llama 2's and Mistral's
    tok.add_special_tokens(SP_SPECIALS)                      # <unk> <s> </s> keep ids 0..2; [INST] appended
    tok.add_tokens([tokenizers.AddedToken(PLAIN_ADDED, special=False, normalized=False)])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", 1)])
    return tok


BUILDERS = {
    "llama3": lambda: family_byte_level(LLAMA3_PATTERN, LLAMA3_SPECIALS, nfc=False, ignore_merges=True,
                                  bos="<|begin_of_text|>"),
    "qwen2": lambda: family_byte_level(QWEN_PATTERN, QWEN_SPECIALS, nfc=True, ignore_merges=False, bos=None),
    "llama2": lambda: family_sentencepiece("llama2"),
    "mistral": lambda: family_sentencepiece("mistral"),
}
