"""Azure OpenAI's URL shape and auth, as the fake server checks them.

Why the fake checks them and does not just accept any path: a run that passes against the fake in
Azure's shape must be a run that would work against Azure. So a request to a deployment
(``/openai/deployments/<d>/chat/completions``) needs ``?api-version=...`` (Azure answers 404
without it) and its key in the ``api-key`` header (a ``Bearer`` header carries an Entra ID token,
never a key); the v1 endpoint (``/openai/v1/...``) takes the key either way, as Azure's does. The
server's ``api_key`` set, a request without the right key is refused with 401 as Azure does (and as
OpenAI does without ``Bearer <key>``, Anthropic without ``x-api-key`` or ``Bearer <key>``: the fake's one auth check).
"""

from __future__ import annotations

import json
import re

from sab_pytest.testing.fake_replies import CHAT_PATHS, MODELS_PATHS, RecordedRequest

DEPLOYMENT_CHAT = re.compile(r"^/openai/deployments/[^/]+/chat/completions$")
V1_CHAT = "/openai/v1/chat/completions"
AZURE_MODELS = ("/openai/models", "/openai/v1/models")


def is_chat(path: str) -> bool:
    """Whether ``path`` is a chat-completions path, in OpenAI's shape or in Azure's."""
    return path in CHAT_PATHS or path == V1_CHAT or bool(DEPLOYMENT_CHAT.match(path))


def is_models(path: str) -> bool:
    """Whether ``path`` is the model listing, in OpenAI's shape or in Azure's."""
    return path in MODELS_PATHS or path in AZURE_MODELS


def is_azure(request: RecordedRequest) -> bool:
    """Whether ``request`` came in Azure's deployment shape: the path, ``api-version``, the key in
    ``api-key`` and no ``Authorization`` header."""
    return (bool(DEPLOYMENT_CHAT.match(request.path)) and bool(request.query.get("api-version"))
            and "api-key" in request.headers and "authorization" not in request.headers)


def refusal(request: RecordedRequest, api_key: str | None) -> tuple[int, dict[str, str], bytes] | None:
    """Azure's answer to a request it would refuse (wrong shape, wrong key); None to go on."""
    deployment = bool(DEPLOYMENT_CHAT.match(request.path)) or request.path == "/openai/models"
    if deployment and not request.query.get("api-version"):
        return _error(404, "Resource not found (fake Azure: api-version is missing)", "404")
    if api_key is None:
        return None
    bearer = request.headers.get("authorization") == f"Bearer {api_key}"
    keyed = request.headers.get("api-key") == api_key
    if deployment:
        ok = keyed
    elif "anthropic-version" in request.headers:  # Anthropic's SDK: x-api-key (recent versions: Bearer)
        ok = request.headers.get("x-api-key") == api_key or bearer
    elif request.path.startswith("/openai/"):
        ok = keyed or bearer
    else:
        ok = bearer
    if ok:
        return None
    return _error(401, "Access denied due to invalid subscription key or wrong API endpoint (fake)", "401")


def content_filtered(message: str = "The response was filtered due to the prompt triggering Azure OpenAI's "
                     "content management policy (fake).") -> dict[str, object]:
    """The body of Azure's HTTP 400 for a prompt its content filter refuses."""
    return {"error": {"message": message, "type": None, "param": "prompt", "code": "content_filter", "status": 400,
                      "innererror": {"code": "ResponsibleAIPolicyViolation",
                                     "content_filter_result": {"violence": {"filtered": True, "severity": "high"}}}}}


def _error(status: int, message: str, code: str) -> tuple[int, dict[str, str], bytes]:
    return status, {}, json.dumps({"error": {"code": code, "message": message}}).encode()
