// What the Cronos node's faults do on a local chain started with node "cronos": they hold its node to
// other settings (a backend behind the head, a higher minimum gas price, replacement off) or empty its pool.
import { numberToHex, type Hex } from "viem";
import type { NetworkName } from "../../protocol/networks.js";
import type { LocalChain } from "../chain.js";
import type { CronosNode } from "../cronos-node/node.js";
import { HarnessControlError, type ParsedFaultSpec } from "./spec.js";

type NodeFaultSpec = Extract<ParsedFaultSpec, { kind: "lagging-backend" | "min-fee" | "no-replacement" }>;

/** The chain's Cronos node; a 409 when the chain answers as EDR alone. */
function nodeOf(chain: LocalChain, kind: string): CronosNode {
  if (!chain.cronosNode) {
    throw new HarnessControlError(409, `${chain.network}: the chain answers as EDR alone (node "ethereum"): a ${kind} fault is a Cronos node's; start it with node "cronos"`);
  }
  return chain.cronosNode;
}

/** Holds the chain's node to the fault `id` (a lagging backend, a minimum gas price, replacement off); resolves to its undo. */
export async function holdNode(chain: LocalChain, id: string, spec: NodeFaultSpec): Promise<() => Promise<void>> {
  const node = nodeOf(chain, spec.kind);
  if (spec.kind === "lagging-backend") node.hold(id, { lag: { blocks: spec.blocks, refusals: spec.refusals } });
  else if (spec.kind === "no-replacement") node.hold(id, { replacement: false });
  else {
    node.hold(id, { minGasPrice: spec.minGasPrice });
    // As Cronos' fee market does, the next block's base fee rises to the minimum; with automine (no block
    // comes by itself) one is mined now, so the head already shows it. Stopped blocks stay stopped.
    const latest = (await chain.provider.request({ method: "eth_getBlockByNumber", params: ["latest", false] })) as { baseFeePerGas?: Hex };
    if (BigInt(latest.baseFeePerGas ?? "0x0") < spec.minGasPrice) {
      await chain.provider.request({ method: "hardhat_setNextBlockBaseFeePerGas", params: [numberToHex(spec.minGasPrice)] });
      if (await chain.provider.request({ method: "hardhat_getAutomine", params: [] })) await chain.provider.request({ method: "evm_mine", params: [] });
    }
  }
  return async () => void node.release(id);
}

/** The chain's node loses its pool (as a restart); resolves to the hashes dropped. */
export function losePool(chain: LocalChain): Promise<Hex[]> {
  return nodeOf(chain, "mempool-lost").losePool();
}

/** The correct sends the lagging backend `id` still refuses, summed over the chains it holds. */
export function refusalsLeft(chains: Partial<Record<NetworkName, LocalChain>>, id: string): number | undefined {
  const left = Object.values(chains)
    .map((chain) => chain.cronosNode?.refusalsLeft(id))
    .filter((count): count is number => count !== undefined);
  return left.length === 0 ? undefined : left.reduce((sum, count) => sum + count, 0);
}
