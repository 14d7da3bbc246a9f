import { concat, encodeFunctionData, hashTypedData, keccak256, stringToHex, toHex, type Address, type Hex } from "viem";
import { privateKeyToAccount, type PrivateKeyAccount } from "viem/accounts";
import { encodePaymentHeader } from "../../src/protocol/header.js";
import { transferAuthorizationTypedData } from "../../src/protocol/eip3009.js";
import type { openChain } from "./token.js";

// Helpers only: importing this file runs nothing (hardhat-mocha loads every file under test/).
// Contract-wallet payers (contracts/test): an owner wallet, a Safe-like multi-owner wallet behind a
// proxy, and two attackers' wallets (one burns gas in isValidSignature, one flips after a poke).

type Chain = Awaited<ReturnType<typeof openChain>>;

/** A contract wallet as a payer: its address and how its owners sign a digest for it. */
export interface WalletPayer {
  kind: string;
  address: Address;
  /** The signature the wallet's `isValidSignature` accepts for `digest`. */
  sign(digest: Hex): Promise<Hex>;
}

/** Fixed, LOCAL-ONLY test keys for wallet owners (derived from labels; they hold nothing anywhere). */
export function walletOwnerKey(label: string): PrivateKeyAccount {
  return privateKeyToAccount(keccak256(stringToHex(`x402 kit tests: ${label}`)));
}

/** An ERC1271Wallet: one owner key. */
export async function deployOwnerWallet(chain: Chain, owner: PrivateKeyAccount = walletOwnerKey("owner wallet")): Promise<WalletPayer> {
  const wallet = await chain.viem.deployContract("ERC1271Wallet", [owner.address]);
  return { kind: "owner wallet (1 key)", address: wallet.address, sign: (hash) => owner.sign({ hash }) };
}

/** A Safe-like wallet: `threshold` of `owners` sign, behind a delegatecall proxy (as a Safe). */
export async function deploySafeLikeWallet(chain: Chain, threshold: number, ownerCount: number): Promise<WalletPayer> {
  const owners = Array.from({ length: ownerCount }, (_, i) => walletOwnerKey(`safe owner ${i}`));
  const singleton = await chain.viem.deployContract("SafeLikeWallet", []);
  const setup = encodeFunctionData({
    abi: singleton.abi,
    functionName: "setup",
    args: [owners.map((o) => o.address), BigInt(threshold)],
  });
  const proxy = await chain.viem.deployContract("SafeLikeProxy", [singleton.address, setup]);
  // Signers in ascending address order, as a Safe requires.
  const signers = [...owners].sort((a, b) => (BigInt(a.address) < BigInt(b.address) ? -1 : 1)).slice(0, threshold);
  return {
    kind: `Safe-like wallet (${threshold} of ${ownerCount}, proxy)`,
    address: proxy.address,
    sign: async (hash) => concat(await Promise.all(signers.map((o) => o.sign({ hash })))),
  };
}

/** A GasBurnerWallet: accepts its owner's signature after `rounds` keccak rounds. */
export async function deployGasBurnerWallet(chain: Chain, rounds: bigint, owner: PrivateKeyAccount = walletOwnerKey("burner owner")): Promise<WalletPayer> {
  const wallet = await chain.viem.deployContract("GasBurnerWallet", [owner.address, rounds]);
  return { kind: `gas burner (${rounds} rounds)`, address: wallet.address, sign: (hash) => owner.sign({ hash }) };
}

/** A FlipWallet (every one has the same code hash): valid until `poke()`. */
export async function deployFlipWallet(chain: Chain, owner: PrivateKeyAccount = walletOwnerKey("flip owner")) {
  const contract = await chain.viem.deployContract("FlipWallet", [owner.address]);
  const payer: WalletPayer = { kind: "flip wallet", address: contract.address, sign: (hash) => owner.sign({ hash }) };
  return { payer, contract };
}

/** Options of {@link walletPayment}. */
export interface WalletPaymentOptions {
  payTo: Address;
  amount?: bigint;
  validBefore?: bigint;
  nonce?: Hex;
}

/** A verify/settle body paid by a contract wallet: the owners sign the EIP-712 digest the token hands the wallet. */
export async function walletPayment(chain: Chain, payer: WalletPayer, options: WalletPaymentOptions) {
  const amount = options.amount ?? 1_000_000n;
  const latest = await chain.publicClient.getBlock();
  const message = {
    from: payer.address,
    to: options.payTo,
    value: amount,
    validAfter: 0n,
    validBefore: options.validBefore ?? latest.timestamp + 3600n,
    nonce: options.nonce ?? toHex(crypto.getRandomValues(new Uint8Array(32))),
  };
  const domain = { name: chain.info.domain.name, version: chain.info.domain.version, chainId: chain.info.chainId, verifyingContract: chain.token };
  const signature = await payer.sign(hashTypedData(transferAuthorizationTypedData(domain, message)));
  const network = chain.info.network;
  const paymentHeader = encodePaymentHeader({ network, ...message, value: amount.toString(), signature, asset: chain.token });
  const paymentRequirements = {
    scheme: "exact",
    network,
    payTo: options.payTo,
    asset: chain.token,
    description: "a paid resource",
    mimeType: "application/json",
    maxAmountRequired: amount.toString(),
    maxTimeoutSeconds: 300,
  };
  return { body: { x402Version: 1, paymentHeader, paymentRequirements }, message, signature };
}
