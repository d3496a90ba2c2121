"""The official `openai` Python client (installed in the vLLM venv) against a dolphin proxy in front of real vLLM.

Usage: python openai_client.py BASE_URL MODEL PROMPT_TEXT
Prints one JSON object: for chat (plain, streamed with usage, streamed without), and completions, the greedy text,
the usage the client saw, and whether a streamed answer without include_usage carried a usage chunk.
"""
import json
import sys

from openai import OpenAI

base, model, prompt = sys.argv[1], sys.argv[2], sys.argv[3]
client = OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=120)
messages = [{"role": "user", "content": prompt}]
common = {"model": model, "max_tokens": 8, "temperature": 0}


def usage(u):
    if u is None:
        return None
    details = getattr(u, "prompt_tokens_details", None)
    return {
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "cached_tokens": getattr(details, "cached_tokens", None) if details else None,
    }


out = {}
r = client.chat.completions.create(messages=messages, **common)
out["chat"] = {"text": r.choices[0].message.content, "usage": usage(r.usage)}

text, seen_usage = "", None
for chunk in client.chat.completions.create(
    messages=messages, stream=True, stream_options={"include_usage": True}, **common
):
    if chunk.choices:
        text += chunk.choices[0].delta.content or ""
    if chunk.usage is not None:
        seen_usage = usage(chunk.usage)
out["chat_stream_usage"] = {"text": text, "usage": seen_usage}

text, usage_chunks = "", 0
for chunk in client.chat.completions.create(messages=messages, stream=True, **common):
    if chunk.choices:
        text += chunk.choices[0].delta.content or ""
    if getattr(chunk, "usage", None) is not None:
        usage_chunks += 1
out["chat_stream"] = {"text": text, "usage_chunks": usage_chunks}

r = client.completions.create(prompt=prompt, **common)
out["completion"] = {"text": r.choices[0].text, "usage": usage(r.usage)}

text, seen_usage = "", None
for chunk in client.completions.create(prompt=prompt, stream=True, stream_options={"include_usage": True}, **common):
    if chunk.choices:
        text += chunk.choices[0].text or ""
    if chunk.usage is not None:
        seen_usage = usage(chunk.usage)
out["completion_stream_usage"] = {"text": text, "usage": seen_usage}

print(json.dumps(out))
