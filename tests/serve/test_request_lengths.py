"""Request lengths: fixed, uniform around the lengths given, or shaped like real chat traffic
(the Azure trace's pairs, shipped with the package, scaled to the means given: the trace's
shape kept, every request at least a prompt token and LoadGen's least output)."""

from __future__ import annotations

import statistics

import pytest

from dlbench.serve.chat_traffic import CHAT_PAIRS
from dlbench.serve.requests import MIN_OUTPUT, longest_request, request_lengths


def test_the_chat_trace_ships_1024_pairs_of_the_azure_conversation_service():
    assert len(CHAT_PAIRS) == 1024
    prompts, outputs = zip(*CHAT_PAIRS)
    assert 1000 < statistics.fmean(prompts) < 1300 and 150 < statistics.fmean(outputs) < 260
    assert statistics.median(outputs) < statistics.fmean(outputs)  # a long tail of answers


@pytest.mark.parametrize(("prompt", "new"), [(128, 128), (16, 6), (1000, 200)])
def test_chat_lengths_keep_the_traces_shape_at_the_means_asked(prompt, new):
    lengths = request_lengths(1024, prompt, new, "chat", seed=0)
    assert statistics.fmean(lengths.prompt) == pytest.approx(prompt, rel=0.05)
    assert statistics.fmean(lengths.output) == pytest.approx(new, rel=0.05)
    assert min(lengths.prompt) >= 1 and min(lengths.output) >= MIN_OUTPUT
    assert lengths.longest == longest_request(prompt, new, "chat")  # what the checks size by
    # the trace's order of lengths survives the scaling: the longest prompt stays the longest
    order = sorted(range(1024), key=lambda k: CHAT_PAIRS[k][0])
    assert lengths.prompt[order[-1]] == max(lengths.prompt)


def test_chat_lengths_are_the_same_whatever_the_seed():
    assert request_lengths(64, 128, 128, "chat", 1) == request_lengths(64, 128, 128, "chat", 2)
