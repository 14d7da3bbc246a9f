import { BlockNotFoundError, type Address, type PublicClient } from "viem";

/**
 * The first block at which `contract` has code: a binary search over `eth_getCode` at past blocks (about
 * 25 reads on a chain of tens of millions of blocks). It needs a node that keeps past state (an archive
 * node); one that cannot answer for a past block makes it throw, rather than guess a later block and let
 * the backfill miss what came before. A block the chain never had (below its first) counts as no code.
 */
export async function findDeploymentBlock(client: PublicClient, contract: Address, head: bigint): Promise<bigint> {
  const hasCode = async (blockNumber: bigint): Promise<boolean> => {
    try {
      const code = await client.getCode({ address: contract, blockNumber });
      return code !== undefined && code !== "0x";
    } catch (error) {
      const missing = await client.getBlock({ blockNumber }).then(
        () => false,
        (lookup: unknown) => lookup instanceof BlockNotFoundError,
      );
      if (missing) return false;
      throw error;
    }
  };
  if (!(await hasCode(head))) throw new Error(`no contract at ${contract} at block ${head}`);
  let low = 0n;
  let high = head;
  while (low < high) {
    const middle = (low + high) / 2n;
    if (await hasCode(middle)) high = middle;
    else low = middle + 1n;
  }
  return low;
}
