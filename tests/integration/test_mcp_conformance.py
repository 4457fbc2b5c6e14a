"""The MCP maintainers' referee, ``@modelcontextprotocol/conformance``, both revisions (§30.3).

The suite runs every scenario a revision requires against ``dsh-terminal mcp --http``
with the test-only fixture plugin installed. Every check must pass except those listed
below, each for a capability this server does not offer and with the reason; a listed
check that passes fails the test too, so the list cannot go stale. The suite's own tally
is printed for the record (``-s``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from . import conformance

pytestmark = pytest.mark.skipif(
    conformance.missing() is not None, reason=str(conformance.missing())
)

# -- what this server does not offer, per check ------------------------------------------

_PROMPTS = "the server offers no prompts (it declares no `prompts` capability): Method not found"
_RESOURCES = (
    "the server offers no resources (it declares no `resources` capability): Method not found"
)
_COMPLETION = "the server offers no completions (no `completions` capability): Method not found"
_SAMPLING = "the server never asks the client's model (sampling): tools run programs, not prompts"
_FORM = (
    "the server asks its person only in URL mode (a page served by the server), never with a "
    "form the client fills in: secrets must not pass through the client (§17)"
)
_CONTENT = "tools answer with text and structured content only, never images, audio or resources"
_PROGRESS = "tools report no progress: a call returns when readiness decides (§14)"
_ROOTS = "the server never asks the client for its roots: the workspace is the server's setting"
_HEADERS = "no tool declares `x-mcp-header` parameters (SEP-2243 custom headers)"
_FIXED_LIST = "the tool list never changes while the server runs, so no list_changed is sent"
_NO_PROTOCOL_FAILURE = (
    "every failure of a tool is its own result here (`error [CODE]`, isError): the registry "
    "catches what a tool raises, so no call fails at the protocol level and no task ends `failed`"
)
_NO_REQUIRED_TASKS = (
    "no tool requires a task: a client without the tasks extension gets every call answered "
    "in its request, as before the extension existed"
)

COMMON: dict[str, str] = {
    "completion-complete/completion-complete": _COMPLETION,
    "tools-call-image/tools-call-image": _CONTENT,
    "tools-call-audio/tools-call-audio": _CONTENT,
    "tools-call-embedded-resource/tools-call-embedded-resource": _CONTENT,
    "tools-call-mixed-content/tools-call-mixed-content": _CONTENT,
    "tools-call-with-progress/tools-call-with-progress": _PROGRESS,
    "resources-list/resources-list": _RESOURCES,
    "resources-read-text/resources-read-text": _RESOURCES,
    "resources-read-binary/resources-read-binary": _RESOURCES,
    "resources-templates-read/resources-templates-read": _RESOURCES,
    "prompts-list/prompts-list": _PROMPTS,
    "prompts-get-simple/prompts-get-simple": _PROMPTS,
    "prompts-get-with-args/prompts-get-with-args": _PROMPTS,
    "prompts-get-embedded-resource/prompts-get-embedded-resource": _PROMPTS,
    "prompts-get-with-image/prompts-get-with-image": _PROMPTS,
}

EXPECTED_FAILURES: dict[str, dict[str, str]] = {
    "2025-11-25": {
        **COMMON,
        "resources-subscribe/resources-subscribe": _RESOURCES,
        "resources-unsubscribe/resources-unsubscribe": _RESOURCES,
        "tools-call-sampling/tools-call-sampling": _SAMPLING,
        "tools-call-elicitation/tools-call-elicitation": _FORM,
        "elicitation-sep1034-defaults/elicitation-sep1034-general": _FORM,
        "elicitation-sep1330-enums/elicitation-sep1330-general": _FORM,
    },
    "2026-07-28": {
        **COMMON,
        "caching/sep-2549-prompts-list-caching-hints": _PROMPTS,
        "caching/sep-2549-resources-list-caching-hints": _RESOURCES,
        "caching/sep-2549-resources-templates-list-caching-hints": _RESOURCES,
        "sep-2164-resource-not-found/sep-2164-error-code": _RESOURCES,
        "sep-2164-resource-not-found/sep-2164-data-uri": _RESOURCES,
        **{
            f"http-custom-header-server-validation/sep-2243-server-{check}": _HEADERS
            for check in (
                "no-xmcp-tool",
                "decode-base64",
                "validate-param-match",
                "reject-invalid-param-chars",
                "reject-param-mismatch",
            )
        },
        "input-required-result-basic-elicitation/sep-2322-elicitation-incomplete": _FORM,
        "input-required-result-basic-list-roots/sep-2322-list-roots-incomplete": _ROOTS,
        "input-required-result-basic-sampling/sep-2322-sampling-incomplete": _SAMPLING,
        "input-required-result-capability-check/sep-2322-respect-client-capabilities": _SAMPLING,
        "input-required-result-missing-input-response/sep-2322-missing-response-rerequests": _FORM,
        "input-required-result-multi-round/sep-2322-multi-round-r1": _FORM,
        "input-required-result-multiple-input-requests/sep-2322-multiple-inputs-incomplete": _FORM,
        "input-required-result-non-tool-request/sep-2322-non-tool-incomplete": _PROMPTS,
        "input-required-result-request-state/sep-2322-request-state-incomplete": _FORM,
        "input-required-result-result-type/sep-2322-result-type-included": _FORM,
        "input-required-result-tampered-state/sep-2322-reject-tampered-state": _FORM,
        "input-required-result-validate-input/sep-2322-error-on-protocol-error": _FORM,
        "server-stateless/sep-2575-server-rejects-undeclared-capability": _SAMPLING,
        "server-stateless/sep-2575-missing-capability-http-400": _SAMPLING,
        "server-stateless/sep-2575-server-sends-tools-list-changed-on-subscription": _FIXED_LIST,
        "tasks-lifecycle/sep-2663-tasks-get-status-failed": _NO_PROTOCOL_FAILURE,
        "tasks-mrtr-composition/sep-2663-mrtr-synchronous-before-task-creation": _FORM,
        "tasks-mrtr-input/sep-2663-tasks-get-status-input-required": _FORM,
        "tasks-mrtr-input/tasks-mrtr-tasks-update-resumes": _FORM,
        "tasks-mrtr-input/tasks-mrtr-partial-fulfillment": _FORM,
        "tasks-required-task-error/sep-2663-server-returns-missing-capability-when-required": (
            _NO_REQUIRED_TASKS
        ),
    },
}


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    site = conformance.install_plugin(tmp_path_factory.mktemp("conformance-site"))
    with conformance.http_server(site, tmp_path_factory.mktemp("conformance-server")) as url:
        yield url


@pytest.mark.parametrize("revision", sorted(EXPECTED_FAILURES))
def test_conformance_suite_passes_all_but_the_listed_checks(
    server_url: str, revision: str, tmp_path: Path
) -> None:
    run = conformance.run_suite(server_url, revision, tmp_path)
    print(
        f"\nconformance {conformance.VERSION} --requirements {revision}: "
        f"{run.passed} of {run.total} checks pass"
    )
    assert run.checks, f"the suite reported no checks:\n{run.output[-3000:]}"
    expected = EXPECTED_FAILURES[revision]
    failing = {
        key: status for key, status in run.checks.items() if status in conformance.NOT_PASSING
    }
    unexpected = {
        key: f"{status}: {conformance.detail(tmp_path, key)}"
        for key, status in failing.items()
        if key not in expected
    }
    assert not unexpected, "checks that fail but are not listed:\n" + "\n".join(
        f"  {key}: {why}" for key, why in sorted(unexpected.items())
    )
    stale = [key for key in expected if run.checks.get(key) not in conformance.NOT_PASSING]
    assert not stale, f"listed as failing but {[(k, run.checks.get(k)) for k in stale]}"
