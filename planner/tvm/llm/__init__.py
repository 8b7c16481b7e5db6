"""LLM deployments: every function of a decoder with a paged KV cache, planned and measured.

``decoders`` holds the decoders written the way TVM's users deploy them (and what a model file
may return), ``deployment`` plans, builds, checks and measures every function under every
strategy, ``handover`` carries a deployment from the repository's process to the compile,
``runtime`` runs a deployment's steps with TVM's runtime alone, ``cli`` is ``planner llm``.
"""
