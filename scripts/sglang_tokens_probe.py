"""What SGLang's cache keeps for a hybrid (Holotron) between requests sent as ids with screenshots.

    python3 scripts/sglang_tokens_probe.py MODEL_DIR [URL]

Sends, to a running SGLang server's /generate: A (a system turn, a screenshot and a task), then the same
A again, then A's ids + the ids it generated + a text-only user turn (B1), then the same with a new
screenshot (B2), then B2 + its reply + a third screenshot's turn (C). Prints each request's
prompt tokens (images expanded) and cached tokens: what was reused where a request ended."""

from __future__ import annotations

import io
import json
import sys
import urllib.request

from PIL import Image

from surfer.models.backend import ImagePart, Message, TextPart
from surfer.models.chat_tokens import TemplateTokenizer, template_messages


def screenshot(n: int) -> ImagePart:
    image = Image.new("RGB", (512, 512), ((60 * n) % 256, (90 * n + 40) % 256, (150 * n + 80) % 256))
    for x in range(0, 512, 64):
        for y in range(0, 512, 64):
            image.putpixel((x + n, y + n), (255, 255, 255))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return ImagePart(buffer.getvalue(), "image/png", step=n)


def generate(url: str, ids: list[int], images: list[ImagePart]) -> dict:
    body = {"input_ids": ids, "image_data": [i.data_url() for i in images],
            "sampling_params": {"temperature": 0, "max_new_tokens": 12}}
    request = urllib.request.Request(url + "/generate", json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as response:
        return json.loads(response.read())


def main() -> None:
    model, url = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "http://127.0.0.1:8000")
    chat = TemplateTokenizer.load(model)
    system = Message.text("system", "You are a web agent. Answer with one action.")
    shots = [screenshot(n) for n in range(3)]
    messages = [system, Message("user", (shots[0], TextPart("Task: open the form.")))]
    ids = chat.encode(chat.render(template_messages(messages), generation_prompt=True))
    images = [shots[0]]

    def send(name: str, ids: list[int], images: list[ImagePart]) -> dict:
        answer = generate(url, ids, images)
        meta = answer["meta_info"]
        print(f"{name}: sent {len(ids)} ids, {len(images)} image(s); prompt {meta['prompt_tokens']}, cached "
              f"{meta.get('cached_tokens')}, generated {len(answer['output_ids'])}", flush=True)
        return answer

    a = send("A", ids, images)
    send("A again", ids, images)

    def extend(ids: list[int], answer: dict, before: list[Message], turn: Message) -> list[int]:
        out = [i for i in answer["output_ids"] if i not in chat.stop_ids]
        reply = Message.text("assistant", answer["text"])
        text = chat.continuation(before, reply, [turn])
        assert text is not None, "the template does not append"
        return [*ids, *out, *chat.encode(text)]

    text_turn = Message.text("user", "The page did not change. Next action?")
    send("B1 (A + reply + a text turn)", extend(ids, a, messages, text_turn), images)
    image_turn = Message("user", (shots[1], TextPart("After the click. Next action?")))
    b2_ids = extend(ids, a, messages, image_turn)
    b2 = send("B2 (A + reply + a screenshot turn)", b2_ids, [*images, shots[1]])
    before = [*messages, Message.text("assistant", a["text"]), image_turn]
    third = Message("user", (shots[2], TextPart("After typing. Next action?")))
    send("C (B2 + reply + a screenshot turn)", extend(b2_ids, b2, before, third), [*images, shots[1], shots[2]])


if __name__ == "__main__":
    main()
