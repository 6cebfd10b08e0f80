"""The embedded engine: llama.cpp in process on a GGUF (`model`, `decoder`, `scheduler`,
`reply`, `binding`), which GGUF it loads (`resolve`), `models pull` and the model files' checksum
notes. It imports `protocol`, `config` and `findings`."""
