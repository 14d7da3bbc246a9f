import { pbkdf2Sync } from "node:crypto";
import { HDKey, privateKeyToAddress } from "viem/accounts";
import { bytesToHex, type Address, type Hex } from "viem";

/**
 * Hardhat's default mnemonic. Its keys are PUBLIC (printed by every `hardhat node`): anything they
 * hold on a real network is taken within seconds. LOCAL-ONLY.
 */
export const HARDHAT_MNEMONIC = "test test test test test test test test test test test junk";

/** Roles of Hardhat's default accounts in the local stack. */
export const ACCOUNT_INDEX = {
  /** Deploys the token and owns it (owner, master minter, pauser, blacklister). */
  deployer: 0,
  /** The default seller `payTo`. */
  seller: 1,
  /** The facilitator's relayer (sends settle transactions). */
  relayer: 9,
  /** Buyers start here and skip the indexes above. */
  firstBuyer: 2,
} as const;

/** How many accounts the local chains pre-fund with native gas (Hardhat's default `count`). */
export const PREFUNDED_ACCOUNTS = 20;

/** A LOCAL-ONLY account derived from {@link HARDHAT_MNEMONIC}. */
export interface LocalAccount {
  /** Index on the path m/44'/60'/0'/0/index. */
  index: number;
  address: Address;
  /** PUBLIC Hardhat test key: never use it on a real network. */
  privateKey: Hex;
}

let masterKey: HDKey | undefined;

/** Derives Hardhat default account `index` (BIP-39 seed via node:crypto: one PBKDF2 for all indexes). */
export function localAccount(index: number): LocalAccount {
  if (!Number.isInteger(index) || index < 0) throw new RangeError(`account index must be a non-negative integer, got ${index}`);
  masterKey ??= HDKey.fromMasterSeed(pbkdf2Sync(HARDHAT_MNEMONIC.normalize("NFKD"), "mnemonic", 2048, 64, "sha512"));
  const key = masterKey.derive(`m/44'/60'/0'/0/${index}`).privateKey;
  if (!key) throw new Error(`cannot derive account #${index}`);
  const privateKey = bytesToHex(key);
  return { index, address: privateKeyToAddress(privateKey), privateKey };
}

/** The account indexes of `count` buyers: #2 upward, skipping the relayer (#9). */
export function buyerIndexes(count: number): number[] {
  const indexes: number[] = [];
  for (let index: number = ACCOUNT_INDEX.firstBuyer; indexes.length < count; index++) {
    if (index !== ACCOUNT_INDEX.relayer) indexes.push(index);
  }
  return indexes;
}
