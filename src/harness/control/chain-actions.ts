// What the harness's payer and time faults do on a local chain: real transactions from the accounts
// whose roles allow them (the token's pauser, blacklister and master minter, the payer itself through
// impersonation), and EDR's own mining and clock controls. Nothing is written into storage directly.
import { getAddress, isAddressEqual, parseAbi, parseSignature, type Address, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { tokenAbi } from "../../chain/token-abi.js";
import { CANCEL_AUTHORIZATION_TYPES } from "../../protocol/eip3009.js";
import { decodeBase64Json, decodePaymentHeader } from "../../protocol/header.js";
import type { NetworkName } from "../../protocol/networks.js";
import type { Authorization } from "../../protocol/schemas.js";
import { networkOfAnyForm, v2PaymentPayloadSchema } from "../../protocol/x402v2.js";
import { ACCOUNT_INDEX, localAccount, PREFUNDED_ACCOUNTS } from "../accounts.js";
import { impersonate, type LocalChain } from "../chain.js";
import { VIEM_CHAINS } from "../multicall3.js";
import { HarnessControlError } from "./spec.js";

/** Where a balance set lower goes: an address nobody holds a key to (USDC.e refuses the zero address). */
export const BALANCE_SINK: Address = "0x000000000000000000000000000000000000dEaD";

/** FiatToken's role getters (public state variables of the real token and of the kit's). */
const rolesAbi = parseAbi(["function pauser() view returns (address)", "function blacklister() view returns (address)"]);

/** Sends `functionName(args)` to the token as `from` (impersonated) and waits for its receipt; a revert is a 409 naming its reason. */
async function sendAs(chain: LocalChain, from: Address, functionName: "pause" | "unpause" | "blacklist" | "unBlacklist" | "transfer", args: readonly unknown[]): Promise<void> {
  const wallet = await impersonate(chain.provider, chain.publicClient, from, VIEM_CHAINS[chain.viemChain], chain.transport);
  try {
    // Simulated first: a call that would revert is refused with its reason and sends nothing.
    const { request } = await chain.publicClient.simulateContract({ address: chain.token, abi: tokenAbi, functionName, args, account: from } as never);
    const hash = await wallet.writeContract(request as never);
    const receipt = await chain.publicClient.waitForTransactionReceipt({ hash, pollingInterval: 20 });
    if (receipt.status !== "success") throw new Error("the transaction reverted");
  } catch (error) {
    throw new HarnessControlError(409, `${chain.network}: ${functionName} as ${from} failed: ${reasonOf(error)}`);
  }
}

/** A viem error as one short line: its revert reason when it has one. */
export function reasonOf(error: unknown): string {
  const short = (error as { shortMessage?: unknown }).shortMessage;
  const reason = (error as { reason?: unknown; cause?: { reason?: unknown } }).cause?.reason ?? (error as { reason?: unknown }).reason;
  if (typeof reason === "string") return reason;
  const text = typeof short === "string" ? short : error instanceof Error ? error.message : String(error);
  return text.split("\n")[0]!;
}

/** The USDC.e balance of `address`. */
export function balanceOf(chain: LocalChain, address: Address): Promise<bigint> {
  return chain.publicClient.readContract({ address: chain.token, abi: tokenAbi, functionName: "balanceOf", args: [address] });
}

/**
 * Sets `address`'s USDC.e balance to `amount`: the master minter mints what is missing, or the address
 * itself (impersonated) sends the excess to {@link BALANCE_SINK}. Resolves to the balance before.
 */
export async function setBalance(chain: LocalChain, address: Address, amount: bigint): Promise<bigint> {
  const before = await balanceOf(chain, address);
  if (amount > before) await chain.fund([address], amount - before).catch((error: unknown) => {
    throw new HarnessControlError(409, `${chain.network}: minting to ${address} failed: ${reasonOf(error)}`);
  });
  if (amount < before) await sendAs(chain, address, "transfer", [BALANCE_SINK, before - amount]);
  return before;
}

/** Pauses or unpauses USDC.e as its pauser. Resolves to whether it was paused before. */
export async function setPaused(chain: LocalChain, paused: boolean): Promise<boolean> {
  const before = await chain.publicClient.readContract({ address: chain.token, abi: tokenAbi, functionName: "paused" });
  if (before !== paused) {
    const pauser = await chain.publicClient.readContract({ address: chain.token, abi: rolesAbi, functionName: "pauser" });
    await sendAs(chain, pauser, paused ? "pause" : "unpause", []);
  }
  return before;
}

/** Blacklists `address` (or takes it off) as USDC.e's blacklister. Resolves to whether it was blacklisted before. */
export async function setBlacklisted(chain: LocalChain, address: Address, blacklisted: boolean): Promise<boolean> {
  const before = await chain.publicClient.readContract({ address: chain.token, abi: tokenAbi, functionName: "isBlacklisted", args: [address] });
  if (before !== blacklisted) {
    const blacklister = await chain.publicClient.readContract({ address: chain.token, abi: rolesAbi, functionName: "blacklister" });
    await sendAs(chain, blacklister, blacklisted ? "blacklist" : "unBlacklist", [address]);
  }
  return before;
}

/** An authorization and the network it was signed for, read from an `X-PAYMENT` or `PAYMENT-SIGNATURE` value. */
export function authorizationOfPayment(payment: string): { network: NetworkName; authorization: Authorization } {
  const cronos = decodePaymentHeader(payment);
  if (cronos.ok) {
    const network = networkOfAnyForm(cronos.payload.network);
    if (!network) throw new HarnessControlError(400, `payment: unknown network "${cronos.payload.network.slice(0, 64)}"`);
    return { network, authorization: cronos.payload.authorization };
  }
  const decoded = decodeBase64Json(payment);
  const v2 = decoded.ok ? v2PaymentPayloadSchema.safeParse(decoded.json) : undefined;
  if (v2?.success) {
    const network = networkOfAnyForm(v2.data.accepted.network);
    if (!network) throw new HarnessControlError(400, `payment: unknown network "${v2.data.accepted.network.slice(0, 64)}"`);
    const { authorization, signature } = v2.data.payload;
    return { network, authorization: { ...authorization, signature } as Authorization };
  }
  throw new HarnessControlError(400, "payment: neither an X-PAYMENT value (base64 JSON, x402Version 1) nor a PAYMENT-SIGNATURE value (x402Version 2) with an EIP-3009 authorization");
}

/** The key of `payer` among the stack's accounts (its buyers, Hardhat's funded accounts), or `privateKey` when it is the payer's. */
function payerKey(chain: LocalChain, payer: Address, privateKey: Hex | undefined): Hex {
  if (privateKey) {
    if (!isAddressEqual(privateKeyToAccount(privateKey).address, payer)) throw new HarnessControlError(400, `privateKey: not the key of the payer ${payer}`);
    return privateKey;
  }
  const known = [...chain.buyers, ...Array.from({ length: PREFUNDED_ACCOUNTS }, (_, index) => localAccount(index))].find((account) => isAddressEqual(account.address, payer));
  if (!known) throw new HarnessControlError(400, `cancel needs the payer's key: ${payer} is not one of the stack's accounts; pass privateKey, or use action "use"`);
  return known.privateKey;
}

/**
 * Spends the authorization's nonce on chain: `use` submits it (`transferWithAuthorization`, sent by
 * Hardhat account #0: the payee is paid), `cancel` has its payer cancel it (`cancelAuthorization`,
 * signed with the payer's key). A revert (already spent, expired, …) is a 409 naming its reason.
 * Resolves to the transaction's hash.
 */
export async function spendAuthorization(chain: LocalChain, authorization: Authorization, action: "use" | "cancel", privateKey?: Hex): Promise<Hex> {
  const sender = privateKeyToAccount(localAccount(ACCOUNT_INDEX.deployer).privateKey);
  const from = getAddress(authorization.from);
  const nonce = authorization.nonce;
  let call: { functionName: "transferWithAuthorization" | "cancelAuthorization"; args: readonly unknown[] };
  if (action === "use") {
    call = {
      functionName: "transferWithAuthorization",
      args: [from, getAddress(authorization.to), BigInt(authorization.value), BigInt(authorization.validAfter), BigInt(authorization.validBefore), nonce, authorization.signature],
    };
  } else {
    const payer = privateKeyToAccount(payerKey(chain, from, privateKey));
    const signature = await payer.signTypedData({
      domain: { ...chain.domain, chainId: chain.chainId, verifyingContract: chain.token },
      types: CANCEL_AUTHORIZATION_TYPES,
      primaryType: "CancelAuthorization",
      message: { authorizer: from, nonce },
    });
    const { v, r, s } = parseSignature(signature);
    call = { functionName: "cancelAuthorization", args: [from, nonce, Number(v), r, s] };
  }
  try {
    const { request } = await chain.publicClient.simulateContract({ address: chain.token, abi: tokenAbi, ...call, account: sender } as never);
    const wallet = await impersonate(chain.provider, chain.publicClient, sender.address, VIEM_CHAINS[chain.viemChain], chain.transport);
    const hash = await wallet.writeContract(request as never);
    const receipt = await chain.publicClient.waitForTransactionReceipt({ hash, pollingInterval: 20 });
    if (receipt.status !== "success") throw new Error("the transaction reverted");
    return hash;
  } catch (error) {
    throw new HarnessControlError(409, `${chain.network}: ${call.functionName} of ${from}'s nonce ${nonce} failed: ${reasonOf(error)}`);
  }
}

/** The head block's number and time. */
export async function head(chain: LocalChain): Promise<{ blockNumber: number; timestamp: number }> {
  const block = (await chain.provider.request({ method: "eth_getBlockByNumber", params: ["latest", false] })) as { number: Hex; timestamp: Hex };
  return { blockNumber: Number(BigInt(block.number)), timestamp: Number(BigInt(block.timestamp)) };
}

/** Moves the chain's clock forward by `seconds`; with blocks running, mines a block so the head carries it. Resolves to the head's time (or the next block's). */
export async function advanceTime(chain: LocalChain, seconds: number, mine: boolean): Promise<number> {
  await chain.provider.request({ method: "evm_increaseTime", params: [seconds] });
  if (mine) {
    await chain.provider.request({ method: "evm_mine", params: [] });
    return (await head(chain)).timestamp;
  }
  return (await head(chain)).timestamp + seconds;
}

/** Stops block production: no automine, no interval mining. Transactions wait in the pool. */
export async function stopMining(chain: LocalChain): Promise<void> {
  await chain.provider.request({ method: "evm_setAutomine", params: [false] });
  await chain.provider.request({ method: "evm_setIntervalMining", params: [0] });
}

/** The most blocks a resume mines at once to empty the pool (each holds as much as the block gas limit allows). */
const MAX_CATCH_UP_BLOCKS = 100;

/** Resumes the chain's own pace (automine, or its block time), the transactions that waited mined at once. */
export async function resumeMining(chain: LocalChain): Promise<void> {
  for (let i = 0; i < MAX_CATCH_UP_BLOCKS; i++) {
    const pending = (await chain.provider.request({ method: "eth_getBlockByNumber", params: ["pending", false] })) as { transactions: unknown[] } | null;
    if (!pending || pending.transactions.length === 0) break;
    await chain.provider.request({ method: "evm_mine", params: [] });
  }
  if (chain.blockTimeMs > 0) await chain.provider.request({ method: "evm_setIntervalMining", params: [chain.blockTimeMs] });
  else await chain.provider.request({ method: "evm_setAutomine", params: [true] });
}
