"""A small agent program for the capture proxy's tests and docs: three tool-free LLM steps
over HTTP, with the standard library only.

It asks for the facts a question needs, then for an answer from them; an empty
answer is asked again, and a call that fails is retried once. It prints the
answer's first line (or writes it to ``--answer-file``)::

    OPENAI_BASE_URL=http://127.0.0.1:8080/v1 python tests/capture_agent.py --question "Why is the sky blue?"

``--base-url`` overrides ``OPENAI_BASE_URL``; ``--stream`` asks for streamed replies;
``--leak-key`` prints the key it sends on stderr (to test that captures redact it).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import urllib.error
import urllib.request

SYSTEM = "You are a careful assistant. Answer briefly."


def chat(args: argparse.Namespace, key: str, messages: list[dict[str, str]]) -> str:
    """One chat completion; its text."""
    body: dict = {"model": args.model, "messages": messages, "max_tokens": args.max_tokens, "temperature": 0}
    if args.stream:
        body.update(stream=True, stream_options={"include_usage": True})
    request = urllib.request.Request(
        args.base_url.rstrip("/") + "/chat/completions", data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}", "X-Simcore-Agent": args.agent},
    )
    with urllib.request.urlopen(request, timeout=args.timeout) as response:
        raw = response.read().decode("utf-8")
    if not args.stream:
        return json.loads(raw)["choices"][0]["message"].get("content") or ""
    text = []
    for line in raw.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            for choice in json.loads(line[6:]).get("choices", []):
                text.append(choice.get("delta", {}).get("content") or "")
    return "".join(text)


def ask(args: argparse.Namespace, key: str, messages: list[dict[str, str]]) -> str:
    """A chat completion, retried once when the call fails."""
    for attempt in (1, 2):
        try:
            return chat(args, key, messages)
        except (urllib.error.URLError, http.client.HTTPException, ConnectionError) as exc:
            print(f"call failed ({type(exc).__name__}); attempt {attempt} of 2", file=sys.stderr)
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--question", default="Why do leaves change colour in autumn?")
    parser.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1"))
    parser.add_argument("--model", default="agent-model")
    parser.add_argument("--agent", default="program", help="the X-Simcore-Agent label of its calls")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--answer-file", default=None)
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--leak-key", action="store_true")
    args = parser.parse_args()
    key = os.environ.get("OPENAI_API_KEY", "none")
    if args.leak_key:
        print(f"using key {key}", file=sys.stderr)
    messages = [{"role": "system", "content": SYSTEM},
                {"role": "user", "content": f"Question: {args.question}\nWhich two facts does the answer need?"}]
    facts = ask(args, key, messages)
    messages += [{"role": "assistant", "content": facts},
                 {"role": "user", "content": "Now answer the question in one sentence."}]
    answer = ask(args, key, messages)
    if not answer.strip():
        messages += [{"role": "assistant", "content": answer},
                     {"role": "user", "content": "Your answer was empty. Answer the question in one sentence."}]
        answer = ask(args, key, messages)
    final = answer.strip().splitlines()[0] if answer.strip() else ""
    if args.answer_file:
        with open(args.answer_file, "w", encoding="utf-8") as fh:
            fh.write(final + "\n")
    else:
        print(final)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
