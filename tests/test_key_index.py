"""keys.KeyIndex: the tokens whose answer the written keys can change.

Oracle: each token's bytes stepped through the key context one by one (keys.step returns None at
a byte that closes a repeated key), over every prefix of hand-written JSON texts. A token that
closes a repeated key must be a candidate (candidates) and pass may_close_repeat; and
may_close_repeat, the per-token form, must agree with membership in candidates exactly (the mask
code uses either, by how many tokens a row has).
"""

import pytest

from inferlab.constrain import keys

TOKENS = [b'"', b'a', b'"a"', b'a"', b'"a', b'":', b'","', b'"a","a"', b'a":"a"', b'"b":1,"a"', b'\\"', b'\\', b'a\\"',
          b'""', b'"""', b'b"', b'ab"', b'":{"a"', b'{"a"', b'[', b'"}', b',"a":', b'\\u0061"', b'x', b'"x"',
          b'":""', b'":"a"', b'":"a,"', b'":1,"a"', b'"},"a"', b'":["a","a"', b'":{"a":1,"a"', b'"]},{"a"', b'a":"b","a"']
TEXTS = [b'{"a":1,"b":{"a":2,"c":[{"a":3}]},"ab":"a"}', b'{"a\\"b":1,"\\u0061":2}', b'[{"a":"a"},{"a":1}]',
         b'{"":1,"a":{"":2}}']


def contexts():
    for text in TEXTS:
        ctx = keys.START
        for b in text:
            yield ctx
            ctx = keys.step(ctx, b)
            assert ctx is not None, text  # the texts repeat no key


def closes_repeat(ctx, data: bytes) -> bool:
    for b in data:
        try:
            ctx = keys.step(ctx, b)
        except ValueError:  # a bad escape (\\u then a non-hex digit): JSON text never has one
            return False
        if ctx is None:
            return True
    return False


@pytest.mark.parametrize("ctx", list(dict.fromkeys(contexts())))
def test_may_close_repeat_is_candidates_membership_and_covers_every_repeat(ctx):
    index = keys.KeyIndex(TOKENS)
    cands = index.candidates(ctx)
    cands = set(index.any_quote.tolist() if cands is None else cands.tolist())
    quoted = [t for t, data in enumerate(TOKENS) if b'"' in data]
    may = set(index.may_close_repeat(quoted, ctx))
    assert may == cands & set(quoted)
    for t, data in enumerate(TOKENS):
        assert index.has_quote[t] == (b'"' in data)
        if closes_repeat(ctx, data):
            assert index.has_quote[t] and t in cands and t in may, (ctx, data)
            # outside a key being written, a repeat closes only in a token holding a whole key
            assert ctx[1] is not None or index.holds_key[t], (ctx, data)


def test_holds_key_marks_the_tokens_with_a_whole_quoted_string():  # hand-checked
    index = keys.KeyIndex(TOKENS)
    held = {TOKENS[t] for t in range(len(TOKENS)) if index.holds_key[t]}
    assert b'"a"' in held and b'""' in held and b'a":"a"' in held and b'"},"a"' in held
    assert not held & {b'"', b'a"', b'"a', b'":', b'\\"', b'b"', b'{"a"'[:3], b'a', b'['}


def test_the_oracle_sees_repeats():  # the test above is only as good as closes_repeat
    ctx = keys.START
    for b in b'{"a":1,':
        ctx = keys.step(ctx, b)
    assert closes_repeat(ctx, b'"a"') and not closes_repeat(ctx, b'"b"')
    assert sum(closes_repeat(c, b'"a"') for c in contexts()) >= 3
