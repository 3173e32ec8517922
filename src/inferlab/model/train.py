"""Training MiniGPT in numpy: a hand-written backward pass, AdamW, a cosine schedule.

The forward here is the engine's GPT forward (model/gpt.py) batched over sequences (B, T) and
keeping the activations the backward pass needs; tests/test_train.py checks that its logits equal
GPT.forward's and its gradients equal finite differences in float64.

Every layer has a forward that returns (output, cache) and a backward that maps d(output) to
d(inputs) and d(parameters): embedding + position embedding, layer norm, causal multi-head
attention (MHA; GQA is not trained here), GELU MLP, final layer norm, the tied LM head and a
masked cross-entropy.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from inferlab.errors import InferlabError
from inferlab.model.config import GPTConfig
from inferlab.model.attention import causal_mask, softmax
from inferlab.model.gpt import GPT

_GELU_C = math.sqrt(2.0 / math.pi)


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 3000
    batch_size: int = 32           # sequences per step
    lr: float = 3e-3               # peak; a 64-wide model tolerates a high rate (nanoGPT's shakespeare-char uses 1e-3 at 6x the width)
    min_lr_ratio: float = 0.1      # cosine decays to lr * this (Chinchilla / nanoGPT habit)
    warmup: int = 100              # linear warm-up steps: Adam's second moment is noisy at first
    weight_decay: float = 0.01     # decoupled (AdamW), matrices only: decaying LN gains and biases only hurts
    beta1: float = 0.9
    beta2: float = 0.98
    eps: float = 1e-8
    grad_clip: float = 1.0         # global L2 norm
    seed: int = 0


# ---------------------------------------------------------------- layers: forward and backward

def layer_norm_forward(x, g, b, eps):
    """(..., d) -> (..., d), cache."""
    mean = x.mean(axis=-1, keepdims=True)                              # (..., 1)
    var = x.var(axis=-1, keepdims=True)                                # (..., 1)
    rstd = 1.0 / np.sqrt(var + eps)                                    # (..., 1)
    xhat = (x - mean) * rstd                                           # (..., d)
    return xhat * g + b, (xhat, rstd, g)


def layer_norm_backward(dy, cache):
    """dy (..., d) -> dx (..., d), dg (d,), db (d,)."""
    xhat, rstd, g = cache
    d = xhat.shape[-1]
    flat = (-1, d)
    dg = (dy * xhat).reshape(flat).sum(axis=0)                         # (d,)
    db = dy.reshape(flat).sum(axis=0)                                  # (d,)
    dxhat = dy * g                                                     # (..., d)
    # d/dx of (x - mean) * rstd: the mean and the variance both depend on every x in the row.
    dx = rstd * (dxhat - dxhat.mean(axis=-1, keepdims=True)
                 - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))  # (..., d)
    return dx, dg, db


def gelu_forward(x):
    """GELU, tanh approximation (GPT-2's gelu_new), elementwise; cache keeps tanh for the backward."""
    t = np.tanh(_GELU_C * (x + 0.044715 * (x * x * x)))             # x*x*x: float32 x ** 3 goes through pow (gpt.gelu)
    return 0.5 * x * (1.0 + t), (x, t)


def gelu_backward(dy, cache):
    x, t = cache
    du_dx = _GELU_C * (1.0 + 3 * 0.044715 * x * x)
    return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du_dx)


def linear_forward(x, w, b):
    """(..., n_in) @ (n_in, n_out) + (n_out,) -> (..., n_out); the cache is the input."""
    return x @ w + b, x


def linear_backward(dy, x, w):
    """dy (..., n_out), x (..., n_in), w (n_in, n_out) -> dx (..., n_in), dw, db."""
    n_in, n_out = w.shape
    x2, dy2 = x.reshape(-1, n_in), dy.reshape(-1, n_out)               # (N, n_in), (N, n_out)
    return dy @ w.T, x2.T @ dy2, dy2.sum(axis=0)


