"""SaslHandshake (key 17), v0-v1, and SaslAuthenticate (key 36), v0-v2 (KIP-43, KIP-152, KIP-368).

On a SASL listener the network layer runs the exchange itself before any request reaches a
handler (``broker/security/sasl_authenticator.py``), re-authentication included. A request
that gets here came where no exchange is due (a PLAINTEXT or SSL listener): as Kafka, it is
answered with ILLEGAL_SASL_STATE, naming the listener.
"""

from odradek.broker.handlers import api
from odradek.protocol import messages
from odradek.protocol.errors import ErrorCode


def _not_here(request) -> str:
    return f"SASL is not enabled on listener {request.listener}"


@api(17, 0, 1)
def handle_sasl_handshake(broker, request):
    return messages.build_response(
        17, request.api_version, {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": []}
    )


@api(36, 0, 2)
def handle_sasl_authenticate(broker, request):
    return messages.build_response(
        36,
        request.api_version,
        {
            "error_code": ErrorCode.illegal_sasl_state,
            "error_message": _not_here(request),
            "auth_bytes": b"",
            "session_lifetime": 0,
        },
    )
