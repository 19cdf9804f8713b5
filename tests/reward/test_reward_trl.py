"""TRL reward functions: signature, chat/plain completions, None for sandbox errors, async; two real GRPO steps."""

from __future__ import annotations

import asyncio
import shutil

import pytest
from reward_fixtures import HUMANEVAL_0, MBPP_2, STDIO_SUM, FakeJudge, fenced

from rlvr.data.schema import ground_truth
from rlvr.reward.modes import RewardConfig
from rlvr.reward.scoring import ScoringOptions
from rlvr.reward.trl import AsyncCodeReward, CodeReward, completion_text, make_reward_funcs

GT = ground_truth(STDIO_SUM)


def test_plain_completions_all_modes():
    comps = [fenced("print(6) #WA"), fenced("print(6) #HALF"), fenced("print(6)"), "no code", fenced("x #SANDBOX")]
    gts = [GT] * len(comps)
    got = {
        m: make_reward_funcs(m, judge=FakeJudge(), options=ScoringOptions(retry_backoff_s=0))[0](
            prompts=["p"] * 5, completions=comps, ground_truth=gts
        )
        for m in ("sparse", "dense", "shaped")
    }
    assert got["sparse"] == [0.0, 0.0, 1.0, 0.0, None]
    assert got["dense"] == pytest.approx([0.0, 1 / 3, 1.0, 0.0, None])
    assert got["shaped"][:4] == pytest.approx([0.0, 1 / 3, 1.0, -0.5]) and got["shaped"][4] is None


def test_chat_completions_and_logging():
    j = FakeJudge()
    [f] = make_reward_funcs("sparse", judge=j)
    comps = [
        [{"role": "assistant", "content": fenced("print(6)")}],
        [{"role": "assistant", "content": [{"type": "text", "text": fenced("print(1) #WA")}]}],
    ]
    extra, metrics = {}, {}
    out = f(
        prompts=[[{"role": "user", "content": "q"}]] * 2,
        completions=comps,
        completion_ids=[[1, 2], [3]],
        ground_truth=[GT, GT],
        data_source=["stdio200"] * 2,
        trainer_state=None,
        log_extra=lambda k, v: extra.__setitem__(k, v),
        log_metric=lambda k, v: metrics.__setitem__(k, v),
    )
    assert out == [1.0, 0.0]
    assert extra["status"] == ["accepted", "wrong_answer"]
    assert metrics["reward/accepted"] == 0.5 and metrics["reward/sandbox_error"] == 0.0
    assert f.__name__ == "code_sparse"


def test_completion_text_shapes():
    assert completion_text("abc") == "abc"
    assert completion_text([{"role": "assistant", "content": "a"}, {"role": "tool", "content": "x"}]) == "a"
    assert completion_text([1, {"role": "assistant", "content": [{"type": "text", "text": "b"}, 7]}]) == "b"
    assert completion_text(None) == "" and completion_text(b"x\xff") == "x\ufffd"


def test_no_code_is_not_sent_to_judge():
    j = FakeJudge()
    make_reward_funcs("dense", judge=j)[0](prompts=["p"], completions=["I refuse."], ground_truth=[GT])
    assert j.items == 0


def test_missing_or_bad_ground_truth_fails_loudly():
    [f] = make_reward_funcs("dense", judge=FakeJudge())
    with pytest.raises(ValueError, match="ground_truth"):
        f(prompts=["p"], completions=["print(1)"])
    with pytest.raises(ValueError, match="data_source='mbpp'"):
        f(prompts=["p"], completions=["print(1)"], ground_truth=['{"no": 1}'], data_source=["mbpp"])


def test_async_variant_is_a_coroutine_function_for_trl():
    from trl.trainer.utils import is_async_callable

    [f] = make_reward_funcs("sparse", judge=FakeJudge(), use_async=True)
    assert isinstance(f, AsyncCodeReward) and is_async_callable(f)
    assert not is_async_callable(make_reward_funcs("sparse", judge=FakeJudge())[0])
    out = asyncio.run(f(prompts=["p"] * 2, completions=[fenced("print(6)"), fenced("#WA")], ground_truth=[GT, GT]))
    assert out == [1.0, 0.0]


