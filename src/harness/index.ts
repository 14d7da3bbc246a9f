// The local stack for integrators and CI: chains 338/25 with USDC.e at its real address, funded
// buyers (Hardhat's PUBLIC test keys, LOCAL-ONLY) and a facilitator, all in one process.
// Importing it starts nothing, but fails at once, saying what to install, where the chains cannot run.
import { assertHarnessCanRun } from "./require-hardhat.js";

assertHarnessCanRun();

export { assertHarnessCanRun, nodeRunsHardhat, HarnessUnavailableError, HARDHAT_MIN_NODE, HARNESS_INSTALL } from "./require-hardhat.js";
export { KIT_HARDHAT_NETWORKS } from "./hardhat-networks.js";
export { startLocalStack, type LocalStack, type LocalStackNetwork, type LocalStackOptions } from "./stack.js";
export { connectHarness, type ConnectHarnessOptions } from "./control/client.js";
export {
  HarnessControlError,
  FAULT_KINDS,
  NODE_FAULT_KINDS,
  MAX_FAULTS,
  type ChainTimes,
  type FaultHandle,
  type FaultInfo,
  type FaultKind,
  type FaultSpec,
  type FaultState,
  type HarnessControl,
  type HarnessStatus,
} from "./control/spec.js";
export { startLocalChain, HARDHAT_NETWORK, type LocalChain, type LocalChainOptions } from "./chain.js";
export { CronosNode, type CronosNodeOptions, type NodeHold } from "./cronos-node/node.js";
export { serveJsonRpc, type JsonRpcBridge, type RequestProvider, type ServeJsonRpcOptions } from "./rpc-bridge.js";
export { ACCOUNT_INDEX, HARDHAT_MNEMONIC, buyerIndexes, localAccount, type LocalAccount } from "./accounts.js";
export { PortInUseError, PORT_ROLE_LABEL, type PortRole } from "./errors.js";
export {
  CRONOS_BLOCK_TIME_MS,
  DEFAULT_BUYER_BALANCE,
  DEFAULT_BUYERS,
  DEFAULT_FACILITATOR_PORT,
  DEFAULT_NODE,
  DEFAULT_RPC_PORT,
  MAX_BUYERS,
  NODE_KINDS,
  START_BLOCK,
  type NodeKind,
} from "./defaults.js";
export { MULTICALL3_ADDRESS, placeMulticall3, VIEM_CHAIN_NAME, VIEM_CHAINS, type ViemChainName } from "./multicall3.js";
export { kitHardhat, loadKitArtifact, loadTokenArtifact, PROJECT_ROOT, type KitContract } from "./hardhat.js";
export { lineLogger, stderrSink, type LogLevel, type LogSink } from "./log.js";
