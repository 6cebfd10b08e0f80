"""LoRA fine-tuning on the CPU with torch and PEFT (the `train` extra).

The loss is taken on the model's own reply tokens only (the prompt is context), and the
language-model head is applied only at those positions: with Gemma's 262k-word vocabulary the
head over every prompt position would cost more than the rest of the model. One example per
step, examples in a seeded order per epoch; a checkpoint after every `checkpoint_every` steps
lets a stopped run go on where it was (same data and settings only).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer

from remora.agents.adapters import LoraShape
from remora.training.dataset import Example

CHECKPOINT_EVERY = 10
"""Steps between checkpoints (a step on the 270M model takes seconds on 2 cores)."""


@dataclass(frozen=True)
class Encoded:
    ids: torch.Tensor
    """Prompt then reply token ids, 1-D."""
    prompt_tokens: int

    @property
    def reply_tokens(self) -> int:
        return int(self.ids.numel()) - self.prompt_tokens


StepReport = Callable[[int, int, float], None]
"""(steps done, steps in all, the last step's loss)."""


class LoraTrainer:
    """A base model with LoRA adapters on `settings.targets`, ready to train and score."""

    def __init__(self, base: Path, settings: LoraShape, *, seed: int, threads: int) -> None:
        torch.manual_seed(seed)
        torch.set_num_threads(threads)
        self.settings, self.seed = settings, seed
        self.tokenizer: Any = AutoTokenizer.from_pretrained(base)
        model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
        config = LoraConfig(
            r=settings.rank,
            lora_alpha=settings.alpha,
            target_modules=list(settings.targets),
            lora_dropout=0.0,
            bias="none",
            task_type="CAUSAL_LM",
        )
        self.model: PeftModel = get_peft_model(model, config)
        self.causal: Any = self.model.get_base_model()
        self.softcap: float | None = getattr(self.causal.config, "final_logit_softcapping", None)
        self.optimizer = torch.optim.AdamW(
            [p for p in self.model.parameters() if p.requires_grad], lr=settings.learning_rate
        )
        self.steps_done = 0

    # -- data ---------------------------------------------------------------------------------

    def encode(self, example: Example) -> Encoded:
        """Prompt and reply tokenized apart, as the engine sees them: the prompt tokenized
        whole (control tokens parsed) after `<bos>` (a chat prompt renders its own; a
        completion's prompt is sent without, and the engine and vLLM add it), the reply as the
        continuation after it."""
        prompt = self.tokenizer(example.prompt, add_special_tokens=False)["input_ids"]
        bos = self.tokenizer.bos_token_id
        if bos is not None and prompt[:1] != [bos]:
            prompt = [bos, *prompt]
        reply = self.tokenizer(example.reply, add_special_tokens=False)["input_ids"]
        return Encoded(torch.tensor([*prompt, *reply], dtype=torch.long), len(prompt))

    def fits(self, encoded: Encoded) -> bool:
        return encoded.reply_tokens > 0 and encoded.ids.numel() <= self.settings.max_tokens

    # -- loss ---------------------------------------------------------------------------------

    def loss(self, encoded: Encoded) -> torch.Tensor:
        """Mean cross-entropy of the reply tokens given everything before them."""
        ids = encoded.ids.unsqueeze(0)
        hidden = self.causal.model(input_ids=ids).last_hidden_state[0]
        start = encoded.prompt_tokens - 1
        logits = self.causal.lm_head(hidden[start:-1])
        if self.softcap:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return torch.nn.functional.cross_entropy(logits.float(), encoded.ids[start + 1 :])

    def mean_loss(
        self, data: Sequence[Encoded], between: Callable[[], None] = lambda: None
    ) -> float | None:
        """Mean loss per reply token over `data` (None when empty): the held-out score.
        `between` is called after each example (it may raise to stop)."""
        if not data:
            return None
        total = tokens = 0.0
        self.model.eval()
        with torch.no_grad():
            for encoded in data:
                total += float(self.loss(encoded)) * encoded.reply_tokens
                tokens += encoded.reply_tokens
                between()
        return total / tokens

    def estimate_seconds(self, data: Sequence[Encoded]) -> float:
        """Seconds the training will take: forward and backward passes on the shortest and the
        longest example, timed (after one to warm up) and thrown away, give a step's fixed cost
        and its cost per token, summed over every step."""
        short = min(data, key=lambda item: item.ids.numel())
        long = max(data, key=lambda item: item.ids.numel())
        self._pass(short)
        short_s, long_s = self._pass(short), self._pass(long)
        tokens = int(long.ids.numel() - short.ids.numel())
        per_token = max(long_s - short_s, 0.0) / tokens if tokens else 0.0
        fixed = max(short_s - per_token * short.ids.numel(), 0.0)
        total = sum(fixed + per_token * item.ids.numel() for item in data)
        return total * self.settings.epochs

    def _pass(self, sample: Encoded) -> float:
        self.model.train()
        started = time.perf_counter()
        self.loss(sample).backward()  # type: ignore[no-untyped-call]
        elapsed = time.perf_counter() - started
        self.optimizer.zero_grad(set_to_none=True)
        return elapsed

    # -- training -----------------------------------------------------------------------------

    def order(self, count: int) -> list[int]:
        """Example indices for every step of every epoch, the same for the same seed."""
        steps: list[int] = []
        for epoch in range(self.settings.epochs):
            indices = list(range(count))
            random.Random(f"{self.seed}:{epoch}").shuffle(indices)
            steps.extend(indices)
        return steps

    def train(
        self, data: Sequence[Encoded], checkpoint: Path, digest: str, report: StepReport
    ) -> list[float]:
        """Train on `data` for the configured epochs; the losses of the steps run now."""
        steps = self.order(len(data))
        self._resume(checkpoint, digest)
        losses: list[float] = []
        self.model.train()
        for step in range(self.steps_done, len(steps)):
            loss = self.loss(data[steps[step]])
            loss.backward()  # type: ignore[no-untyped-call]
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            value = float(loss.detach())
            if not math.isfinite(value):
                raise RuntimeError(f"the loss became {value} at step {step + 1}")
            losses.append(value)
            self.steps_done = step + 1
            if self.steps_done % CHECKPOINT_EVERY == 0:
                self._save(checkpoint, digest)
            report(self.steps_done, len(steps), value)
        return losses

    def _resume(self, checkpoint: Path, digest: str) -> None:
        if not checkpoint.is_file():
            return
        state = torch.load(checkpoint, weights_only=False)
        if state["digest"] != digest or state["settings"] != self._identity():
            return  # other data or settings: start again (the file is overwritten later)
        self.model.load_state_dict(state["adapter"], strict=False)
        self.optimizer.load_state_dict(state["optimizer"])
        self.steps_done = int(state["steps_done"])

    def _save(self, checkpoint: Path, digest: str) -> None:
        adapter = {
            name: tensor for name, tensor in self.model.state_dict().items() if "lora_" in name
        }
        state = {
            "digest": digest,
            "settings": self._identity(),
            "adapter": adapter,
            "optimizer": self.optimizer.state_dict(),
            "steps_done": self.steps_done,
        }
        partial = checkpoint.with_suffix(".partial")
        torch.save(state, partial)
        partial.replace(checkpoint)

    def _identity(self) -> dict[str, Any]:
        return {**self.settings.model_dump(mode="json"), "seed": self.seed}

    # -- results ------------------------------------------------------------------------------

    def lora_weights(self) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """Each adapted layer's (A, B) matrices by its module path (`model.layers.0.self_attn.
        q_proj`): A is rank x in, B is out x rank, as PEFT and llama.cpp both store them."""
        out: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        for name, module in self.causal.named_modules():
            lora_a = getattr(module, "lora_A", None)
            if lora_a is None or "default" not in lora_a:
                continue
            out[name] = (
                lora_a["default"].weight.detach().clone(),
                module.lora_B["default"].weight.detach().clone(),
            )
        return out
