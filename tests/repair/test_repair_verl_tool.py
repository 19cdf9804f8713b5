"""verl agent-loop boundary: our tool config loads through verl's own registry, the overrides compose against the
installed verl config, and the tools answer from visible tests only."""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from test_repair_env import FakeJudge, _problem

pytest.importorskip("verl")
pytest.importorskip("hydra")

from rlvr.data.schema import from_ground_truth
from rlvr.repair import EnvConfig, verl_tool


def _compose(overrides):
    import verl
    from hydra import compose, initialize_config_dir

    d = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=d, version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)


def test_overrides_compose(tmp_path):
    cfg = EnvConfig(turns=3, mode="interpreter", max_tool_calls=2)
    path = verl_tool.write_tool_config(tmp_path / "tools.yaml", cfg)
    mt = _compose(verl_tool.repair_overrides(path, cfg)).actor_rollout_ref.rollout
    assert mt.multi_turn.enable is True and mt.multi_turn.tool_config_path == str(path)
    assert mt.multi_turn.max_assistant_turns == 5 and mt.multi_turn.format == "hermes"
    assert mt.agent.default_agent_loop == "tool_agent"


def test_tools_load_and_answer_from_visible_tests(tmp_path, monkeypatch):
    from verl.tools.tool_registry import initialize_tools_from_config

    judge = FakeJudge()
    monkeypatch.setattr(verl_tool, "_JUDGE", judge)
    cfg = EnvConfig(turns=3, mode="interpreter")
    tools = {t.name: t for t in initialize_tools_from_config(str(verl_tool.write_tool_config(tmp_path / "t.yaml",
                                                                                             cfg, 0.1)))}
    assert set(tools) == {"run_tests", "run_python"}
    p = _problem()
    row = verl_tool.repair_row_fields(p, cfg)
    hidden = from_ground_truth(row["reward_model"]["ground_truth"])
    kwargs = row["extra_info"]["tools_kwargs"]["run_tests"]

    async def go():
        t = tools["run_tests"]
        iid, _ = await t.create(create_kwargs=kwargs["create_kwargs"])
        resp, reward, m = await t.execute(iid, {"code": "print('bad')"})
        await t.release(iid)
        out, _, _ = await tools["run_python"].execute("x", {"code": "print(42)"})
        return resp.text, reward, m, out.text

    text, reward, m, out = asyncio.run(go())
    assert "VIS_IN_0" in text and m["verdict"] == "wrong_answer" and reward == pytest.approx(-0.1)
    assert all(t.stdin.strip() not in text for t in hidden.tests) and len(hidden.tests) == 3
    assert [len(j.tests) for j in judge.judged] == [1] and "42" in out
    assert json.loads(json.dumps(row))["agent_name"] == "tool_agent"


@pytest.mark.parametrize("fmt", ["hermes", "qwen3_coder"])
def test_tool_call_text_is_read_back_by_verls_parser_as_the_same_call(fmt):
    from transformers import PreTrainedTokenizerFast
    from verl.experimental.agent_loop.tool_parser import ToolParser

    from rlvr.model import build_tokenizer

    code = 'a = input()\nprint("x\\\\y", a, \'q\')\n\tif a: print({"k": 1})'
    text = "I will test it.\n" + verl_tool.tool_call_text("run_tests", {"code": code}, fmt)
    tok = build_tokenizer(["print(a)\n" * 50, text], vocab_size=300)
    assert isinstance(tok, PreTrainedTokenizerFast)
    parser = ToolParser.get_tool_parser(fmt, tok)
    ids = tok.encode(text, add_special_tokens=False)
    content, calls = asyncio.run(parser.extract_tool_calls(ids, None))
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("run_tests", {"code": code})]
    assert content.strip() == "I will test it."


def test_tool_format_reaches_the_overrides_and_unknown_ones_are_refused(tmp_path):
    cfg = EnvConfig(tool_format="qwen3_coder")
    mt = _compose(verl_tool.repair_overrides(tmp_path / "t.yaml", cfg)).actor_rollout_ref.rollout
    assert mt.multi_turn.format == "qwen3_coder"
    with pytest.raises(ValueError, match="tool_format"):
        EnvConfig(tool_format="xml")
    with pytest.raises(ValueError, match="unknown tool-call format 'xml'"):
        verl_tool.tool_call_text("run_tests", {"code": ""}, "xml")
