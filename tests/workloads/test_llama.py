"""The native Llama against the transformers model it is loaded from (tiny LLM, fp32): the
same logits, the same greedy tokens, fused projections equal to the separate ones, and a
chunked loss equal to plain cross-entropy in value and gradients."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from dlbench.config import RunConfig
from dlbench.engine.distribution.fabric import create_fabric
from dlbench.engine.plan import make_plan
from dlbench.engine.scenarios.generation import open_generator, prepare_steps
from dlbench.workloads import InputShape, get_workload, llm_loss
from dlbench.workloads.llama import NativeLlama
from dlbench.workloads.llm_loss import Hidden, chunked_cross_entropy


@pytest.fixture(scope="module")
def models():
    torch.manual_seed(0)
    hf = get_workload("llm_tiny").build(InputShape(0, 0, 64)).eval()
    return hf, NativeLlama.from_transformers(hf).eval()


def test_fused_projections_equal_the_separate_ones(models):
    hf, native = models
    x = torch.randn(3, 5, hf.config.hidden_size)
    layer, block = hf.model.layers[1], native.layers[1]
    q, k, v = block.wqkv(x).split([layer.self_attn.q_proj.out_features, *[block.kv_heads
                                   * block.head_dim] * 2], dim=-1)  # fmt: skip
    assert torch.equal(q, layer.self_attn.q_proj(x)) or torch.allclose(q, layer.self_attn.q_proj(x))
    assert torch.allclose(k, layer.self_attn.k_proj(x)) and torch.allclose(
        v, layer.self_attn.v_proj(x)
    )
    gate, up = block.w13(x).chunk(2, dim=-1)
    assert torch.allclose(gate, layer.mlp.gate_proj(x)) and torch.allclose(up, layer.mlp.up_proj(x))


def test_native_logits_equal_the_transformers_logits(models):
    hf, native = models
    ids = torch.randint(0, hf.config.vocab_size, (2, 24))
    with torch.no_grad():
        out = native(ids)
        assert torch.allclose(out.hidden @ out.head.t(), hf(ids).logits, atol=1e-5)


@pytest.mark.parametrize("batch", [1, 3])
def test_both_implementations_generate_the_same_greedy_tokens(batch):
    tokens = {}
    for impl in ("native", "hf"):
        config = RunConfig.of(
            model="llm_tiny", mode="infer", accelerator="cpu", batch_size=batch, prompt_len=12,
            new_tokens=20, llm_impl=impl,
        )  # fmt: skip
        plan = make_plan(config)
        fabric = create_fabric(plan.devices, plan.fabric_precision)
        generator, _ = open_generator(
            plan.config, plan.workload, plan.shape, plan.precision, fabric
        )
        with torch.inference_mode():
            steps = prepare_steps(generator, compile=False, cuda_graphs=False)
            tokens[impl] = steps.tokens(generator)
    assert tokens["native"].shape == (batch, 20)
    assert torch.equal(tokens["native"], tokens["hf"])


def test_the_chunked_loss_equals_cross_entropy_in_value_and_gradients(monkeypatch):
    monkeypatch.setattr(llm_loss, "LOSS_CHUNK_TOKENS", 7)  # chunks that do not divide the tokens
    torch.manual_seed(1)
    hidden = torch.randn(3, 10, 16, dtype=torch.float64, requires_grad=True)
    head = torch.randn(50, 16, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(0, 50, (3, 10))
    loss = chunked_cross_entropy(Hidden(hidden, head), targets)
    (2 * loss).backward()
    h, w = hidden.detach().requires_grad_(), head.detach().requires_grad_()
    reference = F.cross_entropy((h @ w.t()).flatten(0, 1), targets.flatten())
    (2 * reference).backward()
    assert loss.item() == pytest.approx(reference.item(), rel=1e-12)
    assert torch.allclose(hidden.grad, h.grad) and torch.allclose(head.grad, w.grad)


def _cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return F.cosine_similarity(a.flatten().double(), b.flatten().double(), dim=0).item()


@pytest.mark.parametrize("tokens", [40, 37])  # a chunk's rows a multiple of 16, and not
def test_the_float8_loss_runs_its_three_gemms_in_float8_and_stays_near_cross_entropy(
    monkeypatch, tokens
):
    """`--fp8-recipe tensorwise_with_head`: the logits and both gradients from scaled float8
    matmuls (e4m3 operands, e5m2 for the logits' gradient), one scale a tensor; the value and
    the gradients within float8's rounding of bf16 cross-entropy's."""
    monkeypatch.setattr(llm_loss, "LOSS_CHUNK_TOKENS", 32)  # two chunks, the last short
    calls = []
    scaled_mm = torch._scaled_mm

    def recording(a, b, *args, **kwargs):
        calls.append((a.dtype, b.dtype))
        return scaled_mm(a, b, *args, **kwargs)

    monkeypatch.setattr(torch, "_scaled_mm", recording)
    torch.manual_seed(3)
    hidden = torch.randn(2, tokens, 64, dtype=torch.bfloat16, requires_grad=True)
    head = (torch.randn(512, 64) * 0.2).to(torch.bfloat16).requires_grad_()
    targets = torch.randint(0, 512, (2, tokens))
    loss = chunked_cross_entropy(Hidden(hidden, head, float8=True), targets)
    loss.backward()
    e4m3, e5m2 = torch.float8_e4m3fn, torch.float8_e5m2
    chunks = -(-2 * tokens // 32)
    assert calls == [(e4m3, e4m3), (e5m2, e4m3), (e5m2, e4m3)] * chunks
    h, w = hidden.detach().float().requires_grad_(), head.detach().float().requires_grad_()
    reference = F.cross_entropy((h @ w.t()).flatten(0, 1), targets.flatten())
    reference.backward()
    assert loss.item() == pytest.approx(reference.item(), rel=0.02)
    assert _cosine(hidden.grad, h.grad) > 0.99 and _cosine(head.grad, w.grad) > 0.99


def test_llm_impl_is_refused_for_other_workloads():
    from dlbench.errors import UserError

    with pytest.raises(UserError, match="--llm-impl"):
        make_plan(RunConfig.of(model="timm:test_resnet", accelerator="cpu", llm_impl="native"))
    assert (
        make_plan(RunConfig.of(model="llm_tiny", accelerator="cpu")).config.workload.llm_impl
        == "native"
    )


@pytest.mark.e2e
def test_the_chunked_loss_compiles_to_the_same_value_and_gradients(monkeypatch):
    """`--compile` compiles the loss (inductor, one graph): the chunk's softmax-minus-one-hot
    gradient must survive the compiler unchanged."""
    monkeypatch.setattr(llm_loss, "LOSS_CHUNK_TOKENS", 8)
    torch._dynamo.reset()
    torch.manual_seed(2)
    hidden = torch.randn(2, 12, 16, requires_grad=True)
    head = torch.randn(40, 16, requires_grad=True)
    targets = torch.randint(0, 40, (2, 12))
    explained = torch._dynamo.explain(chunked_cross_entropy)(Hidden(hidden, head), targets)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
    loss = torch.compile(chunked_cross_entropy)(Hidden(hidden, head), targets)
    loss.backward()
    h, w = hidden.detach().requires_grad_(), head.detach().requires_grad_()
    reference = F.cross_entropy((h @ w.t()).flatten(0, 1), targets.flatten())
    reference.backward()
    assert loss.item() == pytest.approx(reference.item(), rel=1e-5)
    assert torch.allclose(hidden.grad, h.grad, atol=1e-6)
    assert torch.allclose(head.grad, w.grad, atol=1e-6)


@pytest.mark.e2e
def test_the_float8_loss_compiles_to_one_graph_with_the_eager_value(monkeypatch):
    """Its casts and scaled matmuls trace into one graph (a break would run the chunk loop in
    Python between compiled pieces) and compute what the eager loss computes."""
    monkeypatch.setattr(llm_loss, "LOSS_CHUNK_TOKENS", 32)
    torch._dynamo.reset()
    torch.manual_seed(4)
    hidden = torch.randn(2, 40, 64, dtype=torch.bfloat16, requires_grad=True)
    head = (torch.randn(512, 64) * 0.2).to(torch.bfloat16).requires_grad_()
    targets = torch.randint(0, 512, (2, 40))
    outputs = Hidden(hidden, head, float8=True)
    explained = torch._dynamo.explain(chunked_cross_entropy)(outputs, targets)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
    compiled = torch.compile(chunked_cross_entropy)(outputs, targets)
    eager = chunked_cross_entropy(Hidden(hidden.detach(), head.detach(), True), targets)
    assert compiled.item() == pytest.approx(eager.item(), rel=1e-3)


@pytest.mark.parametrize("loop", ["session", "bare"])
def test_compile_covers_the_model_and_its_loss(monkeypatch, loop):
    """Both the timed loop and the bare yardstick compile the loss beside the model (an eager
    128k-vocabulary loss cost llm_1b's training step 51 of 313 ms on an H100)."""
    from dlbench.engine.scenarios import bare, session

    compiled_targets = []

    def record(target, **_):
        compiled_targets.append(target)
        return target

    monkeypatch.setattr(torch, "compile", record)
    config = RunConfig.of(model="llm_tiny", mode="train", batch_size=2, seq_len=16,
                       accelerator="cpu", compile=True)  # fmt: skip
    plan = make_plan(config)
    if loop == "session":
        fabric = create_fabric(plan.devices, plan.fabric_precision)
        session.open_session(plan.config, plan.workload, plan.shape, plan.precision, fabric)
    else:
        bare.BareLoop(plan.workload, plan.shape, plan.config, plan.precision, torch.device("cpu"))
    assert isinstance(compiled_targets[0], NativeLlama)
    assert compiled_targets[1] is plan.workload.native_loss
