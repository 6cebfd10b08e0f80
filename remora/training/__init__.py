"""`remora train`: verified transcripts to a LoRA adapter for one agent, in the formats vLLM and
the embedded engine load (docs/TRAINING.md). Only `card` is needed at run time; the rest imports
torch, transformers and peft (the `train` extra) when training starts."""