def test_factory_modes():
    assert isinstance(make_reward_funcs(RewardConfig(mode="shaped"), judge=FakeJudge())[0], CodeReward)
    with pytest.raises(ValueError):
        make_reward_funcs("binary", judge=FakeJudge())


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
def test_real_judge_mixed_batch(judge):
    [f] = make_reward_funcs("dense", judge=judge)
    probs = [STDIO_SUM, HUMANEVAL_0, MBPP_2, STDIO_SUM, HUMANEVAL_0]
    comps = [
        fenced(STDIO_SUM.solutions[0]),
        "    return False\n",  # HumanEval body continuation, wrong on 4 of 7 asserts -> the check fails
        fenced(MBPP_2.solutions[0]),
        fenced("print(0)"),
        fenced("def has_close_elements(numbers, threshold):\n    while True:\n        pass\n"),
    ]
    out = f(prompts=["p"] * 5, completions=comps, ground_truth=[ground_truth(p) for p in probs])
    assert out == [1.0, 0.0, 1.0, 0.0, 0.0]


def _tiny_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = ["print(sum(map(int, input().split())))", "```python\nprint(6)\n```", "def f(x):\n    return x"] * 20
    tok.train_from_iterator(
        corpus,
        trainers.BpeTrainer(
            vocab_size=300, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>")


def test_two_grpo_steps_with_this_reward(tmp_path):
    import torch
    from datasets import Dataset
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    torch.manual_seed(0)
    tok = _tiny_tokenizer()
    cfg = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=256,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=tok.eos_token_id,
    )
    model = Qwen2ForCausalLM(cfg)
    ds = Dataset.from_list([{"prompt": "Sum the numbers:\n", "ground_truth": GT, "data_source": "stdio200"}] * 4)
    judge = FakeJudge()
    calls: list[int] = []

    class Counting(CodeReward):
        def __call__(self, *a, **kw):
            out = super().__call__(*a, **kw)
            calls.append(len(out))
            return out

    reward = Counting(RewardConfig(mode="shaped"), judge)
    args = GRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=8,
        max_steps=2,
        learning_rate=1e-4,
        report_to="none",
        use_vllm=False,
        logging_steps=1,
        save_strategy="no",
        use_cpu=True,
        bf16=False,
    )
    trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=args, train_dataset=ds, processing_class=tok)
    trainer.train()
    assert sum(calls) >= 4 and all(n == 2 for n in calls)
    logged = [h for h in trainer.state.log_history if "reward" in h]
    assert len(logged) == 2
    assert all(h["reward"] == pytest.approx(-0.5) for h in logged)  # random tiny model: never any code


class _DyingJudge(FakeJudge):
    """Accepts everything for its first ``alive`` calls, then every submission is a sandbox_error (a dead judge)."""

    def __init__(self, alive: int = 0) -> None:
        super().__init__()
        self.alive = alive

    def judge_many(self, items):
        if self.calls >= self.alive:
            self.calls += 1
            return [self._one(p, "#SANDBOX") for p, _ in items]
        return super().judge_many(items)


@pytest.mark.parametrize("policy", ["exclude", "zero"])
def test_two_steps_whose_judged_completions_all_failed_stop_training(policy):
    """A dead judge fails the second step in a row in either sandbox_error mode; a completion without code (scored
    without the judge) does not hide it, a batch where nothing reached the judge is no verdict on the judge (neither
    counts nor resets), one answer from the judge resets the count, and batches of one step are one step."""
    from types import SimpleNamespace

    from rlvr.reward.modes import RewardShaping
    from rlvr.reward.step_guard import JudgeDied

    def at(step):
        return SimpleNamespace(global_step=step)

    cfg = RewardConfig(mode="shaped", shaping=RewardShaping(sandbox_error=policy))
    f = CodeReward(cfg, _DyingJudge(), ScoringOptions(retry_backoff_s=0))
    comps = [fenced("print(6)"), "no code here", fenced("print(6)")]
    dead = [None if policy == "exclude" else 0.0, pytest.approx(-0.5), None if policy == "exclude" else 0.0]
    assert f(prompts=["p"] * 3, completions=comps, ground_truth=[GT] * 3, trainer_state=at(4)) == dead  # step 5
    assert f(prompts=["p"] * 3, completions=comps, ground_truth=[GT] * 3, trainer_state=at(4)) == dead  # still 5
    assert f(prompts=["p"], completions=["no code"], ground_truth=[GT], trainer_state=at(5)) == [pytest.approx(-0.5)]
    with pytest.raises(JudgeDied, match=r"^TRL GRPO step 7: all 2 samples sent to the judge .* as did all 4 of step "
                                        r"5: no answer from the judge for 2 consecutive steps"):
        f(prompts=["p"] * 3, completions=comps, ground_truth=[GT] * 3, trainer_state=at(6))

    class Flaky(FakeJudge):
        """A sandbox_error for every program while ``dead``."""

        dead = False

        def judge_many(self, items):
            self.calls += 1
            return [self._one(p, "#SANDBOX" if self.dead else c) for p, c in items]

    judge = Flaky()
    flaky = CodeReward(cfg, judge, ScoringOptions(retry_backoff_s=0))
    for step in range(6):  # dead, alive, dead, alive…: never two dead steps in a row
        judge.dead = step % 2 == 0
        out = flaky(prompts=["p"] * 2, completions=[fenced("print(6)")] * 2, ground_truth=[GT] * 2,
                    trainer_state=at(step))
        assert out == ([None if policy == "exclude" else 0.0] * 2 if judge.dead else [1.0, 1.0])
    g = AsyncCodeReward(cfg, _DyingJudge(), ScoringOptions(retry_backoff_s=0))
    asyncio.run(g(prompts=["p"], completions=[fenced("print(6)")], ground_truth=[GT]))  # no state: a step per call
    with pytest.raises(JudgeDied, match=r"^TRL GRPO step 2: all 1 samples"):
        asyncio.run(g(prompts=["p"], completions=[fenced("print(6)")], ground_truth=[GT]))


