"""Text workloads from transformers configs with random weights: DistilBERT and Llama-style LLMs."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from dlbench.workloads.base import Batch, InputShape, Workload, cross_entropy
from dlbench.workloads.registry import register_workload

DISTILBERT_VOCAB = 30522
DISTILBERT_LABELS = 2


@dataclass(frozen=True)
class LlamaSize:
    """The shape of a Llama-style decoder; parameter counts follow from it."""

    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    vocab: int
    tie_embeddings: bool = False
    context: int = 2048  # the most positions a sequence may take (the model's it is shaped as)

    @property
    def cache_width(self) -> int:
        """Key and value elements one position of the KV cache holds."""
        return 2 * self.layers * self.kv_heads * (self.hidden // self.heads)


LLAMA_SIZES = {
    "llm_tiny": LlamaSize(64, 128, 2, 4, 2, 1000),
    "llm_125m": LlamaSize(768, 3072, 12, 12, 12, 32000),
    "llm_1b": LlamaSize(2048, 8192, 16, 32, 8, 128256, True, 131072),  # Llama-3.2-1B shape
    "llm_8b": LlamaSize(4096, 14336, 32, 32, 8, 128256, context=131072),  # Llama-3.1-8B shape
}


def token_batch(vocab: int, per_token_targets: bool):
    """Random token ids; targets per token (causal LM) or per sequence (2 classes)."""

    def make(batch_size: int, shape: InputShape, gen: torch.Generator) -> Batch:
        size, on = (batch_size, shape.seq_len), gen.device
        ids = torch.randint(0, vocab, size, generator=gen, device=on)
        if per_token_targets:
            return Batch(ids, torch.randint(0, vocab, size, generator=gen, device=on))
        labels = torch.randint(0, DISTILBERT_LABELS, (batch_size,), generator=gen, device=on)
        return Batch(ids, labels)

    return make


def build_distilbert(shape: InputShape) -> nn.Module:
    """DistilBertForSequenceClassification from its default config, random weights."""
    from transformers import DistilBertConfig, DistilBertForSequenceClassification

    config = DistilBertConfig(
        num_labels=DISTILBERT_LABELS, max_position_embeddings=max(512, shape.seq_len)
    )
    return DistilBertForSequenceClassification(config)


def llama_config(size: LlamaSize, max_positions: int):
    """A transformers LlamaConfig for one of the named sizes."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=size.vocab,
        hidden_size=size.hidden,
        intermediate_size=size.intermediate,
        num_hidden_layers=size.layers,
        num_attention_heads=size.heads,
        num_key_value_heads=size.kv_heads,
        max_position_embeddings=max(2048, max_positions),
        tie_word_embeddings=size.tie_embeddings,
        use_cache=False,
    )


def llama_flops(size: LlamaSize):
    """Analytic FLOPs for a Llama shape; the input embedding is a lookup, not a matmul."""

    def count(shape: InputShape, mode: str):
        from dlbench.workloads.flops import palm_flops

        head = 0 if size.tie_embeddings else size.vocab * size.hidden
        kv = size.hidden * size.hidden * size.kv_heads // size.heads
        attn = 2 * size.hidden * size.hidden + 2 * kv
        mlp = 3 * size.hidden * size.intermediate
        params = size.layers * (attn + mlp) + size.vocab * size.hidden + head
        embedding = 0 if size.tie_embeddings else size.vocab * size.hidden
        return palm_flops(params, embedding, size.layers, size.hidden, shape.seq_len, mode)

    return count


def llama_builder(size: LlamaSize):
    def build(shape: InputShape) -> nn.Module:
        from transformers import LlamaForCausalLM

        config = llama_config(size, shape.seq_len)
        config._attn_implementation = "sdpa"
        return LlamaForCausalLM(config)

    return build


def native_llama(model: nn.Module) -> nn.Module:
    """The transformers Llama's weights in the native implementation (fused projections)."""
    from dlbench.workloads.llama import NativeLlama

    return NativeLlama.from_transformers(model)


def native_llama_loss(outputs, targets: torch.Tensor) -> torch.Tensor:
    """The native model's loss: cross-entropy over the vocabulary a chunk of tokens at a time."""
    from dlbench.workloads.llm_loss import chunked_cross_entropy

    return chunked_cross_entropy(outputs, targets)


register_workload(
    Workload(
        name="distilbert",
        summary="DistilBERT-base sequence classification, 2 labels (transformers config)",
        family="text",
        sample_unit="sequence",
        build=build_distilbert,
        make_batch=token_batch(DISTILBERT_VOCAB, per_token_targets=False),
        loss=cross_entropy,
        default_optimizer="adamw",
        vocab_size=DISTILBERT_VOCAB,
        num_classes=DISTILBERT_LABELS,
    )
)
for _name, _size in LLAMA_SIZES.items():
    register_workload(
        Workload(
            name=_name,
            summary=f"Llama-style decoder, {_size.layers} layers x {_size.hidden} (causal LM)",
            family="llm",
            sample_unit="sequence",
            build=llama_builder(_size),
            make_batch=token_batch(_size.vocab, per_token_targets=True),
            loss=cross_entropy,
            generative=True,
            default_optimizer="adamw",
            analytic_flops=llama_flops(_size),
            vocab_size=_size.vocab,
            native=native_llama,
            cache_width=_size.cache_width,
            native_loss=native_llama_loss,
            context_len=_size.context,
        )
    )
