"""Text files as token batches: a .txt file (a sample per non-empty line) or .jsonl (a "text"
field, optional integer "label"), tokenised by a byte-level BPE tokenizer trained on the file
itself (nothing downloaded), sized to the model's vocabulary. Causal LMs read the tokens packed
into sequences (targets shifted by one); classifiers read one line per sample, cut or padded."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils.data import Dataset

from dlbench.errors import UserError

MAX_TOKENIZER_VOCAB = 32000  # a tokenizer trained on one file needs no more
# Text goes to the tokenizer in pieces of at most this many characters: it keeps a map entry
# per character of what it is given (docs/decisions.md#input-limits).
PIECE_CHARS = 1 << 16
PAD_ID = 0


@dataclass(frozen=True)
class TextSamples:
    """Samples of one file: each line's text, its label and its size in bytes."""

    texts: list[str]
    labels: list[int]
    sizes: list[int]


def read_samples(path: Path, classes: int | None = None) -> TextSamples:
    """The file's samples; a UserError for an empty file, a JSONL line that is not an object
    with a "text" string, or a label that is no integer in [0, classes)."""
    texts, labels = [], []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"--data: cannot read {path} as UTF-8 text ({exc})") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if path.suffix == ".jsonl":
            try:
                item = json.loads(line)
                text, label = item["text"], item.get("label", 0)
            except (ValueError, KeyError, TypeError):
                raise UserError(
                    f'--data: {path}:{number} is not a JSON object with a "text" string'
                ) from None
            except RecursionError:
                raise UserError(f"--data: {path}:{number} nests too deeply") from None
            label = _label(label, classes, f"{path}:{number}")
        else:
            text, label = line, 0
        texts.append(str(text))
        labels.append(label)
    if not texts:
        raise UserError(f"--data: {path} holds no text")
    return TextSamples(texts, labels, [len(t.encode()) for t in texts])


def _label(value: object, classes: int | None, where: str) -> int:
    """A class label: an integer (1.0 too), in [0, classes) when the model classifies."""
    whole = isinstance(value, int) and not isinstance(value, bool)
    if isinstance(value, float) and value.is_integer():
        value, whole = int(value), True
    if not whole:
        raise UserError(f"--data: {where}: label {value!r} is not an integer class")
    if classes is not None and not 0 <= value < classes:
        raise UserError(
            f"--data: {where}: label {value} is outside the model's {classes} classes "
            f"(0 to {classes - 1})"
        )
    return value


def train_tokenizer(samples: TextSamples, vocab_size: int):
    """A byte-level BPE tokenizer learnt from the samples (ids below the model's vocabulary)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=min(vocab_size, MAX_TOKENIZER_VOCAB),
        special_tokens=["<pad>", "<eos>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator((piece for piece, _ in _pieces(samples.texts)), trainer)
    return tokenizer


def _pieces(texts: list[str]) -> list[tuple[str, int]]:
    """Each text cut into pieces of at most PIECE_CHARS characters, with its text's index."""
    return [
        (text[at : at + PIECE_CHARS], i)
        for i, text in enumerate(texts)
        for at in range(0, max(len(text), 1), PIECE_CHARS)
    ]


def encode(tokenizer, texts: list[str]) -> list[list[int]]:
    """Each text's token ids, encoded piece by piece (bounded memory for any line length)."""
    pieces = _pieces(texts)
    ids: list[list[int]] = [[] for _ in texts]
    for (_, i), encoding in zip(pieces, tokenizer.encode_batch([p for p, _ in pieces])):
        ids[i].extend(encoding.ids)
    return ids


class TokenSet(Dataset):
    """(token ids, targets, bytes of source text, no failed files) per sample, tokenised once."""

    def __init__(self, samples: TextSamples, tokenizer, seq_len: int, causal: bool) -> None:
        encoded = encode(tokenizer, samples.texts)
        self.inputs: list[torch.Tensor] = []
        self.targets: list[torch.Tensor] = []
        self.sizes: list[int] = []
        if causal:
            self._pack(encoded, samples.sizes, seq_len, tokenizer.token_to_id("<eos>"))
        else:
            for ids, label, size in zip(encoded, samples.labels, samples.sizes):
                ids = ids[:seq_len] + [PAD_ID] * max(0, seq_len - len(ids))
                self.inputs.append(torch.tensor(ids))
                self.targets.append(torch.tensor(label))
                self.sizes.append(size)

    def _pack(self, encoded: list[list[int]], sizes: list[int], seq_len: int, eos: int) -> None:
        """All lines end to end (an end-of-text token between), cut into seq_len + 1 windows."""
        stream = torch.tensor([t for ids in encoded for t in [*ids, eos]])
        text_bytes = sum(sizes)
        count = (len(stream) - 1) // seq_len
        for k in range(count):
            window = stream[k * seq_len : (k + 1) * seq_len + 1]
            self.inputs.append(window[:-1])
            self.targets.append(window[1:])
            self.sizes.append(text_bytes // max(count, 1))

    def __len__(self) -> int:
        return len(self.inputs)

    def __getitem__(self, i: int):
        return self.inputs[i], self.targets[i], self.sizes[i], []
