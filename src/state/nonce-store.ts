import type { Address, Hex } from "viem";

// The index keeps what must outlive a process, and what instances share, through this port: the
// settlement ledger implements it (src/ledger), and the facilitator hands the ledger in. The shapes
// match the ledger's own so neither room imports the other.

/** One token on one chain. */
export interface NonceScope {
  chainId: number;
  token: Address;
}

/** An authorization nonce found used or canceled on chain, and the block of its log. */
export interface StoredNonce {
  authorizer: Address;
  nonce: Hex;
  blockNumber: bigint;
}

/** How far the shared record of used and canceled nonces reaches: every such log of fromBlock..throughBlock is stored. */
export interface NonceProgress {
  fromBlock: bigint;
  throughBlock: bigint;
}

/** Where the nonce backfill keeps its nonces and its progress (the ledger: shared by instances, kept over restarts). */
export interface NonceStore {
  nonceIndexProgress(scope: NonceScope): Promise<NonceProgress | undefined>;
  openNonceIndex(scope: NonceScope, fromBlock: bigint): Promise<NonceProgress>;
  /** `throughHash`: the hash of `throughBlock`, kept with the progress (a checkpoint of the chain's history). */
  recordIndexedNonces(scope: NonceScope, nonces: readonly StoredNonce[], range: { fromBlock: bigint; throughBlock: bigint; throughHash?: Hex }): Promise<NonceProgress>;
  indexedNonces(scope: NonceScope, options: { after?: { authorizer: Address; nonce: Hex }; limit: number }): Promise<StoredNonce[]>;
  indexedNonce(scope: NonceScope, authorizer: Address, nonce: Hex): Promise<StoredNonce | undefined>;
}

/** A block of a chain's history. */
export interface BlockRef {
  number: bigint;
  hash: Hex;
}

/** What the store knows of the history its rows of one chain were learned on (the ledger's `ChainHistoryRecord`). */
export interface StoredHistory {
  genesisHash: Hex;
  epoch: number;
  /** Blocks of that history, newest first, with when they were recorded (the store's clock, ms). */
  checkpoints: ReadonlyArray<BlockRef & { recordedAt: number }>;
}

/** A settled payment as the store holds it: what its receipt must show for it to stay. */
export interface StoredPayment {
  id: number;
  key: { authorizer: Address; nonce: Hex };
  payee: Address;
  value: bigint;
  txHash?: Hex;
  blockNumber?: bigint;
}

/** Where the chain's history is checked against what was learned on it (the ledger, see its `adoptChainHistory`). */
export interface HistoryStore {
  chainHistory(chainId: number): Promise<StoredHistory | undefined>;
  recordCheckpoint(chainId: number, block: BlockRef): Promise<void>;
  settledAfter(chainId: number, options: { afterBlock?: bigint; limit: number }): Promise<StoredPayment[]>;
  nonceIndexProgress(scope: NonceScope): Promise<NonceProgress | undefined>;
  adoptChainHistory(change: {
    chainId: number;
    genesisHash: Hex;
    common?: BlockRef;
    since?: number;
    keep?: readonly number[];
    epoch: number | undefined;
    reason: string;
  }): Promise<{ adopted: false } | { adopted: true; epoch: number; settlements: number; penalties: number; paymentIdentifiers: number; catalogEntries: number; indexedNonces: number }>;
}
