#!/usr/bin/env bash
# The CI job of this example: the kit's local stack around the Python suite. Run it from the folder that is to
# hold .x402.env and .cronos-x402/ (the stack's pid and log); X402_CLI says how to run the kit's command
# (default `npx cronos-x402`, in a project that installed the kit and hardhat).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
read -r -a x402 <<<"${X402_CLI:-npx cronos-x402}"
"${x402[@]}" start --background --write-env .x402.env --networks cronos-testnet --port 0 --testnet-rpc-port 0 || exit 1
set -a; . ./.x402.env; set +a
PYTHONDONTWRITEBYTECODE=1 python3 -m unittest discover -v -s "$here" -p 'test_*.py'; status=$?
"${x402[@]}" stop
exit $status
