"""A model's long or degenerate reply (random weights, a runaway generation) is
parsed in time linear in its length: the text handling on the event loop must
never hold every session for minutes. The inputs below took the old patterns
hours (cubic / quadratic backtracking); each check here is bounded by a
generous wall-clock limit so that a regression fails instead of hanging CI."""

from __future__ import annotations

import concurrent.futures

import pytest

from surfer.agent.vocabulary import DEFAULT_VOCABULARY, tokens
from surfer.core.errors import ModelOutputError
from surfer.models.schema import parse_json_object

BOUND_S = 20.0  # the old code needed hours on these; the new, milliseconds


def _finishes(fn, *args):  # type: ignore[no-untyped-def]
    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        return pool.submit(fn, *args).result(timeout=BOUND_S)
    finally:
        pool.shutdown(wait=False)


def test_fenced_json_is_still_unwrapped():
    assert parse_json_object('```json\n{"x": 1}\n```') == {"x": 1}
    assert parse_json_object('```\n {"x": 2} \n```') == {"x": 2}
    assert parse_json_object('Here it is: {"x": 3} hope that helps') == {"x": 3}
    # what real models wrap their JSON in: a reasoning block with braces of its own, a fence with prose after it
    assert parse_json_object('<think>\nIt wants {x, y}.\n</think>\n\n{"x": 5}') == {"x": 5}
    assert parse_json_object('The {x, y} pair.</think>{"x": 6}') == {"x": 6}   # the template opened the block
    assert parse_json_object('Sure:\n```json\n{"x": 7}\n```\nThis clicks {the} button.') == {"x": 7}
    assert parse_json_object('I click {the} button: {"x": 8} (done)') == {"x": 8}


def test_a_fence_opened_on_a_long_run_of_whitespace_is_refused_quickly():
    reply = "```" + " " * 100_000 + "x"
    with pytest.raises(ModelOutputError, match="not JSON"):
        _finishes(parse_json_object, reply)
    reply = "```json" + "\n" * 50_000 + '{"x": 4}' + " " * 50_000 + "```"
    assert _finishes(parse_json_object, reply) == {"x": 4}


def test_prices_are_found_in_linear_time_and_still_found():
    assert tokens("Pay 1,299.00 €") == ["pay", "<amount>"]
    assert tokens("Buy for $4.99") == ["buy", "for", "<amount>"]
    assert tokens("12,50 EUR per month") == ["<amount>", "per", "month"]
    assert DEFAULT_VOCABULARY.commitment("$4.99") == "buy"
    long_digits = "1," * 100_000 + " and 5 items"
    words = _finishes(tokens, long_digits)
    assert words[-3:] == ["and", "5", "items"]
    assert _finishes(DEFAULT_VOCABULARY.commitment, "1" * 200_000) is None
