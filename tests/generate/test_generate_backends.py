"""Generation backends: samples replay, OpenAI-compatible client (httpx MockTransport), vLLM parameter mapping (fake
``vllm`` module), hf generation with a tiny model built in the test."""

from __future__ import annotations

import json
import sys
import types
from dataclasses import dataclass, field
from typing import ClassVar

import httpx
import pytest

from rlvr.generate import SamplingParams, make_generator
from rlvr.generate.openai_compat import OpenAIGenerator, split_tokens
from rlvr.generate.samples import SamplesGenerator, read_samples

CHAT = [{"role": "user", "content": "Write add(a, b)."}]


# ---------------------------------------------------------------- samples
def test_samples_replay_solution_and_completion(tmp_path):
    f = tmp_path / "s.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in [
        {"task_id": "HumanEval/0", "solution": "def add(a, b):\n    return a + b\n"},
        {"task_id": "HumanEval/0", "completion": "    return b + a\n"},
        {"task_id": "humaneval/HumanEval/1", "solution": "print(1)"},
    ]) + "\n")
    g = make_generator("samples", path=f)
    out = g.generate(["p0", "p1"], 2 - 1, SamplingParams(), ids=["humaneval/HumanEval/0", "humaneval/HumanEval/1"])
    assert [c.text for c in out[0]] == ["def add(a, b):\n    return a + b\n"]
    assert out[1][0].text == "print(1)" and out[1][0].finish_reason == "replay" and out[1][0].n_tokens == 0
    two = g.generate(["p0"], 2, SamplingParams(), ids=["humaneval/HumanEval/0"])
    assert [c.text for c in two[0]][1] == "    return b + a\n"
    with pytest.raises(ValueError, match="1 sample"):
        g.generate(["p1"], 2, SamplingParams(), ids=["humaneval/HumanEval/1"])
    with pytest.raises(ValueError, match="ids"):
        g.generate(["p1"], 1, SamplingParams())


def test_samples_bad_line_names_file_and_line(tmp_path):
    f = tmp_path / "bad.jsonl"
    f.write_text(json.dumps({"task_id": "a", "solution": "x"}) + "\n" + json.dumps({"solution": "y"}) + "\n")
    with pytest.raises(ValueError, match=r"bad\.jsonl:2: field 'task_id'"):
        SamplesGenerator(f)
    f.write_text(json.dumps({"task_id": "a"}) + "\n")
    with pytest.raises(ValueError, match=r"bad\.jsonl:1: .*'solution' or 'completion'"):
        read_samples(f)
    f.write_text("{not json\n")
    with pytest.raises(ValueError, match=r"bad\.jsonl:1: invalid JSON"):
        read_samples(f)


