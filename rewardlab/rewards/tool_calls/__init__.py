"""Tool-call rewards: the function calls a completion makes, matched against reference calls.

- `calls`: what a call is (`ToolCall`, `ExpectedCall`) and `MalformedCall`, the error of a call
  that cannot be read.
- `reading`: the calls of a completion - OpenAI-style ``tool_calls`` in chat messages, and the
  text formats of Hermes/Qwen, Llama 3.1, Mistral, gpt-oss (Harmony) and pythonic calls, or the
  one a tokenizer's chat template defines.
- `reference`: the reference calls of a sample (BFCL's ``ground_truth`` form, or OpenAI-style).
- `matching`: names and arguments compared as values (BFCL's type rules), calls paired by a
  maximum matching, steps in order.
- `reward`: `ToolCallReward`, registered as ``tool_call``.
"""
