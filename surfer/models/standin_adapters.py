"""The stand-in server's adapters (LoRA), loaded and unloaded at run time the way vLLM 0.25-0.26
does it, errors included (vllm/entrypoints/openai/models/serving.py, vllm/exceptions.py):

    POST /v1/load_lora_adapter {lora_name, lora_path}   200 "Success: LoRA adapter 'x' added successfully."
                                                        404 NotFoundError "Loading lora x failed: No adapter found for PATH"
                                                        400 "The lora adapter 'x' has already been loaded. ..."
    POST /v1/unload_lora_adapter {lora_name}            404 "The lora adapter 'x' cannot be found."
    GET  /v1/models                                     the base model, then each adapter (root: its path, parent: the base)
    POST /v1/chat/completions {model: "x"}              served by adapter x; the answer's `model` is "x"

A path "exists" when it is a directory on this machine (the stand-in loads no weights). Modes:
`off` — vLLM without VLLM_ALLOW_RUNTIME_LORA_UPDATING: the routes are not there (FastAPI's 404
`{"detail": "Not Found"}`); `on`; `not-enabled` — the routes are there but the server was started
without --enable-lora: a load answers HTTP 500 "LoRA is not enabled. Use --enable-lora to enable
LoRA.". With `engine="sglang"` the routes are SGLang's (`/load_lora_adapter`, outside /v1, answering
`{success, error_message}` with HTTP 400 on failure) and a chat request names its adapter in
`lora_path`."""

from __future__ import annotations

import os
import threading
from typing import Any

LORA_MODES = ("off", "on", "not-enabled")
NOT_FOUND_ROUTE = {"detail": "Not Found"}


def _error(status: int, kind: str, message: str) -> tuple[int, dict[str, Any]]:
    return status, {"error": {"message": message, "type": kind, "param": None, "code": status}}


class StandInAdapters:
    def __init__(self, mode: str, engine: str, base_model: str) -> None:
        if mode not in LORA_MODES:
            raise ValueError(f"lora must be one of {LORA_MODES}, got {mode!r}")
        self.mode = mode
        self.engine = engine
        self.base_model = base_model
        self.loaded: dict[str, str] = {}  # adapter name -> its path
        self.events: list[tuple[str, str]] = []  # ("load" | "unload", name), in order
        self._lock = threading.Lock()

    def route(self, path: str) -> str | None:
        """"load" or "unload" for a POST to this engine's adapter routes, else None."""
        path = path.split("?")[0].rstrip("/")
        prefix = "" if self.engine == "sglang" else "/v1"
        for verb in ("load", "unload"):
            if path == f"{prefix}/{verb}_lora_adapter":
                return verb
        return None

    def handle(self, verb: str, body: dict[str, Any]) -> tuple[int, Any]:
        """(HTTP status, JSON payload or text) of a load or unload."""
        if self.mode == "off":
            return 404, NOT_FOUND_ROUTE
        status, payload = self._load(body) if verb == "load" else self._unload(body)
        if self.engine != "sglang":
            return status, payload
        message = payload if isinstance(payload, str) else payload["error"]["message"]
        ok = status == 200
        return (200 if ok else 400), {"success": ok, "error_message": None if ok else message,
                                      "loaded_adapters": dict(self.loaded)}

    def _load(self, body: dict[str, Any]) -> tuple[int, Any]:
        name, path = body.get("lora_name"), body.get("lora_path")
        if not name or not path:
            return _error(400, "InvalidUserInput", "Both 'lora_name' and 'lora_path' must be provided.")
        with self._lock:
            if name in self.loaded and not body.get("load_inplace"):
                return _error(400, "InvalidUserInput", f"The lora adapter '{name}' has already been loaded. "
                              "If you want to load the adapter in place, set 'load_inplace' to True.")
            if self.mode == "not-enabled":
                return _error(500, "InternalServerError", "LoRA is not enabled. Use --enable-lora to enable LoRA.")
            if not os.path.isdir(path):
                return _error(404, "NotFoundError", f"Loading lora {name} failed: No adapter found for {path}")
            self.loaded[name] = path
            self.events.append(("load", name))
        return 200, f"Success: LoRA adapter '{name}' added successfully."

    def _unload(self, body: dict[str, Any]) -> tuple[int, Any]:
        name = body.get("lora_name")
        if not name:
            return _error(400, "InvalidUserInput", "'lora_name' needs to be provided to unload a LoRA adapter.")
        with self._lock:
            if name not in self.loaded:
                return _error(404, "NotFoundError", f"The lora adapter '{name}' cannot be found.")
            del self.loaded[name]
            self.events.append(("unload", name))
        return 200, f"Success: LoRA adapter '{name}' removed successfully."

    def cards(self) -> list[dict[str, Any]]:
        """The adapters' entries of /v1/models."""
        with self._lock:
            return [{"id": name, "object": "model", "owned_by": self.engine, "root": path, "parent": self.base_model}
                    for name, path in self.loaded.items()]

    def served_model(self, body: dict[str, Any]) -> tuple[str | None, tuple[int, Any] | None]:
        """The model a chat request is served by (its answer's `model`), or the error answer: vLLM's
        404 for a name it does not serve, SGLang's error for an adapter never loaded."""
        model = body.get("model")
        with self._lock:
            if self.engine == "sglang":
                adapter = body.get("lora_path")
                if adapter:
                    if adapter not in self.loaded:
                        return None, _error(400, "BadRequestError", f"Got LoRA adapter that has never been loaded: {adapter}")
                    return model, None
            if model == self.base_model or model in self.loaded:
                return model, None
        return None, _error(404, "NotFoundError", f"The model `{model}` does not exist.")
