"""Each discriminative PRM family on a tiny model built from a config, with a byte-level
tokenizer (one character, one token - plus the family's special tokens), saved to a folder and
loaded the way a real checkpoint is. Expected scores come from running the model directly on
the layout written out by hand."""

import json

import pytest
import torch

from rewardlab import Sample, Status, build
from rewardlab.errors import FormatError
from rewardlab.prm.formats import PRMFormat

QUESTION = "Q?"
STEPS = ["ab", "c"]
COMPLETION = "ab\n\nc"


@pytest.fixture
def tokenizer(tiny_tokenizer):
    from transformers import PreTrainedTokenizerFast

    copy = PreTrainedTokenizerFast(tokenizer_object=tiny_tokenizer.backend_tokenizer.__class__.from_str(
        tiny_tokenizer.backend_tokenizer.to_str()), eos_token="<eos>", pad_token="<pad>")  # fmt: skip
    copy.chat_template = tiny_tokenizer.chat_template
    return copy


def ids_of(tokenizer, text):
    return tokenizer.encode(text, add_special_tokens=False)


def tiny_config(cls_name, tokenizer, **extra):
    import transformers

    config_cls = getattr(transformers, cls_name)
    return config_cls(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
        pad_token_id=tokenizer.pad_token_id, **extra,
    )  # fmt: skip


def save(model, tokenizer, folder):
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def score_with(folder, family, samples, **options):
    reward = build({"type": "prm", "model": folder, "family": family, **options})
    return reward.score(samples)


def test_token_classification_as_trl_lays_it_out(tokenizer, tmp_path):
    from transformers import Qwen2ForTokenClassification

    torch.manual_seed(0)
    model = Qwen2ForTokenClassification(tiny_config("Qwen2Config", tokenizer, num_labels=2)).eval()
    folder = save(model, tokenizer, tmp_path / "prm")
    # TRL: prompt, then each step followed by "\n"; the label sits on each step's last token.
    ids = ids_of(tokenizer, "Q?ab\nc\n")
    with torch.no_grad():
        expected = torch.softmax(model(torch.tensor([ids])).logits[0, [4, 6]], dim=-1)[:, 1].tolist()
    (score,) = score_with(folder, "token_classification", [Sample(prompt=QUESTION, completion=COMPLETION)])
    assert score.steps == pytest.approx(expected, abs=1e-6)
    assert score.value == pytest.approx(min(expected), abs=1e-6)  # min by default


def test_qwen_prm_scores_at_each_extra_0(tokenizer, tmp_path):
    from transformers import Qwen2ForTokenClassification

    tokenizer.add_special_tokens({"additional_special_tokens": ["<extra_0>"]})
    torch.manual_seed(1)
    model = Qwen2ForTokenClassification(tiny_config("Qwen2Config", tokenizer, num_labels=2)).eval()
    folder = save(model, tokenizer, tmp_path / "qwen")
    text = f"system: {PRMFormat.named('qwen_prm').system}\nuser: Q?\nassistant: ab<extra_0>c<extra_0>\n"
    ids = tokenizer.encode(text, add_special_tokens=False)
    marker = tokenizer.convert_tokens_to_ids("<extra_0>")
    positions = [i for i, token in enumerate(ids) if token == marker]
    assert len(positions) == 2
    with torch.no_grad():
        expected = torch.softmax(model(torch.tensor([ids])).logits[0, positions], dim=-1)[:, 1].tolist()
    given = Sample(prompt=QUESTION, completion="ab and c", fields={"steps": STEPS})
    (score,) = score_with(folder, "qwen_prm", [given], aggregate="product")
    assert score.steps == pytest.approx(expected, abs=1e-6)
    assert score.value == pytest.approx(expected[0] * expected[1], abs=1e-6)


