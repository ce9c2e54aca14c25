"""A local OpenAI-compatible server for tests: chat completions over real HTTP, so that litellm's own client
path runs as it would against vLLM or Ollama. Each request takes the next scripted `Reply` (a status, headers,
a body, a delay), or, once the script is used up, the scripted test policy's answer to the prompt
(skillstate/scripted), with `usage` counted like a provider's. With `context_window`, a prompt longer than
that many characters is refused as OpenAI refuses one over the model's context length."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: Any = None
    """JSON to send (a str is sent as it is); None: a completion of `text`."""
    text: str = "Action: Wait"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    """Seconds to wait before answering (longer than the client's time-out: a hung call)."""
    cached_tokens: int = 0


@dataclass
class Seen:
    body: dict[str, Any]
    at: float


CONTEXT_WINDOW = {
    "error": {
        "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 "
        "tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}


class OpenAIServer:
    def __init__(self, context_window: int | None = None) -> None:
        self.context_window = context_window
        self.script: list[Reply] = []
        self.requests: list[Seen] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def _next(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(Seen(body, time.monotonic()))
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            if self.script:
                return self.script.pop(0)
        if self.context_window is not None and len(_prompt(body)) > self.context_window:
            return Reply(status=400, body=CONTEXT_WINDOW)
        return Reply(text=_policy_answer(body))

    def _done(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                reply = server._next(body)
                try:
                    time.sleep(reply.delay)
                    payload = reply.body if reply.body is not None else _completion(body, reply)
                    data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up
                        self.wfile.write(data)
                finally:
                    server._done()

        return Handler

    @contextlib.contextmanager
    def running(self) -> Iterator[OpenAIServer]:
        thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._server.shutdown()
            self._server.server_close()


def _prompt(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content") or "") for m in body.get("messages", []))


def _completion(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    prompt_tokens = max(1, len(_prompt(body)) // 4)
    usage: dict[str, Any] = {"prompt_tokens": prompt_tokens, "completion_tokens": max(1, len(reply.text) // 4),
                             "total_tokens": prompt_tokens + max(1, len(reply.text) // 4)}  # fmt: skip
    if reply.cached_tokens:
        usage["prompt_tokens_details"] = {"cached_tokens": reply.cached_tokens}
    return {
        "id": f"chatcmpl-{len(reply.text)}", "object": "chat.completion", "created": 0, "model": body.get("model"),
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": reply.text}}],
        "usage": usage,
    }  # fmt: skip


def _policy_answer(body: dict[str, Any]) -> str:
    from skillstate.agents.scripted.policy import SCRIPTED, answer

    return answer(SCRIPTED, _prompt(body))
