"""The lowest layer: the reward contract, composition, the registry, and the rule verifiers.

- The contract: `Sample`, `Score`, `Status`, `Usage`, `Reward` (`contract`); `RuleReward`, the base
  of per-sample checks run in killable workers (`rule`).
- Composition and configuration: `Combine`, `Route` (`combine`), `Fallback` (`fallback`); `build`,
  `register`, `available` (`registry`); each reward's options model, `options_model` and
  `options_schema` (`options`).
- Defenses against reward hacking: `EnsembleReward` (`ensemble`), `LengthControlledReward` and
  `fit_length_calibration` (`length_controlled`).
- Rule verifiers: `MathAnswerReward` (`math`), `CodeExecutionReward` (`code`), format, regex and
  string checks (`format`), `JsonSchemaReward`, `InstructionFollowingReward`, length and
  repetition shaping (`shaping`), `ToolCallReward` (`tool_calls`), `TextSimilarityReward`
  (`text_similarity`).
- Steps: `split_steps` (`step_splitting`), `StepOptions`, `aggregate_steps` and
  `process_advantages` (`steps`).

Names are imported on first use, so importing this package loads no verifier.
"""

from rewardlab.lazy_exports import lazy_exports

_EXPORTS = {
    "Sample": "rewardlab.rewards.contract",
    "Score": "rewardlab.rewards.contract",
    "Status": "rewardlab.rewards.contract",
    "Usage": "rewardlab.rewards.contract",
    "Reward": "rewardlab.rewards.contract",
    "RuleReward": "rewardlab.rewards.rule",
    "Combine": "rewardlab.rewards.combine",
    "Route": "rewardlab.rewards.combine",
    "Fallback": "rewardlab.rewards.fallback",
    "EnsembleReward": "rewardlab.rewards.ensemble",
    "LengthControlledReward": "rewardlab.rewards.length_controlled",
    "fit_length_calibration": "rewardlab.rewards.length_controlled",
    "build": "rewardlab.rewards.registry",
    "register": "rewardlab.rewards.registry",
    "available": "rewardlab.rewards.registry",
    "options_model": "rewardlab.rewards.options",
    "options_schema": "rewardlab.rewards.options",
    "MathAnswerReward": "rewardlab.rewards.math.reward",
    "CodeExecutionReward": "rewardlab.rewards.code.reward",
    "ThinkAnswerFormatReward": "rewardlab.rewards.format",
    "RegexMatchReward": "rewardlab.rewards.format",
    "StringMatchReward": "rewardlab.rewards.format",
    "JsonSchemaReward": "rewardlab.rewards.json_schema",
    "ToolCallReward": "rewardlab.rewards.tool_calls.reward",
    "TextSimilarityReward": "rewardlab.rewards.text_similarity.reward",
    "InstructionFollowingReward": "rewardlab.rewards.instructions",
    "SoftOverlongPunishment": "rewardlab.rewards.shaping",
    "RepetitionPenalty": "rewardlab.rewards.shaping",
    "LengthReward": "rewardlab.rewards.shaping",
    "split_steps": "rewardlab.rewards.step_splitting",
    "StepOptions": "rewardlab.rewards.steps",
    "aggregate_steps": "rewardlab.rewards.steps",
    "process_advantages": "rewardlab.rewards.steps",
}

__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