def attention_forward(x, w, b, w_o, b_o, n_heads):
    """Causal multi-head attention, x (B, T, d) -> (B, T, d), cache; the engine's mha, batched."""
    bsz, t, d = x.shape
    d_head = d // n_heads
    qkv, _ = linear_forward(x, w, b)                                   # (B, T, 3 d)
    # Same column layout as attention.qkv_proj: [q heads | k heads | v heads], each (H, d_head).
    q, k, v = qkv.reshape(bsz, t, 3, n_heads, d_head).transpose(2, 0, 3, 1, 4)  # 3 x (B, H, T, d_head)
    scale = 1.0 / math.sqrt(d_head)
    s = (q @ k.swapaxes(-1, -2)) * scale + causal_mask(t, t)          # (B, H, T, T)
    p = softmax(s)                                                     # (B, H, T, T)
    o = p @ v                                                          # (B, H, T, d_head)
    concat = o.transpose(0, 2, 1, 3).reshape(bsz, t, d)                # (B, T, d)
    y, _ = linear_forward(concat, w_o, b_o)                            # (B, T, d)
    return y, (x, q, k, v, p, concat, scale)


def attention_backward(dy, cache, w, w_o):
    """dy (B, T, d) -> dx (B, T, d), dw, db, dw_o, db_o."""
    x, q, k, v, p, concat, scale = cache
    bsz, n_heads, t, d_head = q.shape
    dconcat, dw_o, db_o = linear_backward(dy, concat, w_o)            # (B, T, d)
    do = dconcat.reshape(bsz, t, n_heads, d_head).transpose(0, 2, 1, 3)  # (B, H, T, d_head)
    dp = do @ v.swapaxes(-1, -2)                                       # (B, H, T, T)
    dv = p.swapaxes(-1, -2) @ do                                       # (B, H, T, d_head)
    # Softmax Jacobian-vector product; masked entries have p = 0, so they get no gradient.
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))               # (B, H, T, T)
    dq = (ds @ k) * scale                                              # (B, H, T, d_head)
    dk = (ds.swapaxes(-1, -2) @ q) * scale                             # (B, H, T, d_head)
    dqkv = np.stack([dq, dk, dv]).transpose(1, 3, 0, 2, 4).reshape(bsz, t, 3 * n_heads * d_head)  # (B, T, 3 d)
    dx, dw, db = linear_backward(dqkv, x, w)
    return dx, dw, db, dw_o, db_o


# ---------------------------------------------------------------- the model

def forward(params: dict, config: GPTConfig, ids: np.ndarray):
    """ids (B, T) -> logits (B, T, V), caches for `backward`. Same maths as GPT.forward per row."""
    _check_trainable(config)
    c, p = config, params
    bsz, t = ids.shape
    if t > c.context:
        raise InferlabError(f"{t} positions exceed the model's context of {c.context} tokens")
    x = p["wte"][ids] + p["wpe"][:t]                                   # (B, T, d)
    caches = []
    for i in range(c.n_layers):
        h = f"h.{i}."
        a, ln1 = layer_norm_forward(x, p[h + "ln_1.g"], p[h + "ln_1.b"], c.ln_eps)   # (B, T, d)
        y, att = attention_forward(a, p[h + "attn.c_attn.w"], p[h + "attn.c_attn.b"],
                                   p[h + "attn.c_proj.w"], p[h + "attn.c_proj.b"], c.n_heads)
        x = x + y                                                      # (B, T, d)
        m, ln2 = layer_norm_forward(x, p[h + "ln_2.g"], p[h + "ln_2.b"], c.ln_eps)   # (B, T, d)
        u, _ = linear_forward(m, p[h + "mlp.c_fc.w"], p[h + "mlp.c_fc.b"])          # (B, T, d_ff)
        g, gel = gelu_forward(u)                                                     # (B, T, d_ff)
        z, _ = linear_forward(g, p[h + "mlp.c_proj.w"], p[h + "mlp.c_proj.b"])      # (B, T, d)
        x = x + z
        caches.append((ln1, att, ln2, m, gel, g))
    xf, lnf = layer_norm_forward(x, p["ln_f.g"], p["ln_f.b"], c.ln_eps)              # (B, T, d)
    logits = xf @ p["wte"].T                                                         # (B, T, V), tied head
    return logits, (ids, caches, lnf, xf)


