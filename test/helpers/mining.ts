// Helpers only: importing this file runs nothing (hardhat-mocha loads every file under test/).
// Automine on an in-process chain: off, sent transactions wait in the pool for a mine.

/** Anything that answers EIP-1193 requests: a Hardhat connection's provider, a harness chain's. */
export interface Requester {
  request(args: { method: string; params?: unknown[] }): Promise<unknown>;
}

/** Switches automine on or off (`evm_setAutomine`). */
export async function setAutomine(provider: Requester, on: boolean): Promise<void> {
  await provider.request({ method: "evm_setAutomine", params: [on] });
}

/** Runs `work` with automine off, and switches it back on afterwards, whatever happened. */
export async function withoutAutomine<T>(provider: Requester, work: () => Promise<T>): Promise<T> {
  await setAutomine(provider, false);
  try {
    return await work();
  } finally {
    await setAutomine(provider, true);
  }
}

/** Mines a block every `ms` (`evm_setIntervalMining`; 0: no more interval blocks). */
export async function setIntervalMining(provider: Requester, ms: number): Promise<void> {
  await provider.request({ method: "evm_setIntervalMining", params: [ms] });
}
