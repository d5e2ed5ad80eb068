"""Text similarity rewards against reference answers: SQuAD's exact match and token F1,
ROUGE-L, and sacrebleu's BLEU and chrF, for summarisation and search-QA RL.

- `squad`: SQuAD's answer normalisation, exact match and token F1.
- `rouge`: ROUGE-L from a bit-parallel longest common subsequence.
- `reward`: `TextSimilarityReward`, registered as ``text_similarity``.
"""
