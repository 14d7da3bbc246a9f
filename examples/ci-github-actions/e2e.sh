#!/usr/bin/env bash
# An end-to-end job for a CI suite in any language, on the kit's local stack: start it in the background,
# read its one JSON line, run the suite against what it names, stop it. The workflow in
# .github/workflows/x402-e2e.yml runs this after `npm install -D cronos-x402-facilitator-kit hardhat`.
#
#   SUITE="pytest tests/e2e" bash e2e.sh     # the command that runs your suite (default: a smoke check)
#
# The suite gets FACILITATOR_URL, RPC_URL, TOKEN_ADDRESS, CHAIN_ID and BUYER_PRIVATE_KEY (a Hardhat
# PUBLIC test key: LOCAL-ONLY) in its environment.
set -euo pipefail

# The installed CLI itself, not through npx: a signal to npx would not reach the stack it started.
cli=${KIT_CLI:-node_modules/.bin/cronos-x402}

work=$(mktemp -d)
stack_pid=
# On any exit (a failing suite included) the stack is stopped and the scratch folder removed.
cleanup() {
  if [ -n "$stack_pid" ]; then kill -TERM "$stack_pid" 2>/dev/null || true; wait "$stack_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
mkfifo "$work/stack.out"
"$cli" start --json --port 0 --testnet-rpc-port 0 --mainnet-rpc-port 0 > "$work/stack.out" 2> "$work/stack.log" &
stack_pid=$!
if ! read -r -t 120 line < "$work/stack.out"; then
  echo "the local stack did not start; its log:" >&2
  cat "$work/stack.log" >&2
  exit 1
fi

field() { node -e 'const v = JSON.parse(process.argv[1]); console.log(process.argv[2].split(".").reduce((o, k) => o[k], v))' "$line" "$1"; }
export FACILITATOR_URL RPC_URL TOKEN_ADDRESS CHAIN_ID BUYER_PRIVATE_KEY
FACILITATOR_URL=$(field facilitatorUrl)
RPC_URL=$(field networks.cronos-testnet.rpcUrl)
TOKEN_ADDRESS=$(field networks.cronos-testnet.token)
CHAIN_ID=$(field networks.cronos-testnet.chainId)
BUYER_PRIVATE_KEY=$(field networks.cronos-testnet.buyers.0.privateKey)
echo "stack ready: facilitator $FACILITATOR_URL, cronos-testnet $RPC_URL (chain $CHAIN_ID), USDC.e $TOKEN_ADDRESS"

# The default suite: the facilitator answers and lists the testnet; then the kit's own conformance checks.
default_suite() {
  curl -fsS "$FACILITATOR_URL/v2/x402/supported" | grep -q '"network":"cronos-testnet"'
  "$cli" conformance --facilitator "$FACILITATOR_URL" --network cronos-testnet --rpc "$RPC_URL" --buyer-key "$BUYER_PRIVATE_KEY" --settle
}
if [ -n "${SUITE:-}" ]; then bash -c "$SUITE"; else default_suite; fi

kill -TERM "$stack_pid"
wait "$stack_pid"    # the stack exits 0 once chains and facilitator have stopped
stack_pid=
echo "stack stopped"
