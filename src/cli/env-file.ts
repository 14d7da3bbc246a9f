// The env file of `cronos-x402 start --write-env`: the stack's URLs, the first network's token and buyers, as NAME=value lines.
import type { LocalStackNetwork } from "../harness/stack.js";
import { writeFileAtomically } from "./stack-state.js";

/**
 * The names {@link envFileLines} writes. A job that loads the env file into its environment (GitHub's
 * `$GITHUB_ENV`, `set -a`) and starts the stack again hands them to it: the stack leaves them out of the
 * facilitator's environment, whose unknown-variable check takes RPC_URL for a typo of CRONOS_*_RPC_URL.
 */
export const ENV_FILE_NAMES: readonly string[] = [
  "FACILITATOR_URL",
  "HARNESS_URL",
  "NETWORK",
  "CHAIN_ID",
  "RPC_URL",
  "WS_URL",
  "TOKEN_ADDRESS",
  "BUYER_ADDRESS",
  "BUYER_PRIVATE_KEY",
  "BUYER_PRIVATE_KEYS",
  "PAY_TO",
  "TESTNET_RPC_URL",
  "TESTNET_TOKEN_ADDRESS",
  "MAINNET_RPC_URL",
  "MAINNET_TOKEN_ADDRESS",
];

/** What the stack's env file holds: its URLs, the first network's token and buyers. */
export interface EnvFileStack {
  facilitatorUrl: string;
  /** The fault and time controls (`/harness`). */
  harnessUrl: string;
  seller: string;
  networks: Partial<Record<string, LocalStackNetwork>>;
}

/**
 * The `NAME=value` lines of the env file: readable by `set -a; . FILE`, `docker --env-file`, dotenv and
 * `node --env-file`, and appendable to GitHub Actions' `$GITHUB_ENV` (no comments, no quotes: every value
 * is a URL, a number or hex). The first network is cronos-testnet when it runs.
 */
export function envFileLines(stack: EnvFileStack): string[] {
  const names = Object.keys(stack.networks);
  const first = names.includes("cronos-testnet") ? "cronos-testnet" : names[0];
  const network = first === undefined ? undefined : stack.networks[first];
  const lines = [`FACILITATOR_URL=${stack.facilitatorUrl}`, `HARNESS_URL=${stack.harnessUrl}`];
  if (first !== undefined && network) {
    lines.push(
      `NETWORK=${first}`,
      `CHAIN_ID=${network.chainId}`,
      `RPC_URL=${network.rpcUrl}`,
      `WS_URL=${network.wsUrl}`,
      `TOKEN_ADDRESS=${network.token}`,
      ...(network.buyers[0] ? [`BUYER_ADDRESS=${network.buyers[0].address}`, `BUYER_PRIVATE_KEY=${network.buyers[0].privateKey}`] : []),
      `BUYER_PRIVATE_KEYS=${network.buyers.map((buyer) => buyer.privateKey).join(",")}`,
    );
  }
  lines.push(`PAY_TO=${stack.seller}`);
  for (const [name, info] of Object.entries(stack.networks)) {
    const prefix = name === "cronos-testnet" ? "TESTNET" : name === "cronos-mainnet" ? "MAINNET" : undefined;
    if (prefix && info) lines.push(`${prefix}_RPC_URL=${info.rpcUrl}`, `${prefix}_TOKEN_ADDRESS=${info.token}`);
  }
  return lines;
}

/** Writes the env file (see {@link envFileLines}). */
export function writeEnvFile(path: string, stack: EnvFileStack): void {
  writeFileAtomically(path, `${envFileLines(stack).join("\n")}\n`);
}
