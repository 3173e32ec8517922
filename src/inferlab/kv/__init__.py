"""KV-cache sizing: the model registry (models.json, every number with its source), the formulas
(dense, GQA, MLA, sliding window, tensor parallel, quantized), Hugging Face config.json reading,
strict byte units, and the generated answer sheet of seed 002 (derivations)."""