def test_qwen_prm_with_its_own_code_in_the_folder(tokenizer, tmp_path):
    """Qwen2.5-Math-PRM ships its model class beside its weights; the config's auto_map names
    it, and the code loads from the folder (never from the hub)."""
    from transformers import Qwen2ForTokenClassification

    tokenizer.add_special_tokens({"additional_special_tokens": ["<extra_0>"]})
    torch.manual_seed(2)
    model = Qwen2ForTokenClassification(tiny_config("Qwen2Config", tokenizer, num_labels=2)).eval()
    folder = tmp_path / "custom"
    save(model, tokenizer, folder)
    (folder / "modeling_tiny_prm.py").write_text(
        "from transformers import Qwen2ForTokenClassification\n\n\n"
        "class TinyProcessRewardModel(Qwen2ForTokenClassification):\n"
        "    def forward(self, *args, **kwargs):\n"
        "        return (super().forward(*args, **kwargs).logits * 2,)  # a tuple, like Qwen's\n"
    )
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoModel": "modeling_tiny_prm.TinyProcessRewardModel"}
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="set trust_remote_code: true"):
        score_with(str(folder), "qwen_prm", [Sample(prompt=QUESTION, completion=COMPLETION)])
    plain = score_with(
        str(folder), "qwen_prm", [Sample(prompt=QUESTION, completion=COMPLETION)], trust_remote_code=True
    )
    text = f"system: {PRMFormat.named('qwen_prm').system}\nuser: Q?\nassistant: ab<extra_0>c<extra_0>\n"
    ids = tokenizer.encode(text, add_special_tokens=False)
    marker = tokenizer.convert_tokens_to_ids("<extra_0>")
    positions = [i for i, token in enumerate(ids) if token == marker]
    with torch.no_grad():
        logits = 2 * model(torch.tensor([ids])).logits[0, positions]
    assert plain[0].steps == pytest.approx(torch.softmax(logits, dim=-1)[:, 1].tolist(), abs=1e-6)


def test_math_shepherd_reads_p_plus_at_each_tag(tokenizer, tmp_path):
    from transformers import LlamaForCausalLM

    tokenizer.add_tokens(["ки"])
    torch.manual_seed(3)
    model = LlamaForCausalLM(tiny_config("LlamaConfig", tokenizer)).eval()
    folder = save(model, tokenizer, tmp_path / "shepherd")
    ids = tokenizer.encode("Q? ab ки\nc ки\n")
    tag = tokenizer.convert_tokens_to_ids("ки")
    positions = [i for i, token in enumerate(ids) if token == tag]
    plus, minus = ids_of(tokenizer, "+")[0], ids_of(tokenizer, "-")[0]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, positions][:, [plus, minus]]
    expected = torch.softmax(logits, dim=-1)[:, 0].tolist()
    (score,) = score_with(folder, "math_shepherd", [Sample(prompt=QUESTION, completion=COMPLETION)])
    assert score.steps == pytest.approx(expected, abs=1e-6)


def test_skywork_value_head(tokenizer, tmp_path):
    from safetensors.torch import save_file
    from transformers import Qwen2Model

    torch.manual_seed(4)
    model = Qwen2Model(tiny_config("Qwen2Config", tokenizer)).eval()
    folder = tmp_path / "skywork"
    save(model, tokenizer, folder)
    weight, bias = torch.randn(1, 32), torch.randn(1)
    save_file(
        {"v_head.summary.weight": weight, "v_head.summary.bias": bias}, str(folder / "value_head.safetensors")
    )
    # Skywork: the problem and a newline, then each line of the response followed by the step token.
    ids = ids_of(tokenizer, "Q?\nab\nc\n")
    with torch.no_grad():
        hidden = model(torch.tensor([ids])).last_hidden_state[0, [5, 7]]
    expected = torch.sigmoid(hidden @ weight.T + bias).squeeze(-1).tolist()
    (score,) = score_with(str(folder), "skywork", [Sample(prompt=QUESTION, completion="ab\nc")])
    assert score.steps == pytest.approx(expected, abs=1e-6)