def backward(params: dict, config: GPTConfig, dlogits: np.ndarray, cache) -> dict[str, np.ndarray]:
    """dlogits (B, T, V) -> gradients, one per parameter, same names and shapes."""
    c, p = config, params
    ids, caches, lnf, xf = cache
    bsz, t = ids.shape
    v, d = p["wte"].shape
    grads = {name: np.zeros_like(value) for name, value in p.items()}
    # The head is tied: wte gets a gradient from the logits and (below) from the embedding lookup.
    grads["wte"] += dlogits.reshape(-1, v).T @ xf.reshape(-1, d)       # (V, d)
    dx = dlogits @ p["wte"]                                            # (B, T, d)
    dx, grads["ln_f.g"], grads["ln_f.b"] = layer_norm_backward(dx, lnf)
    for i in reversed(range(c.n_layers)):
        h = f"h.{i}."
        ln1, att, ln2, m, gel, g = caches[i]
        dg, grads[h + "mlp.c_proj.w"], grads[h + "mlp.c_proj.b"] = linear_backward(dx, g, p[h + "mlp.c_proj.w"])
        du = gelu_backward(dg, gel)                                                   # (B, T, d_ff)
        dm, grads[h + "mlp.c_fc.w"], grads[h + "mlp.c_fc.b"] = linear_backward(du, m, p[h + "mlp.c_fc.w"])
        dres, grads[h + "ln_2.g"], grads[h + "ln_2.b"] = layer_norm_backward(dm, ln2)
        dx = dx + dres                                                 # residual: both paths
        da, grads[h + "attn.c_attn.w"], grads[h + "attn.c_attn.b"], grads[h + "attn.c_proj.w"], \
            grads[h + "attn.c_proj.b"] = attention_backward(dx, att, p[h + "attn.c_attn.w"], p[h + "attn.c_proj.w"])
        dres, grads[h + "ln_1.g"], grads[h + "ln_1.b"] = layer_norm_backward(da, ln1)
        dx = dx + dres
    np.add.at(grads["wte"], ids, dx)                                   # (V, d) += per-token rows
    grads["wpe"][:t] += dx.sum(axis=0)                                 # (T, d)
    return grads


def cross_entropy(logits: np.ndarray, targets: np.ndarray, weights: np.ndarray):
    """logits (B, T, V), targets (B, T), weights (B, T) in {0, 1} -> (mean loss over weighted
    positions, dlogits (B, T, V))."""
    z = logits - logits.max(axis=-1, keepdims=True)                    # (B, T, V)
    probs = np.exp(z)                                                  # (B, T, V), unnormalised
    total = probs.sum(axis=-1, keepdims=True)                          # (B, T, 1)
    n = weights.sum()
    if n == 0:
        raise InferlabError("a batch has no positions with loss weight")
    picked = np.take_along_axis(z, targets[..., None], axis=-1)[..., 0] - np.log(total[..., 0])  # (B, T) log p
    loss = -(weights * picked).sum() / n
    probs /= total                                                     # softmax
    # d loss / d logits = (softmax - onehot(target)) * weight / n
    np.put_along_axis(probs, targets[..., None],
                      np.take_along_axis(probs, targets[..., None], axis=-1) - 1.0, axis=-1)
    probs *= (weights / n)[..., None].astype(probs.dtype)
    dlogits = probs
    return float(loss), dlogits


def loss_and_grads(params, config, ids, targets, weights):
    """One batch -> (loss, gradients)."""
    logits, cache = forward(params, config, ids)
    loss, dlogits = cross_entropy(logits, targets, weights)
    return loss, backward(params, config, dlogits, cache)


def _check_trainable(config: GPTConfig) -> None:
    if config.kv_heads != config.n_heads:
        raise InferlabError(f"training supports multi-head attention only, got n_kv_heads={config.kv_heads} "
                            f"< n_heads={config.n_heads}")


# ---------------------------------------------------------------- optimiser and schedule

def lr_at(step: int, tc: TrainConfig) -> float:
    """Linear warm-up to tc.lr, then cosine decay to tc.lr * tc.min_lr_ratio at tc.steps."""
    if step < tc.warmup:
        return tc.lr * (step + 1) / tc.warmup
    progress = min(1.0, (step - tc.warmup) / max(1, tc.steps - tc.warmup))
    floor = tc.lr * tc.min_lr_ratio
    return floor + 0.5 * (tc.lr - floor) * (1.0 + math.cos(math.pi * progress))


