"""`remora train`: verified transcripts to a LoRA adapter for one agent, in the formats vLLM and
the embedded engine load (docs/TRAINING.md). It writes the adapter's card; reading cards is the
agents' (`agents/adapters.py`), so nothing at run time needs this package, which imports torch,
transformers and peft (the `train` extra) when training starts. It may import the analysis, jobs
and everything below them."""
