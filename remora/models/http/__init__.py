"""A model server over HTTP: the OpenAI-compatible client (aiohttp, retries, size caps, streamed
replies), adaptive concurrency, several replicas behind one client, and `check-server`. It
imports `protocol`, `config` and `findings`."""