def clip_grad_norm(grads: dict, max_norm: float) -> float:
    """Scale all gradients in place so their global L2 norm is at most max_norm; returns the norm before."""
    norm = math.sqrt(sum(float((g.astype(np.float64) ** 2).sum()) for g in grads.values()))
    if norm > max_norm:
        for g in grads.values():
            g *= max_norm / norm
    return norm


class AdamW:
    """Adam with decoupled weight decay (Loshchilov & Hutter 2019), in place on a param dict."""

    def __init__(self, params: dict, tc: TrainConfig):
        self.tc = tc
        self.t = 0
        self.m = {k: np.zeros_like(v) for k, v in params.items()}
        self.v = {k: np.zeros_like(v) for k, v in params.items()}
        # Only matrices decay (embeddings included); biases and LayerNorm gains do not (GPT-2, nanoGPT).
        self.decay = {k: v.ndim == 2 for k, v in params.items()}

    def step(self, params: dict, grads: dict, lr: float) -> None:
        tc = self.tc
        self.t += 1
        c1, c2 = 1.0 - tc.beta1 ** self.t, 1.0 - tc.beta2 ** self.t    # bias corrections
        for k, p in params.items():
            g, m, v = grads[k], self.m[k], self.v[k]
            m *= tc.beta1
            m += (1.0 - tc.beta1) * g
            v *= tc.beta2
            v += (1.0 - tc.beta2) * g * g
            if self.decay[k]:
                p *= 1.0 - lr * tc.weight_decay
            p -= (lr / c1) * m / (np.sqrt(v / c2) + tc.eps)


# ---------------------------------------------------------------- data

@dataclass(frozen=True)
class Encoded:
    ids: np.ndarray       # (n,) int64: prompt, completion, EOS
    n_prompt: int         # how many of ids are the prompt


def encode_examples(tokenizer, examples: Sequence) -> list[Encoded]:
    """Prompt and completion are encoded separately, then joined: generation continues from the
    prompt's own tokens, so training must see the same token boundary at the ':'."""
    out = []
    for ex in examples:
        p = tokenizer.encode(ex.prompt)
        ids = np.array(p + tokenizer.encode(ex.completion) + [tokenizer.eos_id], dtype=np.int64)
        out.append(Encoded(ids, len(p)))
    return out


def make_batch(data: Sequence[Encoded], pad_id: int):
    """-> ids (B, T), targets (B, T), weights (B, T), T = longest example - 1, padded at the end.

    Only the completion (the JSON and EOS) carries loss: the prompt is given at generation time and
    never sampled, so fitting it would spend capacity on text the model never has to produce.
    Padding sits after each sequence, where the causal mask keeps it from touching real positions.
    """
    t = max(e.ids.size for e in data) - 1
    ids = np.full((len(data), t), pad_id, dtype=np.int64)              # (B, T)
    targets = np.full((len(data), t), pad_id, dtype=np.int64)          # (B, T)
    weights = np.zeros((len(data), t), dtype=np.float32)               # (B, T)
    for row, e in enumerate(data):
        n = e.ids.size - 1
        ids[row, :n] = e.ids[:-1]
        targets[row, :n] = e.ids[1:]
        weights[row, e.n_prompt - 1:n] = 1.0       # the target at prompt's last position is the first JSON token
    return ids, targets, weights


# ---------------------------------------------------------------- the loop

@dataclass(frozen=True)
class StepLog:
    step: int
    loss: float
    lr: float
    grad_norm: float
    tokens: int            # tokens in the batch (padding excluded)


def init_params(config: GPTConfig, seed: int) -> dict[str, np.ndarray]:
    """GPT-2 initialisation, exactly the engine's GPT.init (so the same seed starts the same model)."""
    return {k: v.copy() for k, v in GPT.init(config, seed).params.items()}


