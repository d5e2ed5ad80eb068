"""Chat completions from a local transformers model - a model folder or a GGUF file - with the
token log-probabilities that verdict scoring needs, and guided choice (the answer is one of a
given list of strings, picked by the model's own likelihood) so that small models still give a
verdict that parses.

One model is loaded once per process and shared: several judges in one config, and the
``serve-model`` server, all use the same weights. Generation holds a lock, since a transformers
model is not safe to run from several threads at once.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from rewardlab.errors import BackendError
from rewardlab.llm.backend import ChatRequest, ChatResponse, TokenLogprob
from rewardlab.llm.gguf_conversion import converted_folder
from rewardlab.optional import require
from rewardlab.rewards.contract import Usage

_loaded: dict[tuple[str, str, str], LocalChatModel] = {}
_loading = threading.Lock()


def load_local_model(path: str | Path, *, dtype: str = "float32", device: str = "cpu") -> LocalChatModel:
    """The model at ``path``, loaded once per process (later calls return the same object)."""
    key = (str(Path(path).expanduser().resolve()), dtype, device)
    with _loading:
        if key not in _loaded:
            _loaded[key] = LocalChatModel(key[0], dtype=dtype, device=device)
        return _loaded[key]


class LocalChatModel:
    """A causal LM with a chat template, answering `ChatRequest`s.

    Args:
        path: A transformers model folder, or a ``.gguf`` file (de-quantized and saved as a folder
            in the cache on first use; needs the ``gguf`` package).
        dtype: Torch dtype of the weights (``float32`` is right on a CPU).
        device: Torch device.
    """

    def __init__(self, path: str | Path, *, dtype: str = "float32", device: str = "cpu"):
        self.torch = require("torch", "the local judge model")
        transformers = require("transformers", "the local judge model")
        self.path = Path(path)
        folder = converted_folder(self.path) if self.path.suffix == ".gguf" else self.path
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
        if not self.tokenizer.chat_template:
            raise ValueError(f"{path} has no chat template, so it cannot be used as a chat judge")
        self.model = transformers.AutoModelForCausalLM.from_pretrained(
            folder, dtype=getattr(self.torch, dtype)
        )
        self.model.to(device)
        self.model.eval()
        self.device = device
        config = self.model.config
        self.context_length = getattr(config, "max_position_embeddings", None)
        pad = self.tokenizer.pad_token_id
        self.pad_token_id = pad if pad is not None else self.tokenizer.eos_token_id
        self._lock = threading.Lock()

    def complete(self, request: ChatRequest, cancelled: threading.Event | None = None) -> ChatResponse:
        """Answer one request (blocking; call it from a worker thread in async code). Generation
        stops at the next token once ``cancelled`` is set."""
        prompt_ids = self._prompt_ids(request)
        with self._lock, self.torch.inference_mode(), self.torch.random.fork_rng(devices=[]):
            # fork_rng: a request's seed must not reseed the process's global generator.
            if request.seed is not None:
                self.torch.manual_seed(request.seed)
            if request.choices:
                return self._choose(prompt_ids, request)
            return self._generate(prompt_ids, request, cancelled or threading.Event())

    def _prompt_ids(self, request: ChatRequest) -> Any:
        encoded = self.tokenizer.apply_chat_template(
            request.message_dicts(),
            add_generation_prompt=not request.continue_final,
            continue_final_message=request.continue_final,
            return_dict=True,
            return_tensors="pt",
        )
        prompt_ids = encoded["input_ids"].to(self.device)
        needed = prompt_ids.shape[1] + (1 if request.choices else request.max_tokens)
        if self.context_length and needed > self.context_length:
            raise BackendError(
                f"the prompt is {prompt_ids.shape[1]} tokens and {request.max_tokens} more were asked for, "
                f"but {self.path.name} has a context of {self.context_length} tokens",
                retryable=False,
                status_code=400,
            )
        return prompt_ids

    def _generate(self, prompt_ids: Any, request: ChatRequest, cancelled: threading.Event) -> ChatResponse:
        sampling = (
            {"do_sample": True, "temperature": request.temperature, "top_k": 0}
            if request.temperature > 0
            else {"do_sample": False}
        )
        stopping = {"stop_strings": list(request.stop), "tokenizer": self.tokenizer} if request.stop else {}
        output = self.model.generate(
            input_ids=prompt_ids,
            attention_mask=self.torch.ones_like(prompt_ids),
            max_new_tokens=request.max_tokens,
            output_logits=True,
            return_dict_in_generate=True,
            pad_token_id=self.pad_token_id,
            stopping_criteria=[lambda *_, **__: cancelled.is_set()],
            **sampling,
            **stopping,
        )
        generated = output.sequences[0, prompt_ids.shape[1] :].tolist()
        special = set(self.tokenizer.all_special_ids)
        ended = bool(generated) and generated[-1] in special
        content_ids = [token for token in generated if token not in special]
        text = self.tokenizer.decode(content_ids, skip_special_tokens=True)
        finish_reason = "stop" if ended else "length"
        for stop in request.stop:
            if stop in text:
                text, finish_reason = text[: text.index(stop)], "stop"
        logprobs = None
        if request.top_logprobs is not None:
            steps = [
                self._token_logprob(logits[0], token, request.top_logprobs)
                for logits, token in zip(output.logits, generated, strict=True)
                if token not in special
            ]
            logprobs = _cut_to_text(steps, len(text))
        return ChatResponse(
            text=text,
            finish_reason=finish_reason,
            logprobs=logprobs,
            usage=Usage(prompt_tokens=prompt_ids.shape[1], completion_tokens=len(generated)),
        )

    def _choose(self, prompt_ids: Any, request: ChatRequest) -> ChatResponse:
        """Score every choice by the log-likelihood of the choice followed by the end of the
        answer, then take the best (or sample one, at a temperature above zero).

        Counting the end of the answer matters when one choice starts another: "1" must not win
        over "10" just by being shorter. The prompt runs once; every choice then continues from
        its key-value cache in one batched forward pass.
        """
        torch = self.torch
        choices = request.choices or ()
        end = self.tokenizer.eos_token_id
        choice_ids = [self.tokenizer(c, add_special_tokens=False)["input_ids"] for c in choices]
        if any(not ids for ids in choice_ids):
            raise BackendError("guided choice: an empty choice", retryable=False, status_code=400)
        prompt_out = self.model(input_ids=prompt_ids, use_cache=True)
        first_logits = prompt_out.logits[0, -1].float()
        cache = prompt_out.past_key_values
        cache.batch_repeat_interleave(len(choice_ids))
        longest = max(len(ids) for ids in choice_ids)
        batch = torch.tensor([ids + [end] * (longest - len(ids)) for ids in choice_ids], device=self.device)
        mask = torch.tensor(
            [[1] * (prompt_ids.shape[1] + len(ids)) + [0] * (longest - len(ids)) for ids in choice_ids],
            device=self.device,
        )
        continued = self.model(input_ids=batch, attention_mask=mask, past_key_values=cache).logits.float()
        # Logits before each choice token, and before the end of the answer.
        step_logits = [[first_logits, *continued[i, : len(ids)]] for i, ids in enumerate(choice_ids)]
        totals = torch.stack(
            [
                sum(torch.log_softmax(logits[j], dim=-1)[token] for j, token in enumerate([*ids, end]))
                for logits, ids in zip(step_logits, choice_ids, strict=True)
            ]
        )
        if request.temperature > 0:
            picked = int(torch.multinomial(torch.softmax(totals / request.temperature, dim=0), 1))
        else:
            picked = int(totals.argmax())
        ids = choice_ids[picked]
        logprobs = None
        if request.top_logprobs is not None:
            logprobs = [
                self._token_logprob(step_logits[picked][j], token, request.top_logprobs)
                for j, token in enumerate(ids)
            ]
        return ChatResponse(
            text=choices[picked],
            finish_reason="stop",
            logprobs=logprobs,
            usage=Usage(prompt_tokens=prompt_ids.shape[1], completion_tokens=len(ids)),
        )

    def _token_logprob(self, logits: Any, token: int, top: int) -> TokenLogprob:
        log_probs = self.torch.log_softmax(logits.float(), dim=-1)
        best = log_probs.topk(top) if top > 0 else None
        alternatives = (
            ()
            if best is None
            else tuple(
                (self.tokenizer.decode([i]), float(v))
                for v, i in zip(best.values.tolist(), best.indices.tolist(), strict=True)
            )
        )
        return TokenLogprob(self.tokenizer.decode([token]), float(log_probs[token]), alternatives)


def _cut_to_text(steps: list[TokenLogprob], length: int) -> list[TokenLogprob]:
    """The tokens that make up the first ``length`` characters (after a stop string cut the text)."""
    kept, seen = [], 0
    for step in steps:
        if seen >= length:
            break
        kept.append(step)
        seen += len(step.token)
    return kept
