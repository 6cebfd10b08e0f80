"""The models Remora asks: an OpenAI-compatible server over HTTP (`http/`, with `check-server`),
the embedded llama.cpp engine (`local/`) and the scripted stand-in the tests use (`scripted/`).
Each speaks the interfaces of `protocol`; none imports agents, jobs or anything above them."""
