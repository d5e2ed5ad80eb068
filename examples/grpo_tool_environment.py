"""GRPO with a tool environment (TRL's ``environment_factory``) and rewardlab trajectory rewards.

The environment is a panel of numbered buttons (`ButtonPanel`); its one tool, ``press(n)``,
records the press. Each task asks for one button ("Press 3."), and the dataset's
``expected_state`` column says what the panel should hold afterwards (``{"pressed": [3]}``).
TRL runs the multi-turn rollouts: the policy writes a tool call, TRL calls the environment's
method and appends the result as a ``tool`` message, the policy answers again. The completion a
reward function receives is that whole trajectory (assistant message with ``tool_calls``, tool
result, final assistant message), and TRL passes each rollout's environment as
``environments=``; rewardlab's TRL adapter puts a JSON view of it in
``fields["environment_state"]``.

The reward is a rewardlab `Combine` of two outcome checks: ``state`` (``environment_state``: the
panel against the expected state) and ``answer`` (``final_answer`` over ``regex_match``: the
final message says it is done).

Everything is built here, offline: a byte-level tokenizer with a chat template that renders
tool calls (``<call>{json}</call>``) and a response template that parses them back (what TRL's
``parse_response`` needs), and a two-layer Llama built from a config and first taught, by a few
steps of plain supervised training, to answer the two tasks with the right call - a random tiny
model would never call a tool, and there would be no trajectory to score.

Run (about a minute on a CPU; prints each step's reward and what the reward function saw):
    python examples/grpo_tool_environment.py [--steps 2] [--out grpo-tool-environment]
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from rewardlab import build
from rewardlab.integrations.trl import as_reward_func

TASKS = (2, 3)
#: Renders user, assistant (text and ``<call>`` tool calls) and tool messages; it only appends as
#: messages are added, which TRL's tool loop needs (``is_chat_template_prefix_preserving``).
CHAT_TEMPLATE = (
    "{% for m in messages %}"
    "{% if m['role'] == 'assistant' %}A:{{ m['content'] or '' }}"
    "{% for c in m.get('tool_calls') or [] %}<call>{{ c['function'] | tojson }}</call>{% endfor %}<eos>\n"
    "{% elif m['role'] == 'tool' %}T:{{ m['content'] }}\n"
    "{% else %}U:{{ m['content'] }}\n{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}A:{% endif %}"
)
#: transformers' response template (``tokenizer.parse_response``) for that chat template.
RESPONSE_TEMPLATE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "A:",
    "fields": {
        "tool_calls": {
            "open": "<call>",
            "close_pattern": r"</call>\s*",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close_pattern": r"<eos>\s*", "content": "text"},
    },
}
REWARD = {
    "type": "combine",
    "name": "panel",
    "components": {
        "state": {"type": "environment_state", "expected_field": "expected_state"},
        "answer": {"type": "final_answer", "reward": {"type": "regex_match", "pattern": "^Done"}},
    },
}


class ButtonPanel:
    """A panel of numbered buttons: TRL exposes `press` to the policy as a tool."""

    def __init__(self) -> None:
        self.pressed: list[int] = []

    def reset(self, **kwargs: Any) -> None:
        self.pressed = []

    def press(self, n: int) -> str:
        """Press a button.

        Args:
            n: The button's number.
        """
        self.pressed.append(n)
        return f"pressed {n}"


def tool_tokenizer() -> Any:
    """A byte-level tokenizer (every byte a token, no merges) with the tool chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1}
    for char in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[char] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<eos>", pad_token="<pad>")
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.response_template = RESPONSE_TEMPLATE
    return tokenizer


def conversation(n: int) -> list[dict[str, Any]]:
    """The task "Press n." solved: the call, its result, and the final answer."""
    call = {"type": "function", "function": {"name": "press", "arguments": {"n": n}}}
    return [
        {"role": "user", "content": f"Press {n}."},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "name": "press", "content": f"pressed {n}"},
        {"role": "assistant", "content": "Done."},
    ]


def taught_policy(tokenizer: Any, steps: int = 300, seed: int = 0) -> Any:
    """A two-layer Llama from a config, trained by ``steps`` of supervised learning on the solved
    tasks, so that it writes a well-formed tool call; which button it presses is still mostly a
    guess (it tends to press 2), which leaves GRPO something to learn. One CPU thread: on a
    shared machine, that was ten times faster than the default."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    model = LlamaForCausalLM(config)
    texts = [tokenizer.apply_chat_template(conversation(n), tokenize=False) for n in TASKS]
    batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for _ in range(steps):
            model(**batch, labels=labels).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    finally:
        torch.set_num_threads(threads)
    return model


def task_dataset() -> Any:
    from datasets import Dataset

    return Dataset.from_dict(
        {
            "prompt": [[{"role": "user", "content": f"Press {n}."}] for n in TASKS],
            # JSON text: a datasets column of mappings would fill missing keys with None.
            "expected_state": [f'{{"pressed": [{n}]}}' for n in TASKS],
        }
    )


def trainer(reward_funcs: list[Any], out: str, steps: int = 2, seed: int = 0) -> Any:
    """A GRPOTrainer on the CPU: groups of 4 rollouts of one task per step, with the panel."""
    import trl

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory is experimental
    tokenizer = tool_tokenizer()
    args = trl.GRPOConfig(
        output_dir=out, use_cpu=True, per_device_train_batch_size=4, num_generations=4,
        max_completion_length=96, max_steps=steps, logging_steps=1, report_to="none",
        save_strategy="no", learning_rate=1e-4, seed=seed,
    )  # fmt: skip
    return trl.GRPOTrainer(
        model=taught_policy(tokenizer, seed=seed),
        processing_class=tokenizer,
        reward_funcs=reward_funcs,
        args=args,
        train_dataset=task_dataset(),
        environment_factory=ButtonPanel,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--out", default="grpo-tool-environment")
    options = parser.parse_args(argv)
    reward = build(REWARD)
    run = trainer([as_reward_func(reward)], options.out, steps=options.steps)
    run.train()
    for entry in run.state.log_history:
        if "rewards/panel/mean" in entry:
            print(
                f"step {entry['step']}: panel {entry['rewards/panel/mean']:.3f}, "
                f"state {entry.get('panel/state', float('nan')):.3f}, "
                f"answer {entry.get('panel/answer', float('nan')):.3f}, "
                f"tool calls per rollout {entry.get('tools/call_frequency', float('nan')):.2f}"
            )
    reward.close()


if __name__ == "__main__":
    main()
