"""preference_pairs: TRL's DPO rows (standard and conversational), seeds and settings, from a result or texts."""
import json

import pytest

from nsample.analysis import preference_pairs
from nsample.models.prompts import Chat

TEXTS = ["32", "42", "41", "42."]


def test_one_row_per_chosen_rejected_pair_from_texts():
    pairs = preference_pairs(TEXTS, chosen=[1, 3], rejected=[0, 2], prompt="What is 17 + 25?")
    assert pairs[["chosen_index", "rejected_index"]].values.tolist() == [[1, 0], [1, 2], [3, 0], [3, 2]]
    assert pairs.loc[0, ["prompt", "chosen", "rejected"]].tolist() == ["What is 17 + 25?", "42", "32"]
    assert pairs["chosen_seed"].isna().all()  # plain texts have no seeds
    assert preference_pairs(TEXTS, chosen=[1], rejected=[], prompt="p").empty


def test_chat_prompts_give_the_conversational_form():
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "17 + 25?"}]
    row = preference_pairs(TEXTS, [1], [0], prompt=messages).iloc[0]
    assert row["prompt"] == messages
    assert row["chosen"] == [{"role": "assistant", "content": "42"}]
    assert row["rejected"] == [{"role": "assistant", "content": "32"}]
    # a continued answer (a branch): the open assistant message is the start of both answers
    branch = Chat(messages + [{"role": "assistant", "content": "The answer is "}])
    row = preference_pairs(TEXTS, [1], [0], prompt=branch).iloc[0]
    assert row["prompt"] == messages and row["chosen"][0]["content"] == "The answer is 42"


def test_bad_indices_are_refused():
    with pytest.raises(ValueError, match="both chosen and rejected"):
        preference_pairs(TEXTS, [1], [1, 2], prompt="p")
    with pytest.raises(ValueError, match="no choice 7"):
        preference_pairs(TEXTS, [7], [0], prompt="p")
    with pytest.raises(ValueError, match="need the prompt"):
        preference_pairs(TEXTS, [0], [1])
    with pytest.raises(TypeError):
        preference_pairs(TEXTS, [0], [1], prompt=[1, 2, 3])


def test_a_result_brings_its_prompt_seeds_and_settings(tiny_engine, tmp_path):
    messages = [{"role": "user", "content": "What is 17 + 25? Answer with just the number."}]
    result = tiny_engine.generate(messages, n=3, seed=40, max_tokens=6, temperature=0.8)
    pairs = preference_pairs(result, chosen=[2], rejected=[0, 1])
    assert len(pairs) == 2 and pairs["prompt"].iloc[0] == messages
    assert pairs["chosen"].iloc[0] == [{"role": "assistant", "content": result.choices[2].text}]
    assert pairs["rejected_seed"].tolist() == [40, 41] and pairs["chosen_seed"].tolist() == [42, 42]
    assert pairs["settings"].iloc[0]["temperature"] == 0.8 and pairs["settings"].iloc[0]["n"] == 3
    assert pairs["model"].iloc[0] == tiny_engine.name
    # the DataFrame from to_dataframe() works too, with the prompt given
    assert preference_pairs(result.to_dataframe(), [2], [0], prompt=messages)["chosen_seed"].tolist() == [42]
    # JSONL as TRL reads it: one object per line with prompt / chosen / rejected
    path = tmp_path / "pairs.jsonl"
    pairs.to_json(path, orient="records", lines=True, force_ascii=False)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [set(r) >= {"prompt", "chosen", "rejected"} for r in rows] == [True, True]
    assert rows[0]["chosen"][0]["role"] == "assistant" and rows[1]["rejected_seed"] == 41
