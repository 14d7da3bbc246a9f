import { assert } from "chai";
import {
  getAddress,
  keccak256,
  parseEventLogs,
  stringToHex,
  type Address,
  type Hash,
  type Hex,
  type TransactionReceipt,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import type { NetworkName } from "../../src/protocol/networks.js";
import { expectRevert } from "../helpers/revert.js";
import { openChain } from "../helpers/token.js";
import {
  authorizationArgs,
  randomNonce,
  signCancelAuthorization,
  signTransferAuthorization,
  type AuthorizationMessage,
  type AuthorizationPrimaryType,
  type Eip712Domain,
  type SplitSignature,
} from "../helpers/sign.js";

// Helpers only: importing this file runs nothing (hardhat-mocha loads every file under test/).

/** Every buyer `openChain` funds starts with this many base units (1,000 USDC.e). */
export const BUYER_FUNDS = 1_000_000_000n;

/** The two ways an EIP-3009 signature can be passed. */
export const OVERLOADS = ["v, r, s", "bytes signature"] as const;
export type Overload = (typeof OVERLOADS)[number];

export type TokenChain = Awaited<ReturnType<typeof openTokenChain>>;

/** Who pays: an EOA (ECRecover) or an ERC-1271 contract wallet (isValidSignature), as in Circle's matrix. */
export const PAYER_KINDS = ["EOA", "ERC-1271 wallet"] as const;
export type PayerKind = (typeof PAYER_KINDS)[number];

/** A payer: its address and how it signs (the EOA's own key, or the wallet owner's key over the wallet's digest). */
export interface Payer {
  kind: PayerKind;
  address: Address;
  sign(message: AuthorizationMessage, primaryType?: AuthorizationPrimaryType): Promise<SplitSignature>;
  signCancel(nonce: Hex): Promise<SplitSignature>;
}

/** A fixed, local-only test key: the owner of the ERC-1271 wallet. */
export const WALLET_OWNER = privateKeyToAccount(keccak256(stringToHex("BridgedUSDC tests: ERC-1271 wallet owner")));

/** Another fixed, local-only test key that has no role anywhere. */
export const OTHER_KEY = privateKeyToAccount(keccak256(stringToHex("BridgedUSDC tests: an unrelated key")));

/**
 * Opens a chain with the token and names the actors:
 * owner (account #0: owner, master minter, pauser, blacklister), payer (a funded buyer),
 * payee (unfunded), relayer (submits transactions, holds no tokens) and stranger (no role).
 * `restore()` brings the chain back to the state right after opening.
 */
export async function openTokenChain(network: NetworkName = "cronos-testnet", options: { at?: Address } = {}) {
  const chain = await openChain(network, { at: options.at });
  const { wallets, contract, publicClient, networkHelpers } = chain;
  const pick = (index: number) => {
    const wallet = wallets[index];
    if (!wallet) throw new Error(`no wallet client #${index}`);
    return wallet;
  };
  const owner = pick(0);
  const payer = pick(2);
  const secondBuyer = pick(3);
  const payee = pick(10);
  const relayer = pick(11);
  const stranger = pick(12);
  const domain: Eip712Domain = {
    name: chain.info.domain.name,
    version: chain.info.domain.version,
    chainId: chain.info.chainId,
    verifyingContract: getAddress(chain.token),
  };
  // An ERC-1271 wallet owned by WALLET_OWNER, funded like a buyer.
  const wallet = await chain.viem.deployContract("ERC1271Wallet", [WALLET_OWNER.address]);
  await publicClient.waitForTransactionReceipt({
    hash: await contract.write.mint([wallet.address, BUYER_FUNDS]),
    pollingInterval: 20,
  });
  let snapshot = await networkHelpers.takeSnapshot();

  const eoaPayer: Payer = {
    kind: "EOA",
    address: payer.account.address,
    sign: (m, primaryType) => signTransferAuthorization({ walletClient: payer, domain, message: m, primaryType }),
    signCancel: (nonce) =>
      signCancelAuthorization({ walletClient: payer, domain, message: { authorizer: payer.account.address, nonce } }),
  };
  const walletPayer: Payer = {
    kind: "ERC-1271 wallet",
    address: getAddress(wallet.address),
    sign: (m, primaryType) => signTransferAuthorization({ account: WALLET_OWNER, domain, message: m, primaryType }),
    signCancel: (nonce) =>
      signCancelAuthorization({
        account: WALLET_OWNER,
        domain,
        message: { authorizer: getAddress(wallet.address), nonce },
      }),
  };
  /** The payer of a kind. */
  function payerOf(kind: PayerKind): Payer {
    return kind === "EOA" ? eoaPayer : walletPayer;
  }

  /** A transfer authorization from the EOA payer (unless `from` is given) to the payee of 1.5 USDC.e, valid for an hour, with a random nonce. */
  async function message(overrides: Partial<AuthorizationMessage> = {}): Promise<AuthorizationMessage> {
    const now = BigInt(await networkHelpers.time.latest());
    return {
      from: payer.account.address,
      to: payee.account.address,
      value: 1_500_000n,
      validAfter: 0n,
      validBefore: now + 3600n,
      nonce: randomNonce(),
      ...overrides,
    };
  }

  /** Calls `transferWithAuthorization` through the chosen overload (from the relayer unless told). */
  function transferWithAuthorization(
    overload: Overload,
    m: AuthorizationMessage,
    signature: SplitSignature,
    from = relayer,
  ): Promise<Hash> {
    return overload === "v, r, s"
      ? contract.write.transferWithAuthorization([...authorizationArgs(m), signature.v, signature.r, signature.s], {
          account: from.account,
        })
      : contract.write.transferWithAuthorization([...authorizationArgs(m), signature.signature], {
          account: from.account,
        });
  }

  /** Calls `receiveWithAuthorization` through the chosen overload (from the payee unless told). */
  function receiveWithAuthorization(
    overload: Overload,
    m: AuthorizationMessage,
    signature: SplitSignature,
    from = payee,
  ): Promise<Hash> {
    return overload === "v, r, s"
      ? contract.write.receiveWithAuthorization([...authorizationArgs(m), signature.v, signature.r, signature.s], {
          account: from.account,
        })
      : contract.write.receiveWithAuthorization([...authorizationArgs(m), signature.signature], {
          account: from.account,
        });
  }

  /** Calls `cancelAuthorization` through the chosen overload (from the relayer unless told). */
  function cancelAuthorization(
    overload: Overload,
    authorizer: Address,
    nonce: Hex,
    signature: SplitSignature,
    from = relayer,
  ): Promise<Hash> {
    return overload === "v, r, s"
      ? contract.write.cancelAuthorization([authorizer, nonce, signature.v, signature.r, signature.s], {
          account: from.account,
        })
      : contract.write.cancelAuthorization([authorizer, nonce, signature.signature], { account: from.account });
  }

  async function receipt(hash: Hash): Promise<TransactionReceipt> {
    const result = await publicClient.waitForTransactionReceipt({ hash, pollingInterval: 20 });
    assert.strictEqual(result.status, "success", "transaction status");
    return result;
  }

  /** The token's decoded logs of a receipt, in order, as `[eventName, args]`. */
  function events(result: TransactionReceipt) {
    const logs = parseEventLogs({ abi: contract.abi, logs: result.logs });
    for (const log of logs) assert.strictEqual(getAddress(log.address), getAddress(chain.token), "event emitter");
    assert.strictEqual(logs.length, result.logs.length, "every log decodes as a token event");
    return logs.map((log) => [log.eventName, log.args] as const);
  }

  /** Asserts that a receipt holds exactly AuthorizationUsed(from, nonce) then Transfer(from, to, value). */
  function expectAuthorizationUsedAndTransfer(result: TransactionReceipt, m: AuthorizationMessage): void {
    assert.deepStrictEqual(events(result), [
      ["AuthorizationUsed", { authorizer: getAddress(m.from), nonce: m.nonce }],
      ["Transfer", { from: getAddress(m.from), to: getAddress(m.to), value: m.value }],
    ]);
  }

  /** The timestamp of the block that included a receipt. */
  async function blockTimestamp(result: TransactionReceipt): Promise<bigint> {
    return (await publicClient.getBlock({ blockNumber: result.blockNumber })).timestamp;
  }

  function balanceOf(address: Address): Promise<bigint> {
    return contract.read.balanceOf([address]);
  }

  function authorizationState(authorizer: Address, nonce: Hex): Promise<boolean> {
    return contract.read.authorizationState([authorizer, nonce]);
  }

  /**
   * Asserts nothing moved and the nonce of `m` is still unused: its payer holds what it was funded with,
   * `to` (by default `m.to`) holds nothing.
   */
  async function expectUntouched(m: AuthorizationMessage, to: Address = m.to): Promise<void> {
    assert.strictEqual(await balanceOf(m.from), BUYER_FUNDS, "payer balance");
    assert.strictEqual(await balanceOf(to), 0n, "payee balance");
    assert.strictEqual(await authorizationState(m.from, m.nonce), false, "nonce used");
  }

  /** Back to the state right after opening (balances, nonces, roles, time). */
  async function restore(): Promise<void> {
    await snapshot.restore();
  }

  /** Makes the current state the one `restore()` returns to. */
  async function checkpoint(): Promise<void> {
    snapshot = await networkHelpers.takeSnapshot();
  }

  return {
    ...chain,
    owner,
    payer,
    secondBuyer,
    payee,
    relayer,
    stranger,
    wallet,
    payerOf,
    domain,
    message,
    transferWithAuthorization,
    receiveWithAuthorization,
    cancelAuthorization,
    receipt,
    events,
    expectAuthorizationUsedAndTransfer,
    blockTimestamp,
    balanceOf,
    authorizationState,
    expectUntouched,
    restore,
    checkpoint,
  };
}

/**
 * Registers a token suite's hooks (call it inside its `describe`): one chain opened before the suite,
 * brought back to its opening state before each test. The returned object is filled in by the `before` hook.
 */
export function useTokenChain(network: NetworkName = "cronos-testnet"): TokenChain {
  const c = {} as TokenChain;
  before(async () => {
    Object.assign(c, await openTokenChain(network));
  });
  beforeEach(async () => {
    await c.restore();
  });
  return c;
}

/** A payer kind through a signature interface. */
export interface MatrixEntry {
  kind: PayerKind;
  overload: Overload;
}

/** The matrix of Circle's suites: an EOA through both interfaces, an ERC-1271 wallet through the bytes one. */
export const PAYER_MATRIX: readonly MatrixEntry[] = [
  { kind: "EOA", overload: "v, r, s" },
  { kind: "EOA", overload: "bytes signature" },
  { kind: "ERC-1271 wallet", overload: "bytes signature" },
];

/** What the tests of one matrix entry work with. */
export interface MatrixCase extends MatrixEntry {
  /** The payer (or authorizer) of this entry. */
  payer(): Payer;
  /** A message from this entry's payer ({@link openTokenChain}'s defaults, then `overrides`) and its signature of it. */
  authorization(overrides?: Partial<AuthorizationMessage>): Promise<{ m: AuthorizationMessage; signature: SplitSignature }>;
  /** Nothing moved (the payer's balance and the payee's are as opened) and the nonce is unused. */
  expectNothingHappened(m: AuthorizationMessage): Promise<void>;
  /** Submits a signed authorization the suite's way, through this entry's interface (from the suite's default caller unless told). */
  submit(m: AuthorizationMessage, signature: SplitSignature, from?: Actor): Promise<Hash>;
  /**
   * Asserts that an authorization (with `overrides`) is refused with `reason` and nothing happened;
   * `before` runs first (e.g. blacklists a party). With `at`, the submitting block's time is t (60 s ahead)
   * and the overrides are `at(t)`.
   */
  expectRefused(reason: string, options: { overrides?: Partial<AuthorizationMessage>; at?: (t: bigint) => Partial<AuthorizationMessage>; before?: (m: AuthorizationMessage) => Promise<Hash> }): Promise<void>;
}

/** A wallet client of the fixture's actors (owner, payer, payee, relayer…). */
type Actor = TokenChain["payee"];

/**
 * One `describe` per matrix entry, named `with an <kind> <role>, <overload> interface`, whose body gets
 * the entry's payer and helpers. `primaryType` is what the payer signs (TransferWithAuthorization unless told).
 */
export function describeMatrix(
  c: TokenChain,
  matrix: readonly MatrixEntry[],
  options: {
    role: "payer" | "authorizer";
    primaryType?: AuthorizationPrimaryType;
    /** How the suite submits an authorization through an interface (its default caller included). */
    submit?: (overload: Overload, m: AuthorizationMessage, signature: SplitSignature, from?: Actor) => Promise<Hash>;
  },
  body: (entry: MatrixCase) => void,
): void {
  for (const { kind, overload } of matrix) {
    describe(`with an ${kind} ${options.role}, ${overload} interface`, () => {
      const payer = () => c.payerOf(kind);
      const entry: MatrixCase = {
        kind,
        overload,
        payer,
        async authorization(overrides = {}) {
          const m = await c.message({ from: payer().address, ...overrides });
          return { m, signature: await payer().sign(m, options.primaryType) };
        },
        expectNothingHappened: (m) => c.expectUntouched(m, c.payee.account.address),
        submit(m, signature, from) {
          if (!options.submit) throw new Error("describeMatrix: this suite gave no submit");
          return options.submit(overload, m, signature, from);
        },
        async expectRefused(reason, { overrides = {}, at, before }) {
          const t = BigInt(await c.networkHelpers.time.latest()) + 60n;
          const { m, signature } = await entry.authorization({ ...overrides, ...at?.(t) });
          if (before) await c.receipt(await before(m));
          if (at) await c.networkHelpers.time.setNextBlockTimestamp(t);
          await expectRevert(entry.submit(m, signature), reason);
          await entry.expectNothingHappened(m);
        },
      };
      body(entry);
    });
  }
}
