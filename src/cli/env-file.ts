// The env file of `cronos-x402 start --write-env`: the stack's URLs, the first network's token (address and EIP-712
// name and version) and buyers, each network's RPC and token, as NAME=value lines.
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
  "TOKEN_NAME",
  "TOKEN_VERSION",
  "BUYER_ADDRESS",
  "BUYER_PRIVATE_KEY",
  "BUYER_PRIVATE_KEYS",
  "PAY_TO",
  "TESTNET_RPC_URL",
  "TESTNET_TOKEN_ADDRESS",
  "TESTNET_TOKEN_NAME",
  "TESTNET_TOKEN_VERSION",
  "MAINNET_RPC_URL",
  "MAINNET_TOKEN_ADDRESS",
  "MAINNET_TOKEN_NAME",
  "MAINNET_TOKEN_VERSION",
];

/** What the stack's env file holds: its URLs, the first network's token and buyers. */
export interface EnvFileStack {
  facilitatorUrl: string;
  /** The fault and time controls (`/harness`). */
  harnessUrl: string;
  seller: string;
  networks: Partial<Record<string, LocalStackNetwork>>;
}

/** A value as a line holds it: bare when it is a URL, a number, hex or a word; else in single quotes (the token's name has spaces). */
export function envValue(value: string): string {
  if (/^[A-Za-z0-9:/.,_@+-]*$/.test(value)) return value;
  if (/['\n\r]/.test(value)) throw new RangeError(`an env file value cannot hold a quote or a line break: ${JSON.stringify(value)}`);
  return `'${value}'`;
}

/**
 * The `NAME=value` lines of the env file: readable by `set -a; . FILE`, dotenv, `node --env-file` and Python's
 * `shlex` (no comments; every value bare, a URL, a number or hex, but the token's EIP-712 name, which has spaces
 * and is single-quoted). `docker --env-file` and GitHub Actions' `$GITHUB_ENV` keep quotes as they are: strip
 * them on the way (`sed "s/='\(.*\)'$/=\1/"`). The first network is cronos-testnet when it runs.
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
      `TOKEN_NAME=${envValue(network.domain.name)}`,
      `TOKEN_VERSION=${envValue(network.domain.version)}`,
      ...(network.buyers[0] ? [`BUYER_ADDRESS=${network.buyers[0].address}`, `BUYER_PRIVATE_KEY=${network.buyers[0].privateKey}`] : []),
      `BUYER_PRIVATE_KEYS=${network.buyers.map((buyer) => buyer.privateKey).join(",")}`,
    );
  }
  lines.push(`PAY_TO=${stack.seller}`);
  for (const [name, info] of Object.entries(stack.networks)) {
    const prefix = name === "cronos-testnet" ? "TESTNET" : name === "cronos-mainnet" ? "MAINNET" : undefined;
    if (prefix && info) {
      lines.push(`${prefix}_RPC_URL=${info.rpcUrl}`, `${prefix}_TOKEN_ADDRESS=${info.token}`, `${prefix}_TOKEN_NAME=${envValue(info.domain.name)}`, `${prefix}_TOKEN_VERSION=${envValue(info.domain.version)}`);
    }
  }
  return lines;
}

/** Writes the env file (see {@link envFileLines}). */
export function writeEnvFile(path: string, stack: EnvFileStack): void {
  writeFileAtomically(path, `${envFileLines(stack).join("\n")}\n`);
}
