"""The small agent of ``capture_agent.py`` written on the official SDKs, three ways, for the capture
proxy's tests and docs.

It asks for the facts a question needs, then for a one-sentence answer from them;
an empty answer is asked again (the empty turn left out: Anthropic's API refuses
empty assistant turns). It prints the answer's first line. ``--api`` picks
how it calls the model:

- ``chat``: ``openai``, ``client.chat.completions.create`` (or ``.stream``);
- ``responses``: ``openai``, ``client.responses.create`` (or ``.stream``), the
  conversation as input items;
- ``messages``: ``anthropic``, ``client.messages.create`` (or ``.stream``).

Each client is built as a program would build it, with no arguments: the SDK reads
its base URL and key from the environment (``OPENAI_BASE_URL``,
``ANTHROPIC_BASE_URL`` ...), and retries failed calls as it does by default::

    python tests/capture_sdk_agent.py --api responses --stream
"""

from __future__ import annotations

import argparse

SYSTEM = "You are a careful assistant. Answer briefly."
QUESTION = "Why do leaves change colour in autumn?"


def ask_chat(args: argparse.Namespace, messages: list[dict[str, str]]) -> str:
    from openai import OpenAI

    client = OpenAI()
    chat = [{"role": "system", "content": SYSTEM}, *messages]
    if args.stream:
        with client.chat.completions.stream(model=args.model, messages=chat, max_tokens=args.max_tokens) as stream:
            return stream.get_final_completion().choices[0].message.content or ""
    reply = client.chat.completions.create(model=args.model, messages=chat, max_tokens=args.max_tokens)
    return reply.choices[0].message.content or ""


def ask_responses(args: argparse.Namespace, messages: list[dict[str, str]]) -> str:
    from openai import OpenAI

    client = OpenAI()
    if args.stream:
        with client.responses.stream(model=args.model, instructions=SYSTEM, input=messages,
                                     max_output_tokens=args.max_tokens) as stream:
            return stream.get_final_response().output_text
    return client.responses.create(model=args.model, instructions=SYSTEM, input=messages,
                                   max_output_tokens=args.max_tokens).output_text


def ask_messages(args: argparse.Namespace, messages: list[dict[str, str]]) -> str:
    from anthropic import Anthropic

    client = Anthropic()
    if args.stream:
        with client.messages.stream(model=args.model, system=SYSTEM, messages=messages,
                                    max_tokens=args.max_tokens) as stream:
            message = stream.get_final_message()
    else:
        message = client.messages.create(model=args.model, system=SYSTEM, messages=messages,
                                         max_tokens=args.max_tokens)
    return "".join(block.text for block in message.content if block.type == "text")


ASK = {"chat": ask_chat, "responses": ask_responses, "messages": ask_messages}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--api", choices=sorted(ASK), default="chat")
    parser.add_argument("--stream", action="store_true", help="stream every reply (through the SDK's helper)")
    parser.add_argument("--question", default=QUESTION)
    parser.add_argument("--model", default="agent-model")
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()
    ask = ASK[args.api]
    messages = [{"role": "user", "content": f"Question: {args.question}\nWhich two facts does the answer need?"}]
    facts = ask(args, messages)
    messages += [{"role": "assistant", "content": facts},
                 {"role": "user", "content": "Now answer the question in one sentence."}]
    answer = ask(args, messages)
    if not answer.strip():
        messages.append({"role": "user", "content": "Your answer was empty. Answer the question in one sentence."})
        answer = ask(args, messages)
    print(answer.strip().splitlines()[0] if answer.strip() else "")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
