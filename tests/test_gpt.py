"""The numpy GPT against independent oracles: torch's attention and GELU, hand-derived values."""

import numpy as np
import pytest

from inferlab.errors import InferlabError
from inferlab.model import attention
from inferlab.model.config import GPTConfig
from inferlab.model.gpt import GPT, gelu, layer_norm, param_shapes

torch = pytest.importorskip("torch")


def tiny(**kw) -> GPTConfig:
    base = dict(vocab_size=61, d_model=32, n_heads=4, n_layers=2, context=40)
    base.update(kw)
    return GPTConfig(**base)


def test_causal_mask_by_hand():
    m = attention.causal_mask(2, 4)       # queries at absolute positions 2 and 3
    inf = -np.inf
    assert np.array_equal(m, np.array([[0, 0, 0, inf], [0, 0, 0, 0]], dtype=np.float32))
    assert m.dtype == np.float32


def test_softmax_hand_values():
    s = np.log(np.array([[1.0, 2.0, 5.0]], dtype=np.float32))
    np.testing.assert_allclose(attention.softmax(s), [[0.125, 0.25, 0.625]], rtol=1e-6)
    # -inf entries get probability 0, and huge logits do not overflow
    s = np.array([[1000.0, 1000.0, -np.inf]], dtype=np.float32)
    np.testing.assert_allclose(attention.softmax(s), [[0.5, 0.5, 0.0]])


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_mha_matches_torch_sdpa(n_kv_heads):
    rng = np.random.default_rng(0)
    t, d, h, dh = 9, 32, 4, 8
    x = rng.normal(size=(t, d)).astype(np.float32)
    w = rng.normal(0, 0.3, size=(d, (h + 2 * n_kv_heads) * dh)).astype(np.float32)
    b = rng.normal(0, 0.3, size=w.shape[1]).astype(np.float32)
    wo = rng.normal(0, 0.3, size=(h * dh, d)).astype(np.float32)
    bo = rng.normal(0, 0.3, size=d).astype(np.float32)
    ours = attention.mha(x, w, b, wo, bo, n_heads=h, n_kv_heads=n_kv_heads)

    qkv = torch.from_numpy(x) @ torch.from_numpy(w) + torch.from_numpy(b)
    q, k, v = qkv.split([h * dh, n_kv_heads * dh, n_kv_heads * dh], dim=1)
    q = q.view(t, h, dh).transpose(0, 1)
    k = k.view(t, n_kv_heads, dh).transpose(0, 1)
    v = v.view(t, n_kv_heads, dh).transpose(0, 1)
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    ref = o.transpose(0, 1).reshape(t, h * dh) @ torch.from_numpy(wo) + torch.from_numpy(bo)
    np.testing.assert_allclose(ours, ref.numpy(), atol=1e-5)
    assert ours.dtype == np.float32


def test_ops_materialise_their_outputs():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(5, 16)).astype(np.float32)
    w = rng.normal(size=(16, 3 * 16)).astype(np.float32)
    q, k, v = attention.qkv_proj(x, w, np.zeros(48, np.float32), 4, 4)
    s = attention.scores(q, k, attention.causal_mask(5, 5))
    a = attention.softmax(s)
    o = attention.av(a, v)
    out = attention.out_proj(o, rng.normal(size=(16, 16)).astype(np.float32), np.zeros(16, np.float32))
    for arr, shape in [(q, (4, 5, 4)), (k, (4, 5, 4)), (v, (4, 5, 4)), (s, (4, 5, 5)),
                       (a, (4, 5, 5)), (o, (4, 5, 4)), (out, (5, 16))]:
        assert arr.shape == shape and arr.flags.c_contiguous
    arrays = [x, w, q, k, v, s, a, o, out]
    for i, first in enumerate(arrays):           # every op wrote a fresh buffer, none is a view
        for second in arrays[i + 1:]:
            assert not np.shares_memory(first, second)


def test_gelu_matches_torch_tanh_gelu():
    x = np.linspace(-6, 6, 101, dtype=np.float32)
    ref = torch.nn.functional.gelu(torch.from_numpy(x), approximate="tanh").numpy()
    np.testing.assert_allclose(gelu(x), ref, atol=1e-6)
    assert gelu(np.float32(1.0)) == pytest.approx(0.841192, abs=1e-6)   # 0.5 (1 + tanh(0.79788 * 1.044715))


def test_layer_norm_by_hand():
    x = np.array([[1.0, 2.0, 3.0, 6.0]], dtype=np.float32)   # mean 3, variance (4 + 1 + 0 + 9) / 4 = 3.5
    y = layer_norm(x, np.full(4, 2.0, np.float32), np.full(4, 1.0, np.float32), 0.0)
    np.testing.assert_allclose(y, 2 * (x - 3) / np.sqrt(3.5) + 1, rtol=1e-6)


def test_param_shapes_gqa_and_count():
    c = tiny(n_kv_heads=2)
    shapes = param_shapes(c)
    assert shapes["h.0.attn.c_attn.w"] == (32, (4 + 2 * 2) * 8)
    # MiniGPT default: 512*64 + 256*64 + 4 * (12 * 64^2 + 13 * 64) + 2 * 64 parameters
    n = sum(int(np.prod(s)) for s in param_shapes(GPTConfig()).values())
    assert n == 512 * 64 + 256 * 64 + 4 * (12 * 64 * 64 + 13 * 64) + 2 * 64


def test_forward_is_causal_and_float32():
    model = GPT.init(tiny(), seed=3)
    a = model.forward([1, 2, 3, 4, 5, 6])
    b = model.forward([1, 2, 3, 9, 9, 9])
    assert a.shape == (6, 61) and a.dtype == np.float32
    np.testing.assert_array_equal(a[:3], b[:3])
    assert not np.allclose(a[3:], b[3:])


def test_tied_head():
    model = GPT.init(tiny(n_layers=1), seed=0)
    # With every block's output projections zeroed, the residual stream is wte + wpe, so the logits
    # are ln_f(wte[i] + wpe[0]) @ wte.T: the head is the embedding transposed.
    p = dict(model.params)
    for name in p:
        if name.endswith(("c_proj.w", "c_proj.b")):
            p[name] = np.zeros_like(p[name])
    model = GPT(model.config, p)
    x = p["wte"][7] + p["wpe"][0]
    x = (x - x.mean()) / np.sqrt(x.var() + 1e-5)
    np.testing.assert_allclose(model.forward([7])[0], x @ p["wte"].T, atol=1e-5)


def test_bad_inputs_raise_one_line_errors():
    model = GPT.init(tiny(), seed=0)
    with pytest.raises(InferlabError, match="context"):
        model.forward(list(range(41)))
    with pytest.raises(InferlabError, match="out of range"):
        model.forward([61])
    with pytest.raises(InferlabError, match="shape"):
        GPT(model.config, {**model.params, "wte": np.zeros((3, 3), np.float32)})
    with pytest.raises(InferlabError, match="kind"):
        model.new_cache("ring")
