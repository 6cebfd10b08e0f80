"""Which model answers: one server, or several replicas behind the router."""

from __future__ import annotations

from remora.config.settings import ServerSettings
from remora.models.http.openai_client import OpenAIChatModel
from remora.models.http.router import Replica, ReplicaRouter


def server_model(server: ServerSettings, *, connections: int = 64) -> Replica:
    """`connections`: requests in flight at once (the run's concurrency)."""
    urls = server.base_urls
    if len(urls) == 1:
        return OpenAIChatModel(server, connections=connections)
    return ReplicaRouter(
        [OpenAIChatModel(server.for_url(url), connections=connections) for url in urls]
    )
