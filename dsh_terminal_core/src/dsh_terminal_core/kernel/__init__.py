"""The harness kernel: plugins, DI wiring, agents, tools, jobs, the prompt, the errors.

Owns: the plugin host (:mod:`.plugins`, :mod:`.hookspecs`), the containers' wiring
(:mod:`.wiring`, :mod:`.context`), :class:`~.harness.Harness`, agents and their
notices (:mod:`.agents`), tools and their argument check (:mod:`.tools`,
:mod:`.toolschema`, :mod:`.schemacheck`), background jobs (:mod:`.jobs` and the core
``jobs`` plugin), cancellation, the error codes, result bounds, and the secret value
type every layer may carry (:mod:`.secret`).

May import: the standard library and the kernel's own third-party dependencies
(attrs, pluggy, dependency-injector, jsonschema) — no other layer of this package.
Every other layer imports the kernel; the import contracts in ``pyproject.toml`` (checked
by ``tests/test_layers.py``) keep the arrows one-way.
"""