def test_batching_truncation_and_bad_input(tokenizer, tmp_path):
    from transformers import Qwen2ForTokenClassification

    torch.manual_seed(5)
    model = Qwen2ForTokenClassification(tiny_config("Qwen2Config", tokenizer, num_labels=2)).eval()
    folder = save(model, tokenizer, tmp_path / "prm")
    completions = ["a\n\nb", "xyz", "1. p\n2. q\n3. r", "Step 1: s\nStep 2: t"]
    samples = [Sample(prompt=QUESTION, completion=c) for c in completions]
    together = score_with(folder, "token_classification", samples, batch_tokens=20, max_padding=0.9)
    alone = [score_with(folder, "token_classification", [s])[0] for s in samples]
    for a, b in zip(together, alone, strict=True):
        assert a.steps == pytest.approx(b.steps, abs=1e-5)
    # "Q?" + "ab\n" + "c\n" is 7 tokens: with 5, only the first step's marker (position 4) is read.
    (cut,) = score_with(
        folder, "token_classification", [Sample(prompt=QUESTION, completion=COMPLETION)], max_length=5
    )
    assert len(cut.steps) == 1 and cut.details["truncated"] == {"scored_steps": 1, "total_steps": 2}
    (none,) = score_with(
        folder, "token_classification", [Sample(prompt=QUESTION, completion=COMPLETION)], max_length=3
    )
    assert none.status is Status.INVALID_INPUT and "no step fits" in none.reason
    empty, odd = score_with(
        folder, "token_classification", [Sample(prompt="q", completion=" "), Sample(prompt="q", completion=7)]
    )
    assert empty.status is odd.status is Status.INVALID_INPUT
    assert "no steps" in empty.reason and "completion" in odd.reason


def test_a_marker_inside_a_step_is_refused(tokenizer):
    tokenizer.add_special_tokens({"additional_special_tokens": ["<extra_0>"]})
    with pytest.raises(FormatError, match="3 step markers for 2 steps"):
        PRMFormat.named("qwen_prm").build("q", ["a<extra_0>", "b"], tokenizer)
    with pytest.raises(FormatError, match="'plus' must be one token"):
        PRMFormat("math_shepherd", "ки", good="plus").build("q", ["a"], tokenizer)
    with pytest.raises(ValueError, match="unknown PRM family"):
        PRMFormat.named("orm")


def test_through_the_cli(tokenizer, tmp_path):
    import yaml
    from transformers import Qwen2ForTokenClassification

    from rewardlab.cli import main

    torch.manual_seed(6)
    model = Qwen2ForTokenClassification(tiny_config("Qwen2Config", tokenizer, num_labels=2)).eval()
    folder = save(model, tokenizer, tmp_path / "prm")
    rows = tmp_path / "rollouts.jsonl"
    rows.write_text(
        json.dumps({"id": "a", "prompt": QUESTION, "completion": COMPLETION}) + "\n"
        + json.dumps({"id": "b", "prompt": QUESTION, "completion": ""}) + "\n"
    )  # fmt: skip
    config = tmp_path / "prm.yaml"
    config.write_text(
        yaml.safe_dump(
            {"type": "prm", "model": folder, "family": "token_classification", "aggregate": "last"}
        )
    )
    output = tmp_path / "scores.jsonl"
    assert main(["score", str(rows), "--config", str(config), "--output", str(output), "--no-progress"]) == 0
    records = {r["id"]: r for r in map(json.loads, output.read_text().splitlines())}
    (direct,) = score_with(folder, "token_classification", [Sample(prompt=QUESTION, completion=COMPLETION)])
    assert records["a"]["steps"] == pytest.approx(direct.steps, abs=1e-6)
    assert records["a"]["value"] == pytest.approx(direct.steps[-1], abs=1e-6)
    assert records["b"]["status"] == "invalid_input"
