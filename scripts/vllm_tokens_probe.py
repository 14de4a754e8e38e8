import base64, io, json, sys, urllib.request
from PIL import Image
url = sys.argv[1]; model = sys.argv[2]
def png(color):
    b = io.BytesIO(); Image.new("RGB", (1280, 800), color).save(b, "PNG"); return "data:image/png;base64," + base64.b64encode(b.getvalue()).decode()
def post(messages, extra=None):
    body = {"model": model, "messages": messages, "max_tokens": 24, "temperature": 1.0, "return_token_ids": True, "logprobs": True,
            "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}}}
    body.update(extra or {})
    req = urllib.request.Request(url + "/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=120))
m1 = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": png("red")}}, {"type": "text", "text": "Where is it?"}]}]
r1 = post(m1)
c1 = r1["choices"][0]
p1 = r1.get("prompt_token_ids") or []
ids1 = c1.get("token_ids") or []
lp = [t["logprob"] for t in (c1.get("logprobs") or {}).get("content") or []]
m2 = m1 + [{"role": "assistant", "content": c1["message"]["content"]}, {"role": "user", "content": [{"type": "image_url", "image_url": {"url": png("blue")}}, {"type": "text", "text": "And now?"}]}]
r2 = post(m2)
p2 = r2.get("prompt_token_ids") or []
shared = next((i for i, (a, b) in enumerate(zip(p2, p1 + ids1)) if a != b), min(len(p2), len(p1 + ids1)))
out = {"model_answered": r1.get("model"), "prompt_ids": len(p1), "completion_ids": len(ids1), "logprobs": len(lp),
       "finish_reason": c1.get("finish_reason"), "usage": r1.get("usage"), "first_logprobs": lp[:3],
       "second_prompt_ids": len(p2), "second_extends_first_prompt": p2[:len(p1)] == p1,
       "second_extends_prompt_plus_generated": p2[:len(p1) + len(ids1)] == p1 + ids1,
       "shared_with_prompt_plus_generated": shared, "text": c1["message"]["content"][:80],
       "generated_tail": ids1[-4:], "second_at_break": p2[shared - 2:shared + 4]}
print(json.dumps(out, indent=1))
