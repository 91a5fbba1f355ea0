"""OpenAI request bodies read strictly: what is taken, what is refused, and the parameter each refusal names."""

from __future__ import annotations

import pytest

from ge_plugin.serve.front.openai_request import MAX_STOPS, ApiError, parse

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def refused(body: object, *, chat: bool = True) -> ApiError:
    with pytest.raises(ApiError) as caught:
        parse(body, chat=chat)
    assert caught.value.status == 400
    return caught.value


def test_parse_chat_takes_what_stock_clients_send():
    request = parse(
        {
            **CHAT,
            "max_completion_tokens": 8,
            "temperature": 0.5,
            "top_p": 1,
            "seed": -3,
            "stop": "\n",
            "n": 1,
            "stream": True,
            "stream_options": {"include_usage": True},
            "user": "u",
            "frequency_penalty": 0,
            "presence_penalty": 0.0,
            "logprobs": False,
            "logit_bias": None,
            "tools": None,
        },
        chat=True,
    )
    assert (request.max_tokens, request.temperature, request.top_p, request.seed) == (8, 0.5, 1.0, -3)
    assert request.stop == ("\n",) and request.stream and request.include_usage
    assert request.messages == ({"role": "user", "content": "hi"},)


def test_parse_completion_defaults_and_prompt_forms():
    assert parse({"model": "m", "prompt": "x"}, chat=False).max_tokens == 16  # OpenAI's default
    assert parse({"model": "m", "prompt": ["x"]}, chat=False).prompt == "x"
    assert parse({"model": "m", "prompt": [1, 2]}, chat=False).prompt == (1, 2)
    assert parse({"model": "m", "prompt": [[1, 2]]}, chat=False).prompt == (1, 2)
    assert parse(CHAT, chat=True).max_tokens is None  # a chat runs to the model's own limit


def test_parse_chat_text_parts_are_joined():
    messages = [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    assert parse({"model": "m", "messages": messages}, chat=True).messages[0]["content"] == "ab"


@pytest.mark.parametrize(
    ("change", "param", "words"),
    [
        ({"n": 2}, "n", "one choice per request"),
        ({"n": True}, "n", "not supported"),
        ({"temperature": 2.5}, "temperature", "outside [0, 2]"),
        ({"temperature": "0.5"}, "temperature", "must be a number"),
        ({"top_p": 0}, "top_p", "outside (0, 1]"),
        ({"max_tokens": 0}, "max_tokens", "outside [1, 1048576]"),
        ({"max_tokens": 1 << 40}, "max_tokens", "outside"),
        ({"max_tokens": True}, "max_tokens", "must be an integer"),
        ({"max_tokens": 4, "max_completion_tokens": 5}, "max_completion_tokens", "disagree"),
        ({"seed": 1 << 64}, "seed", "outside"),
        ({"stop": ["a"] * (MAX_STOPS + 1)}, "stop", "at most 4"),
        ({"stop": "x" * 300}, "stop", "longer than 256"),
        ({"stop": [1]}, "stop", "list of strings"),
        ({"stream_options": {"include_usage": True}}, "stream_options", "only allowed when stream is true"),
        ({"stream": True, "stream_options": {"other": 1}}, "stream_options", "takes only include_usage"),
        ({"stream": "yes"}, "stream", "true or false"),
        ({"logprobs": True}, "logprobs", "not supported here"),
        ({"frequency_penalty": 0.5}, "frequency_penalty", "not supported here (only null or 0 or 0.0)"),
        ({"frequency_penalty": False}, "frequency_penalty", "not supported"),
        ({"tools": [{"type": "function"}]}, "tools", "not supported"),
        ({"top_k": 5}, "top_k", "Unrecognized request argument supplied: top_k"),
        ({"model": ""}, "model", "model is required"),
        ({"model": 3}, "model", "model is required"),
        ({"messages": []}, "messages", "non-empty list"),
        (
            {"messages": [{"role": "tool", "content": "x"}]},
            "messages[0].role",
            "not one of system, user, assistant",
        ),
        (
            {"messages": [{"role": "user", "content": None}]},
            "messages[0].content",
            "string or a list of text parts",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
            "messages[0].content[0]",
            "text part",
        ),
        ({"messages": [{"role": "user", "content": "x", "tool_calls": []}]}, "messages[0]", "tool_calls"),
        ({"messages": [{"role": "user", "content": "x"}] * 5000}, "messages", "at most 4096"),
        ({"user": 3}, "user", "must be a string"),
    ],
)
def test_parse_chat_refuses_naming_the_parameter(change, param, words):
    error = refused({**CHAT, **change})
    assert error.param == param
    assert words in str(error)
    assert error.body() == {
        "error": {"message": str(error), "type": "invalid_request_error", "param": param, "code": None}
    }


@pytest.mark.parametrize(
    ("prompt", "words"),
    [
        (None, "prompt must be a string or a list of token ids"),
        (True, "prompt must be"),
        ([], "prompt must be"),
        (["a", "b"], "a batch of prompts is not supported"),
        ([1, "a"], "prompt must be"),
        ("x" * ((4 << 20) + 1), "more than 4194304"),
    ],
)
def test_parse_completion_refuses_prompts_it_cannot_serve(prompt, words):
    error = refused({"model": "m", "prompt": prompt}, chat=False)
    assert error.param == "prompt" and words in str(error)


def test_parse_refuses_a_body_that_is_not_an_object():
    assert "JSON object" in str(refused([CHAT]))
