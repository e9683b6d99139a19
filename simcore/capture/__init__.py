"""Perturbation studies of external programs, through a recording proxy.

``python -m simcore.capture --perturb SPEC -- PROGRAM [ARGS...]`` runs any program
that calls its model through OpenAI's chat completions or Responses API or
Anthropic's Messages API against a proxy on 127.0.0.1, which forwards its calls
to an upstream (simcore's stub, a provider, a local server), as they are or
translated to chat completions, records them as a simcore trace with their usage,
and in perturbed runs applies simcore's perturbation operators to the replies the
program receives. The study (baseline, re-runs for the noise floor, perturbed
runs) is measured and written as a study of a simulation is:
``docs/perturbation.md``.

Modules: :mod:`.wire` (the APIs' common form and the chat-completions format),
:mod:`.responses_api` and :mod:`.messages_api` (the Responses and Messages
APIs), :mod:`.upstream` (where calls go), :mod:`.recording` (the trace, usage,
cassette and secret redaction),
:mod:`.perturb` (the operators on calls), :mod:`.proxy` (the aiohttp app),
:mod:`.program` (running the program), :mod:`.study` (the study and its records).
"""
