"""The tokenizer files as a checkpoint ships them, the demo's trained tokenizer, and chat templates rendered
as transformers renders them."""

from __future__ import annotations

import json

import pytest

from ge_plugin.errors import TokenizerError
from ge_plugin.text.chat import ChatTemplate
from ge_plugin.text.demo import train_demo_tokenizer, write_demo_tokenizer_files
from ge_plugin.text.tokenizer import Tokenizer


def test_demo_tokenizer_has_contract_b_vocabulary_and_specials(demo_tokenizer):
    assert demo_tokenizer.vocab_size == 512
    assert (demo_tokenizer.special.pad_id, demo_tokenizer.special.bos_id, demo_tokenizer.special.eos_id) == (
        0,
        1,
        2,
    )
    assert [demo_tokenizer.backend.id_to_token(i) for i in range(3)] == ["<pad>", "<s>", "</s>"]
    assert demo_tokenizer.byte_fallback_ids == frozenset()  # byte-level: every byte is a token of its own


def test_demo_tokenizer_trains_to_the_same_bytes_and_rewrites_nothing(tmp_path, demo_files):
    assert train_demo_tokenizer().to_str(pretty=True) + "\n" == demo_files[0].read_text(encoding="utf-8")
    first = write_demo_tokenizer_files(tmp_path)
    assert [written for _, written in first] == [True, True]
    assert [written for _, written in write_demo_tokenizer_files(tmp_path)] == [False, False]


def test_tokenizer_prompt_gets_one_bos_and_round_trips(demo_tokenizer):
    text = "Hello, 世界 🙂 café"
    ids = demo_tokenizer.encode_prompt(text)
    assert ids[0] == 1 and ids.count(1) == 1  # the post-processor's BOS; add_bos_token adds no second one
    assert demo_tokenizer.decode(ids) == text
    assert demo_tokenizer.decode(ids, skip_special_tokens=False) == "<s>" + text


def test_tokenizer_add_bos_token_without_a_post_processor(llama_tokenizer):
    ids = llama_tokenizer.encode_prompt("hi")
    assert ids[0] == llama_tokenizer.special.bos_id and ids.count(ids[0]) == 1


def test_tokenizer_chat_is_rendered_by_its_template_and_encoded_without_extra_specials(demo_tokenizer):
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi 🙂"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "Bye"},
    ]
    text = demo_tokenizer.chat_template.render(messages)
    assert text == "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi 🙂 [/INST] Hello. </s><s>[INST] Bye [/INST]"
    ids = demo_tokenizer.encode_chat(messages)
    assert ids.count(1) == 2 and ids.count(2) == 1  # the template's two <s> and one </s>, as special tokens
    assert demo_tokenizer.decode(ids, skip_special_tokens=False) == text


def test_tokenizer_chat_template_refusal_is_a_tokenizer_error(demo_tokenizer):
    with pytest.raises(TokenizerError, match="Conversation roles must alternate"):
        demo_tokenizer.encode_chat([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])


def test_chat_template_has_transformers_globals_and_filters():
    template = ChatTemplate(
        "{% for m in messages %}{{ m | tojson }}{% if loop.last %}{% break %}{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}{{ eos_token }}{% endif %}{{ strftime_now('%Y') | length }}",
        {"eos_token": "</s>"},
    )
    assert template.render([{"role": "user", "content": "é"}]) == '{"role": "user", "content": "é"}</s>4'


def test_chat_template_sandbox_refuses_what_a_template_must_not_reach():
    template = ChatTemplate("{{ messages.__class__.__mro__[1].__subclasses__() }}", {})
    with pytest.raises(TokenizerError, match="chat template"):
        template.render([{"role": "user", "content": "x"}])
    with pytest.raises(TokenizerError, match="does not compile"):
        ChatTemplate("{% for %}", {})


def test_tokenizer_without_a_template_says_so(tmp_path, demo_files):
    tokenizer = Tokenizer.from_files(demo_files[0])
    with pytest.raises(TokenizerError, match="has no chat template"):
        tokenizer.encode_chat([{"role": "user", "content": "x"}])


def test_tokenizer_files_that_cannot_be_read_name_the_file(tmp_path, demo_files):
    with pytest.raises(TokenizerError, match=r"missing\.json: cannot read"):
        Tokenizer.from_files(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(TokenizerError, match=r"bad\.json: not a Hugging Face tokenizer\.json"):
        Tokenizer.from_files(tmp_path / "bad.json")
    config = tmp_path / "tokenizer_config.json"
    config.write_text(json.dumps({"bos_token": "<bos>"}))
    with pytest.raises(TokenizerError, match="bos_token '<bos>' is not in the vocabulary"):
        Tokenizer.from_files(demo_files[0], config)
    config.write_text(json.dumps({"bos_token": {"content": "<s>", "lstrip": False}, "chat_template": 3}))
    with pytest.raises(TokenizerError, match="chat_template is neither"):
        Tokenizer.from_files(demo_files[0], config)
    config.write_text("[1]")
    with pytest.raises(TokenizerError, match="holds a JSON object"):
        Tokenizer.from_files(demo_files[0], config)


def test_tokenizer_named_chat_templates_use_the_default(demo_files, tmp_path):
    config = tmp_path / "tokenizer_config.json"
    config.write_text(
        json.dumps(
            {"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]}
        )
    )
    assert Tokenizer.from_files(demo_files[0], config).chat_template.render([]) == "D"


def test_tokenizer_vocab_check_against_the_model(demo_tokenizer):
    demo_tokenizer.check_vocab(512, "llama")
    demo_tokenizer.check_vocab(576, "llama")  # a model's vocabulary padded to a round size
    with pytest.raises(TokenizerError, match="512 tokens but model 'llama' has a vocabulary of 500"):
        demo_tokenizer.check_vocab(500, "llama")