def test_a_judge_that_dies_mid_run_stops_grpo_at_that_step(tmp_path):
    """Through TRL's GRPOTrainer: step 1 is judged, the judge dies, step 2 trains on no reward, step 3 raises out of
    ``train()`` (the stage then exits with the one-line message) instead of training on no reward to the end."""
    import torch
    from datasets import Dataset
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    from rlvr.reward.step_guard import JudgeDied

    torch.manual_seed(0)
    tok = _tiny_tokenizer()
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256,
                      pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=tok.eos_token_id)
    ds = Dataset.from_list([{"prompt": "Sum the numbers:\n", "ground_truth": GT, "data_source": "stdio200"}] * 8)

    class WritesCode(CodeReward):
        """The tiny random model writes no code: score its completions as if each were a program."""

        def _items(self, completions, *a):
            return super()._items([fenced("print(6)") for _ in completions], *a)

    reward = WritesCode(RewardConfig(mode="sparse"), _DyingJudge(alive=1), ScoringOptions(retry_backoff_s=0))
    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=2, num_generations=2,
                      max_completion_length=8, max_steps=4, learning_rate=1e-4, report_to="none", use_vllm=False,
                      logging_steps=1, save_strategy="no", use_cpu=True, bf16=False)
    trainer = GRPOTrainer(model=Qwen2ForCausalLM(cfg), reward_funcs=[reward], args=args, train_dataset=ds,
                          processing_class=tok)
    with pytest.raises(JudgeDied, match=r"^TRL GRPO step 3: all 2 samples sent to the judge .* as did all 2 of step 2"):
        trainer.train()
    assert trainer.state.global_step == 2


def test_all_pass_and_all_fail_group_shares_logged():
    """Issue 42: the zero-variance groups split into all-pass / all-fail per step (groups = prompt + ground_truth)."""
    [f] = make_reward_funcs("sparse", judge=FakeJudge())
    ok, wa = fenced("print(6)"), fenced("print(6) #WA")
    metrics: dict = {}
    f(prompts=["a", "a", "b", "b", "c", "c", "d"], completions=[ok, ok, wa, wa, ok, wa, ok], ground_truth=[GT] * 7,
      log_metric=lambda k, v: metrics.__setitem__(k, v))
    # groups a (all pass), b (all fail), c (mixed); d has one completion: not a group
    assert metrics["reward/all_pass_frac"] == pytest.approx(1 / 3)
    assert metrics["reward/all_fail_frac"] == pytest.approx(1 / 3)


def test_group_extremes_leaves_out_excluded_scores_and_singletons():
    from rlvr.reward.trl import group_extremes

    assert group_extremes(["a", "a", "a", "b"], [1.0, None, 1.0, 0.0]) == (1.0, 0.0)
    assert group_extremes([], []) == (0.0, 0.0)
    with pytest.raises(ValueError, match="2 group keys for 1 scores"):
        group_extremes(["a", "b"], [1.0])