# ---------------------------------------------------------------- openai
def test_openai_chat_request_and_usage():
    seen: list[tuple[str, dict]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append((request.url.path, body))
        n = body["n"]
        choices = [{"index": i, "message": {"role": "assistant", "content": "x" * (i + 1) * 10},
                    "finish_reason": "length" if i == 0 else "stop"} for i in range(n)]
        return httpx.Response(200, json={"choices": choices[::-1], "usage": {"completion_tokens": 9 * n}})

    g = OpenAIGenerator("http://fake/v1", model="m", transport=httpx.MockTransport(handler), concurrency=2)
    sp = SamplingParams(temperature=0.7, top_p=0.9, max_new_tokens=64, seed=3)
    out = g.generate([CHAT, CHAT], 3, sp)
    path, body = seen[0]
    assert path == "/v1/chat/completions"
    assert body == {"model": "m", "n": 3, "temperature": 0.7, "top_p": 0.9, "max_tokens": 64, "seed": 3,
                    "messages": CHAT}
    assert [c.text for c in out[0]] == ["x" * 10, "x" * 20, "x" * 30]  # sorted by choice index
    assert [c.finish_reason for c in out[0]] == ["length", "stop", "stop"]
    assert sum(c.n_tokens for c in out[0]) == 27 and [c.n_tokens for c in out[0]] == [5, 9, 13]
    assert g.stats.n_completions == 6 and g.stats.generated_tokens == 54


def test_openai_string_prompt_uses_completions_and_exact_tokens_for_n1():
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/completions"
        body = json.loads(request.content)
        assert body["prompt"] == "def f():" and "seed" not in body
        return httpx.Response(200, json={"choices": [{"index": 0, "text": " pass", "finish_reason": "stop"}],
                                         "usage": {"completion_tokens": 2}})

    g = OpenAIGenerator("http://fake/v1/", model="m", transport=httpx.MockTransport(handler))
    out = g.generate(["def f():"], 1, SamplingParams(seed=None))
    assert out[0][0].text == " pass" and out[0][0].n_tokens == 2


def test_openai_retries_transient_then_fails_on_client_error(monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)
    calls = {"n": 0}

    def flaky(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] == 1:
            return httpx.Response(503)
        return httpx.Response(200, json={"choices": [{"index": 0, "message": {"content": "ok"}}],
                                         "usage": {"completion_tokens": 1}})

    g = OpenAIGenerator("http://fake/v1", model="m", transport=httpx.MockTransport(flaky))
    assert g.generate([CHAT], 1, SamplingParams())[0][0].text == "ok" and calls["n"] == 2
    bad = OpenAIGenerator("http://fake/v1", model="m", transport=httpx.MockTransport(lambda r: httpx.Response(400)))
    with pytest.raises(httpx.HTTPStatusError):
        bad.generate([CHAT], 1, SamplingParams())
    wrong = OpenAIGenerator("http://fake/v1", model="m",
                            transport=httpx.MockTransport(lambda r: httpx.Response(200, json={"oops": 1})))
    with pytest.raises(ValueError, match="malformed response"):
        wrong.generate([CHAT], 1, SamplingParams())


def test_split_tokens_sums_exactly():
    assert split_tokens(10, ["aaaa", "a"]) == [8, 2]
    assert sum(split_tokens(7, ["a", "bb", "ccc"])) == 7
    assert split_tokens(0, ["a", "b"]) == [0, 0]


# ---------------------------------------------------------------- vllm (fake module)
@dataclass
class _FakeSamplingParams:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    max_tokens: int = 16
    seed: int | None = None


@dataclass
class _Out:
    text: str
    token_ids: list[int]
    finish_reason: str


@dataclass
class _ReqOut:
    outputs: list[_Out] = field(default_factory=list)


class _FakeLLM:
    instances: ClassVar[list[_FakeLLM]] = []

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.calls: list[tuple[str, list, _FakeSamplingParams, dict]] = []
        _FakeLLM.instances.append(self)

    def _res(self, prompts, sp):
        return [_ReqOut([_Out(f"out{j}", [1] * (j + 2), "length" if j else "stop") for j in range(sp.n)])
                for _ in prompts]

    def chat(self, messages, sampling_params, **kw):
        self.calls.append(("chat", messages, sampling_params, kw))
        return self._res(messages, sampling_params)

    def generate(self, prompts, sampling_params, **kw):
        self.calls.append(("generate", prompts, sampling_params, kw))
        return self._res(prompts, sampling_params)


@pytest.fixture(autouse=True)
def _no_multiproc_method_leak(monkeypatch):
    """The vllm backend sets VLLM_WORKER_MULTIPROC_METHOD in os.environ; each test's teardown removes it again."""
    monkeypatch.setenv("VLLM_WORKER_MULTIPROC_METHOD", "x")
    monkeypatch.delenv("VLLM_WORKER_MULTIPROC_METHOD")


def test_vllm_parameter_mapping_with_fake_module(monkeypatch):
    fake = types.ModuleType("vllm")
    fake.LLM = _FakeLLM
    fake.SamplingParams = _FakeSamplingParams
    monkeypatch.setitem(sys.modules, "vllm", fake)
    g = make_generator("vllm", model="Qwen/Qwen2.5-Coder-7B-Instruct", tensor_parallel_size=2,
                       llm_kwargs={"generation_config": "auto", "enforce_eager": True})
    llm = _FakeLLM.instances[-1]
    assert llm.kwargs["generation_config"] == "vllm"  # model generation_config.json never applied
    assert llm.kwargs["model"] == "Qwen/Qwen2.5-Coder-7B-Instruct" and llm.kwargs["tensor_parallel_size"] == 2
    assert llm.kwargs["enforce_eager"] is True
    out = g.generate([CHAT, "raw prompt", CHAT], 2, SamplingParams(temperature=0.6, top_p=0.95, max_new_tokens=99,
                                                                    seed=7))
    (kind1, msgs, sp, kw), (kind2, raws, _, _) = llm.calls
    assert kind1 == "chat" and msgs == [CHAT, CHAT] and kw["add_generation_prompt"] is True
    assert kind2 == "generate" and raws == ["raw prompt"]
    assert sp == _FakeSamplingParams(n=2, temperature=0.6, top_p=0.95, top_k=-1, min_p=0.0, repetition_penalty=1.0,
                                     presence_penalty=0.0, frequency_penalty=0.0, max_tokens=99, seed=7)
    assert [[c.text for c in o] for o in out] == [["out0", "out1"]] * 3
    assert [c.n_tokens for c in out[0]] == [2, 3] and [c.finish_reason for c in out[0]] == ["stop", "length"]
    greedy = g.generate(["x"], 1, SamplingParams(temperature=0.0, top_p=0.5))
    assert llm.calls[-1][2].temperature == 0.0 and llm.calls[-1][2].top_p == 1.0 and len(greedy[0]) == 1


def test_vllm_engine_starts_after_earlier_generators_are_collected(monkeypatch):
    """An earlier in-process generator kept alive only by a reference cycle (as a transformers model can be) is
    collected before the vLLM engine starts, and torch's CUDA cache is emptied where CUDA is up: the engine sizes
    itself from the free memory (the 2 x H100 DPO stage's eval failed on 64 GB an HF check still held)."""
    import gc
    import weakref

    fake = types.ModuleType("vllm")
    fake.SamplingParams = _FakeSamplingParams
    seen: list[bool] = []

    class _Probe:
        pass

    probe = _Probe()
    probe.self = probe  # a cycle: only the cycle collector frees it
    alive = weakref.ref(probe)
    del probe

    class _LLM(_FakeLLM):
        def __init__(self, **kwargs):
            seen.append(alive() is None)
            super().__init__(**kwargs)

    fake.LLM = _LLM
    monkeypatch.setitem(sys.modules, "vllm", fake)
    emptied: list[int] = []
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: emptied.append(1))
    gc.disable()
    try:
        make_generator("vllm", model="m")
    finally:
        gc.enable()
    assert seen == [True] and emptied == [1]


