"""A seller in Python's standard library: GET /weather costs 0.01 USDC.e, settled by an x402 facilitator.

No package beyond the standard library (http.server, urllib, json, base64). The facilitator does the
cryptography: the seller hands it the buyer's X-PAYMENT and its own requirements (verify, then settle) and
serves the content once the payment is settled. The wire format is the kit's docs/wire-format.md.

    FACILITATOR_URL=http://127.0.0.1:8402 PAY_TO=0x7099...79C8 python3 seller.py   # serves on 127.0.0.1:4021
"""

import base64
import json
import os
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# USDC.e of each Cronos network (the local stack has it at the same address).
USDC_E = {
    "cronos-testnet": "0xc01efAaF7C5C61bEbFAeb358E1161b537b8bC0e0",
    "cronos-mainnet": "0xf951eC28187D9E5Ca673Da8FE6757E6f0Be5F77C",
}
PRICE = "10000"  # base units: 6 decimals, so 0.01 USDC.e
FACILITATOR_TIMEOUT_SECONDS = 60


def requirements(network, pay_to, asset, resource):
    """The route's payment requirements, as the 402 body and verify/settle carry them."""
    return {
        "scheme": "exact",
        "network": network,
        "payTo": pay_to,
        "asset": asset,
        "maxAmountRequired": PRICE,
        "description": "Weather",
        "mimeType": "application/json",
        "maxTimeoutSeconds": 300,
        "resource": resource,
    }


class Facilitator:
    """The two calls a seller makes: POST /v2/x402/verify, then POST /v2/x402/settle, with the same body."""

    def __init__(self, url):
        self.url = url.rstrip("/")

    def call(self, step, payment_header, reqs):
        """(status, JSON answer or None, Retry-After or None); status 0 when the facilitator is unreachable."""
        body = json.dumps({"x402Version": 1, "paymentHeader": payment_header, "paymentRequirements": reqs}).encode()
        request = urllib.request.Request(
            f"{self.url}/v2/x402/{step}",
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", "X402-Version": "1"},
        )
        try:
            with urllib.request.urlopen(request, timeout=FACILITATOR_TIMEOUT_SECONDS) as response:
                return response.status, json.loads(response.read()), None
        except urllib.error.HTTPError as error:  # 4xx / 5xx: still an answer
            try:
                answer = json.loads(error.read())
            except ValueError:
                answer = None
            return error.code, answer, error.headers.get("Retry-After")
        except (urllib.error.URLError, OSError):
            return 0, None, None


def make_handler(facilitator, network, pay_to, asset):
    class Seller(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet: the suite prints what matters
            pass

        def answer(self, status, body, headers=()):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path != "/weather":
                return self.answer(404, {"error": "Not found"})
            reqs = requirements(network, pay_to, asset, f"http://{self.headers.get('Host', 'localhost')}/weather")

            def payment_required(error, reason=None):
                body = {"error": error, "x402Version": 1, "paymentRequirements": reqs, "accepts": [reqs]}
                if reason is not None:
                    body["reason"] = reason
                return self.answer(402, body)

            def unavailable(step, status, retry_after):
                if status in (429, 503):  # busy, or settle gave up before sending: the buyer may retry
                    return self.answer(503, {"error": "Payment service busy"}, [("Retry-After", retry_after or "5")])
                return self.answer(500, {"error": f"Facilitator {step} request failed"})

            header = self.headers.get("X-PAYMENT")
            if not header:
                return payment_required("Payment Required")
            status, verified, retry_after = facilitator.call("verify", header, reqs)
            if status != 200 or verified is None:
                return unavailable("verify", status, retry_after)
            if not verified.get("isValid"):
                return payment_required("Payment verification failed", verified.get("invalidReason"))
            status, settled, retry_after = facilitator.call("settle", header, reqs)
            if status != 200 or settled is None or "event" not in settled:
                return unavailable("settle", status, retry_after)
            if settled["event"] != "payment.settled":
                return payment_required("Payment settlement failed", settled.get("error"))
            receipt = base64.b64encode(json.dumps(settled, separators=(",", ":")).encode()).decode()
            return self.answer(200, {"forecast": "sunny", "txHash": settled["txHash"]}, [("X-PAYMENT-RESPONSE", receipt)])

    return Seller


def serve(facilitator_url, pay_to, network="cronos-testnet", asset=None, port=0):
    """Starts the seller on 127.0.0.1:port (0: any free port) in a thread; returns the server (its URL: server.url)."""
    handler = make_handler(Facilitator(facilitator_url), network, pay_to, asset or USDC_E[network])
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


if __name__ == "__main__":
    server = serve(os.environ["FACILITATOR_URL"], os.environ["PAY_TO"], os.environ.get("NETWORK", "cronos-testnet"), port=int(os.environ.get("PORT", "4021")))
    print(f"GET {server.url}/weather costs 0.01 USDC.e", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.shutdown()
        sys.exit(0)
