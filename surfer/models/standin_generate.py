"""The stand-in server's SGLang-native routes (surfer/models/standin.py):
`GET /get_model_info` and `POST /generate` with token ids in, answered by the
same responder as its chat completions.

It reads ids with a real tokenizer and chat template (a model directory, e.g.
one `surfer bench gpu make-model` writes): the ids are turned back into the
chat messages they render (each image placeholder paired with the next of
`image_data`), the responder answers them as a chat request, and the answer
goes back as `output_ids` (the answer's ids, what the template writes before
its stop token — Nemotron-H's newline — and the stop token) with SGLang's
`meta_info`. Each image placeholder stands for `IMAGE_TOKENS` ids (as SGLang's
processor expands it; the cache keys them by the image's hash), and
`cached_tokens` is the longest prefix of the expanded ids found among what the
session computed before (its earlier prompts and generated ids, the last
sampled id never computed) — what a server keeping each session's
conversation would find.
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any, Callable

from .chat_tokens import TemplateTokenizer
from .token_chain import common_prefix

IMAGE_TOKENS = 64
PLACEHOLDERS = ("<|image_pad|>", "<image>", "<IMG_CONTEXT>")
WEIGHT_VERSION = "default"
SAMPLED_LOGPROB = -0.25  # the stand-in's account of each sampled token's log-probability


class GenerateRoutes:
    """SGLang's /get_model_info and /generate for one stand-in server."""

    def __init__(self, server: Any, tokenizer: str, parse: Callable[[dict[str, Any]], Any]) -> None:
        self.server = server  # the StandInServer: its model name, responder and request log
        self.parse = parse  # its reading of a chat body (standin.parse_chat_request)
        self.path = tokenizer
        self.chat = TemplateTokenizer.load(tokenizer)
        vocab = self.chat.tokenizer.get_vocab()
        self.placeholder = next(vocab[p] for p in PLACEHOLDERS if p in vocab)
        # a video's tokens: a request holding one and no video is refused, as SGLang's processor does
        self.video_ids = {i: token for token, i in self.chat.tokenizer.get_added_vocab().items() if "video" in token.lower()}
        self.stop = min(self.chat.stop_ids) if self.chat.stop_ids else 0
        self.heads = self._heads()
        # what the template writes between an assistant turn's text and its stop token (Nemotron-H: a newline):
        # a model trained on the template writes it too, before its stop id
        _, _, foot = self.heads[2]
        stop_text = self.chat.decode([self.stop])
        self.before_stop = foot.partition(stop_text)[0] if stop_text and stop_text in foot else ""
        _, user_head, user_foot = self.heads[1]
        shown = self.chat.render([{"role": "user", "content": [{"type": "image"}]}], generation_prompt=False)
        self.image_text = shown[len(user_head):len(shown) - len(user_foot)]  # an image as the template writes it
        self.computed: dict[str, list[list[Any]]] = {}  # per session: the id sequences it computed
        self.requests: list[dict[str, Any]] = []  # the /generate bodies, in order
        self.refuse_images = False  # answer ids with images with HTTP 500, as stock SGLang does for Holotron
        self.answers: list[dict[str, Any]] = []  # what each was answered
        self.cached: list[int] = []  # meta_info.cached_tokens of each answer
        self._lock = threading.Lock()

    def model_info(self) -> dict[str, Any]:
        return {"model_path": self.path, "tokenizer_path": self.path, "is_generation": True,
                "served_model_name": self.server.model, "weight_version": WEIGHT_VERSION}

    def _heads(self) -> list[tuple[str, str, str]]:
        """(role, header, footer) of each role's turn as the template writes it in the history (a template may
        write a conversation's last assistant turn otherwise: Nemotron-Nano-v2's, after the generation prompt)."""
        out = []
        user = self.chat.render([{"role": "user", "content": "\x01"}], generation_prompt=False).partition("\x01")[0]
        for role in ("system", "user", "assistant"):
            text = self.chat.render([{"role": role, "content": "\x00"}, {"role": "user", "content": "\x01"}],
                                    generation_prompt=False)
            head, _, rest = text.partition("\x00")
            out.append((role, head, rest.partition("\x01")[0].removesuffix(user)))
        return out

    def messages(self, text: str, images: list[str]) -> list[dict[str, Any]]:
        """The chat messages `text` renders (the trailing generation prompt left out)."""
        marks = sorted((pos, role, head, foot) for role, head, foot in self.heads
                       for pos in _find_all(text, head))
        turns: list[dict[str, Any]] = []
        taken = iter(images)
        image_text = self.image_text
        for n, (pos, role, head, foot) in enumerate(marks):
            end = marks[n + 1][0] if n + 1 < len(marks) else len(text)
            body = text[pos + len(head):end]
            if n + 1 == len(marks) and role == "assistant":
                break  # the generation prompt
            body = body.removesuffix(foot) if foot else body
            pieces = body.split(image_text)
            if len(pieces) == 1:
                turns.append({"role": role, "content": body})
                continue
            parts: list[dict[str, Any]] = []
            for i, piece in enumerate(pieces):
                if i:
                    parts.append({"type": "image_url", "image_url": {"url": next(taken, "")}})
                if piece.strip("\n"):
                    parts.append({"type": "text", "text": piece})
            turns.append({"role": role, "content": parts})
        return turns

    def answer(self, body: dict[str, Any], session: str | None, rank: str | None = None) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON) of one /generate request (`session`, `rank`: its headers)."""
        failure = self.server._next_failure()
        if failure is not None:
            return failure, {"error": {"message": f"injected failure {failure}"}}
        ids, images = body.get("input_ids"), list(body.get("image_data") or [])
        if body.get("text") is not None or not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
            return 400, {"error": {"message": "the stand-in's /generate takes input_ids (a list of ints) only"}}
        if images and self.refuse_images:  # SGLang 0.5.15's processor for Nemotron-VL, given ids (a list)
            return 500, {"object": "error", "message": "'list' object has no attribute 'replace'", "code": 500}
        video = next((self.video_ids[i] for i in ids if i in self.video_ids), None)
        if video is not None:  # SGLang's processor, on a video token with no video in the request
            return 500, {"object": "error", "code": 500, "message": f"No data iterator found for token: {video}"}
        placeholders = ids.count(self.placeholder)
        if placeholders > len(images):  # SGLang's processor (base_processor.load_mm_data), on ids read as text
            return 500, {"object": "error", "code": 500, "message": "An exception occurred while loading multimodal "
                         "data: Mismatch: More 'IMAGE' tokens found than corresponding data provided."}
        if placeholders != len(images):
            return 400, {"error": {"message": f"prompt has {placeholders} image placeholder token(s) but "
                                              f"{len(images)} image(s) were provided"}}
        expanded, keys = self._expand(ids, images)
        sampling = body.get("sampling_params") or {}
        role = str(body.get("rid") or "policy").split("-")[0]
        chat_body: dict[str, Any] = {"model": self.server.model, "messages": self.messages(self.chat.decode(ids), images)}
        if sampling.get("json_schema"):
            chat_body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": role, "schema": json.loads(sampling["json_schema"])}}
        request = self.parse(chat_body)
        request.session, request.rank = session, rank
        with self.server._lock:
            self.server.requests.append(request)
        reply = self.server.respond(request)
        content = reply if isinstance(reply, str) else json.dumps(reply)
        content += self.before_stop
        output = [*self.chat.encode(content), self.stop]
        if not self.chat.media_ids.isdisjoint(output):
            # a reply that holds an image's token (a model with random weights writes any id): SGLang's text
            # leaves special tokens out, the ids keep them
            content = self.chat.decode([i for i in output[:-1] if i not in self.chat.media_ids])
        with self._lock:
            seen = self.computed.setdefault(session or "", [])
            # the last prompt id is always computed (its logits sample the first new token)
            cached = min(len(keys) - 1, max((common_prefix(keys, earlier) for earlier in seen), default=0))
            seen.append(keys + output[:-1])
            self.requests.append(body)
            self.cached.append(cached)
        meta: dict[str, Any] = {
            "id": body.get("rid"), "finish_reason": {"type": "stop", "matched": self.stop},
            "prompt_tokens": len(expanded), "completion_tokens": len(output), "cached_tokens": cached,
            "weight_version": WEIGHT_VERSION,
        }
        if body.get("return_logprob"):
            meta["output_token_logprobs"] = [[SAMPLED_LOGPROB, i, None] for i in output]
        answer: dict[str, Any] = {"text": content, "output_ids": output, "meta_info": meta}
        if body.get("return_prompt_token_ids"):
            answer["prompt_token_ids"] = expanded
        with self._lock:
            self.answers.append(answer)
        return 200, answer

    def _expand(self, ids: list[int], images: list[str]) -> tuple[list[int], list[Any]]:
        """The ids as the model sees them (each placeholder `IMAGE_TOKENS` times) and as the cache keys them
        (an image's tokens by its hash)."""
        expanded: list[int] = []
        keys: list[Any] = []
        taken = iter(images)
        for i in ids:
            if i == self.placeholder:
                digest = hashlib.sha1(next(taken).encode()).hexdigest()
                expanded += [i] * IMAGE_TOKENS
                keys += [f"{digest}:{k}" for k in range(IMAGE_TOKENS)]
            else:
                expanded.append(i)
                keys.append(i)
        return expanded, keys


def _find_all(text: str, needle: str) -> list[int]:
    out, at = [], text.find(needle)
    while needle and at >= 0:
        out.append(at)
        at = text.find(needle, at + len(needle))
    return out