def test_vllm_engine_processes_are_spawned_not_forked(monkeypatch):
    """The engine is created with VLLM_WORKER_MULTIPROC_METHOD=spawn (a forked engine core died on the 4 x H100 after
    the repair stage's in-process checkpoint merge had touched CUDA); an explicit setting is kept."""
    import os

    fake = types.ModuleType("vllm")
    fake.SamplingParams = _FakeSamplingParams
    seen: list[str | None] = []

    class _LLM(_FakeLLM):
        def __init__(self, **kwargs):
            seen.append(os.environ.get("VLLM_WORKER_MULTIPROC_METHOD"))
            super().__init__(**kwargs)

    fake.LLM = _LLM
    monkeypatch.setitem(sys.modules, "vllm", fake)
    monkeypatch.setenv("VLLM_WORKER_MULTIPROC_METHOD", "x")  # registered, so teardown removes what the backend sets
    monkeypatch.delenv("VLLM_WORKER_MULTIPROC_METHOD")
    make_generator("vllm", model="m")
    monkeypatch.setenv("VLLM_WORKER_MULTIPROC_METHOD", "fork")
    make_generator("vllm", model="m")
    assert seen == ["spawn", "fork"]


def test_unknown_backend():
    with pytest.raises(ValueError, match="unknown generation backend"):
        make_generator("tgi")


# ---------------------------------------------------------------- hf (tiny model built here)
@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    from rlvr.model import build_tiny_model

    corpus = ["def add(a, b):\n    return a + b\n", "Write a function that adds two numbers.\n"] * 30
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "m", corpus, seed=0, vocab_size=300, hidden_size=32,
                            layers=1, heads=2, kv_heads=1, intermediate_size=64)


@pytest.mark.slow
def test_hf_generate_greedy_batched_order_and_counts(tiny_dir):
    g = make_generator("hf", model=str(tiny_dir), device="cpu", batch_size=2)
    prompts = [CHAT, "def add(a, b):", [{"role": "user", "content": "Write a function that adds two numbers. " * 3}]]
    sp = SamplingParams(temperature=0.0, max_new_tokens=12, seed=0)
    out = g.generate(prompts, 2, sp)
    assert [len(o) for o in out] == [2, 2, 2]
    assert all(o[0] == o[1] for o in out)  # greedy: identical samples
    assert all(1 <= c.n_tokens <= 12 for o in out for c in o)
    assert all((c.finish_reason == "length") == (c.n_tokens == 12) for o in out for c in o)
    assert g.stats.n_prompts == 3 and g.stats.n_completions == 6
    assert g.stats.generated_tokens == sum(c.n_tokens for o in out for c in o)
    rev = g.generate(prompts[::-1], 1, sp)  # same batches (sorted by length), results back in input order
    assert [o[0] for o in rev] == [o[0] for o in out[::-1]]
    assert g.render(CHAT) == "<|im_start|>user\nWrite add(a, b).<|im_end|>\n<|im_start|>assistant\n"


@pytest.mark.slow
def test_hf_sampling_seeded_and_eos_cut(tiny_dir):
    g = make_generator("hf", model=str(tiny_dir), device="cpu", batch_size=4)
    sp = SamplingParams(temperature=1.0, top_p=0.95, max_new_tokens=8, seed=123)
    a = g.generate([CHAT, "x = "], 3, sp)
    b = g.generate([CHAT, "x = "], 3, sp)
    assert a == b and [len(o) for o in a] == [3, 3]
    assert len({c.text for c in a[0]}) > 1  # samples differ within a prompt
    eos = g.tokenizer.convert_tokens_to_ids("<|im_end|>")
    c = g._completion([5, 6, eos, 7, 8])
    assert c.n_tokens == 3 and c.finish_reason == "stop"
    with pytest.raises(ValueError, match="n must be"):
        g.generate([CHAT], 0, sp)
