"""The Python seller (seller.py) paid on the kit's local stack, and made to meet each failure, from Python alone.

It knows nothing of JavaScript: it runs the `cronos-x402` command (`pay`, `sign`) as any program, asks the
stack's control endpoint for faults over HTTP (urllib), and reads balances with a JSON-RPC call. What the stack
hands over comes from the environment (run.sh loads .x402.env: FACILITATOR_URL, HARNESS_URL, RPC_URL,
TOKEN_ADDRESS, BUYER_ADDRESS, BUYER_PRIVATE_KEY, PAY_TO, ...). X402_CLI says how to run the command
(default `npx cronos-x402`).

    python3 -m unittest -v
"""

import json
import os
import shlex
import subprocess
import unittest
import urllib.error
import urllib.request

import seller

ENV = os.environ
CLI = shlex.split(ENV.get("X402_CLI", "npx cronos-x402"))
PRICE = 10000


def http(method, url, body=None, headers=None):
    """(status, headers, JSON body or text) of one request; HTTP errors are answers too."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={**({"Content-Type": "application/json"} if data else {}), **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            status, answer_headers, text = response.status, response.headers, response.read().decode()
    except urllib.error.HTTPError as error:
        status, answer_headers, text = error.code, error.headers, error.read().decode()
    try:
        return status, answer_headers, json.loads(text)
    except ValueError:
        return status, answer_headers, text


def fault(spec):
    """Makes a failure happen on the stack (POST $HARNESS_URL/faults); returns it ({"id": ..., "state": ...})."""
    status, _, answer = http("POST", f"{ENV['HARNESS_URL']}/faults", spec)
    assert status == 201, answer
    return answer


def cli(*args, stdin=None):
    """Runs `cronos-x402 ARGS`: (exit status, stdout, stderr)."""
    ran = subprocess.run([*CLI, *args], input=stdin, capture_output=True, text=True, timeout=300)
    return ran.returncode, ran.stdout, ran.stderr


def balance_of(address):
    """USDC.e of `address`, by eth_call of balanceOf(address) on the stack's RPC."""
    call = {"to": ENV["TOKEN_ADDRESS"], "data": "0x70a08231" + address[2:].lower().rjust(64, "0")}
    _, _, answer = http("POST", ENV["RPC_URL"], {"jsonrpc": "2.0", "id": 1, "method": "eth_call", "params": [call, "latest"]})
    return int(answer["result"], 16)


class PythonSellerOnTheLocalStack(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = seller.serve(ENV["FACILITATOR_URL"], ENV["PAY_TO"], ENV.get("NETWORK", "cronos-testnet"), ENV["TOKEN_ADDRESS"])
        cls.url = f"{cls.server.url}/weather"

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()

    def tearDown(self):
        # Whatever a test left in force is undone (a facilitator held down is started again).
        status, _, answer = http("DELETE", f"{ENV['HARNESS_URL']}/faults")
        self.assertEqual(status, 200, answer)

    def pay(self, *flags):
        """`cronos-x402 pay URL --max-amount 10000 --json FLAGS`: (exit status, the answer as JSON, stderr)."""
        status, out, err = cli("pay", self.url, "--max-amount", str(PRICE), "--json", *flags)
        self.assertNotIn(ENV["BUYER_PRIVATE_KEY"][2:], out + err)
        return status, json.loads(out) if out else None, err

    def balances(self):
        return balance_of(ENV["BUYER_ADDRESS"]), balance_of(ENV["PAY_TO"])

    def test_a_payment_goes_through(self):
        buyer, payee = self.balances()
        status, answer, err = self.pay()
        self.assertEqual(status, 0, err)
        self.assertEqual(answer["status"], 200)
        self.assertEqual(answer["body"]["forecast"], "sunny")
        self.assertEqual(answer["settlement"]["event"], "payment.settled")
        self.assertEqual(answer["settlement"]["txHash"], answer["body"]["txHash"])
        self.assertEqual(answer["payment"]["header"], "X-PAYMENT")
        self.assertEqual(self.balances(), (buyer - PRICE, payee + PRICE))

    def test_the_facilitator_busy(self):
        fault({"kind": "busy", "forSeconds": 30})
        status, answer, err = self.pay()
        self.assertEqual(status, 1)
        self.assertEqual(answer["status"], 503)
        self.assertEqual(answer["body"], {"error": "Payment service busy"})
        self.assertIn(int(answer["headers"]["retry-after"]), range(1, 31))  # the seconds the fault has left
        self.assertRegex(err, r"^pay: refused: HTTP 503 Payment service busy \(Retry-After: \d+\)\n$")

    def test_the_balance_gone_between_verify_and_settle(self):
        fault({"kind": "balance", "address": ENV["BUYER_ADDRESS"], "amount": "0", "trigger": "after-verify"})
        payee = balance_of(ENV["PAY_TO"])
        status, answer, err = self.pay()
        self.assertEqual(status, 1)
        self.assertEqual(answer["status"], 402)
        self.assertEqual(answer["body"]["error"], "Payment settlement failed")
        self.assertEqual(answer["body"]["reason"], "ERC20: transfer amount exceeds balance")
        self.assertEqual(err, "pay: refused: HTTP 402 Payment settlement failed: ERC20: transfer amount exceeds balance\n")
        self.assertEqual(balance_of(ENV["PAY_TO"]), payee)

    def test_the_rpc_down(self):
        fault({"kind": "rpc", "mode": "refuse"})
        status, answer, err = self.pay()
        self.assertEqual(status, 1)
        self.assertEqual((answer["status"], answer["body"]), (500, {"error": "Facilitator verify request failed"}))
        self.assertEqual(err, "pay: refused: HTTP 500 Facilitator verify request failed\n")

    def test_the_facilitator_down(self):
        fault({"kind": "facilitator-down"})
        status, answer, err = self.pay()
        self.assertEqual(status, 1)
        self.assertEqual((answer["status"], answer["body"]), (500, {"error": "Facilitator verify request failed"}))

    def test_a_payment_signed_over_http_by_the_stack(self):
        # POST $HARNESS_URL/sign: the same signing as `cronos-x402 sign`, for the stack's own buyers.
        _, _, offer = http("GET", self.url)
        status, _, signed = http("POST", f"{ENV['HARNESS_URL']}/sign", {"paymentRequired": offer})
        self.assertEqual(status, 200, signed)
        status, headers, answer = http("GET", self.url, headers={signed["header"]: signed["value"]})
        self.assertEqual((status, answer["forecast"]), (200, "sunny"))
        self.assertIn("X-PAYMENT-RESPONSE", headers)

    def test_zz_an_authorization_expired(self):
        # Last: chain time moves forward for good (a later payment signed from the wall clock stays valid: an hour).
        _, _, offer = http("GET", self.url)
        status, header, err = cli("sign", "--from-402", "-", "--valid-before", "+60", stdin=json.dumps(offer))
        self.assertEqual(status, 0, err)
        status, _, answer = http("POST", f"{ENV['HARNESS_URL']}/time/advance", {"seconds": 120})
        self.assertEqual(status, 200, answer)
        status, _, answer = http("GET", self.url, headers={"X-PAYMENT": header.strip()})
        self.assertEqual(status, 402)
        self.assertEqual((answer["error"], answer["reason"]), ("Payment verification failed", "Authorization expired"))


if __name__ == "__main__":
    unittest.main()