def train(config: GPTConfig, tc: TrainConfig, data: Sequence[Encoded], *, pad_id: int,
          on_step: Callable[[StepLog, dict], None] | None = None) -> tuple[dict, list[StepLog]]:
    """Train from GPT.init(config, tc.seed) on `data`, batches drawn with a seeded RNG.

    on_step(log, params) is called after every step (progress bars, evaluation). Deterministic for a
    given seed and BLAS thread count.
    """
    if not data:
        raise InferlabError("no training examples")
    params = init_params(config, tc.seed)
    opt = AdamW(params, tc)
    rng = np.random.default_rng(tc.seed + 1)
    logs = []
    for step in range(tc.steps):
        batch = [data[i] for i in rng.integers(0, len(data), size=tc.batch_size)]
        ids, targets, weights = make_batch(batch, pad_id)
        loss, grads = loss_and_grads(params, config, ids, targets, weights)
        if not math.isfinite(loss):
            raise InferlabError(f"loss became {loss} at step {step}; lower --lr")
        norm = clip_grad_norm(grads, tc.grad_clip)
        lr = lr_at(step, tc)
        opt.step(params, grads, lr)
        log = StepLog(step, loss, lr, norm, int(sum(e.ids.size - 1 for e in batch)))
        logs.append(log)
        if on_step is not None:
            on_step(log, params)
    return params, logs


def mean_loss(params: dict, config: GPTConfig, data: Sequence[Encoded], *, pad_id: int,
              batch_size: int = 64) -> float:
    """Completion-token cross-entropy over `data`, weighted by tokens (the validation loss)."""
    total, count = 0.0, 0.0
    for start in range(0, len(data), batch_size):
        ids, targets, weights = make_batch(data[start:start + batch_size], pad_id)
        logits, _ = forward(params, config, ids)
        loss, _ = cross_entropy(logits, targets, weights)
        total += loss * float(weights.sum())
        count += float(weights.sum())
    return total / count


# ---------------------------------------------------------------- evaluation

def schema_problems(obj, schema: dict) -> list[str]:
    """What in `obj` breaks the conjugation schema (an object of string properties with enum and
    maxLength, required keys, no additional properties), each named by JSON pointer; [] = valid.

    Checked in code so jsonschema stays a test-only dependency (tests compare with jsonschema).
    """
    if not isinstance(obj, dict):
        return [f"/: expected object, got {type(obj).__name__}"]
    props = schema["properties"]
    problems = [f"/{k}: required" for k in schema.get("required", ()) if k not in obj]
    if schema.get("additionalProperties") is False:
        problems += [f"/{k}: not allowed" for k in obj if k not in props]
    for key, sub in props.items():
        if key not in obj:
            continue
        value = obj[key]
        if sub.get("type") == "string" and not isinstance(value, str):
            problems.append(f"/{key}: expected string")
            continue
        if "enum" in sub and value not in sub["enum"]:
            problems.append(f"/{key}: {value!r} not in enum")
        if "maxLength" in sub and len(value) > sub["maxLength"]:
            problems.append(f"/{key}: longer than {sub['maxLength']}")
    return problems


def evaluate_generations(model, tokenizer, examples: Sequence, schema: dict, *, max_new_tokens: int = 48,
                         on_item: Callable[[], None] | None = None) -> dict:
    """Greedy, unmasked generate() on each example's prompt -> fractions that parse as JSON, that
    validate against `schema`, and whose "forma" is the right form, per verb kind."""
    from inferlab.model.generate import generate

    rows = []
    for ex in examples:
        gen = generate(model, tokenizer, ex.prompt, max_new_tokens=max_new_tokens, temperature=0.0)
        try:
            obj = json.loads(gen.text)
            parsed = True
        except json.JSONDecodeError:
            obj, parsed = None, False
        valid = parsed and not schema_problems(obj, schema)
        right = parsed and isinstance(obj, dict) and obj.get("forma") == ex.form
        rows.append((ex, gen.text, parsed, valid, right))
        if on_item is not None:
            on_item()
    def frac(sel):
        return sum(sel) / len(sel) if sel else None
    result = {"n": len(rows),
              "parse_json": frac([r[2] for r in rows]),
              "valid_schema": frac([r[3] for r in rows]),
              "exact_record": frac([r[1] == r[0].completion for r in rows]),
              "right_form": {}, "n_by_kind": {}}
    for kind in ("regular", "irregular"):
        sel = [r for r in rows if r[0].kind == kind]
        result["right_form"][kind] = frac([r[4] for r in sel])
        result["n_by_kind"][kind] = len(sel)
    result["wrong_samples"] = [{"prompt": r[0].prompt, "expected": r[0].form, "output": r[1]}
                               for r in rows if not r[4]][:20]
    return result
