/**
 * The kit's two local chains as Hardhat networks: EDR chains that report the real Cronos chain ids, so
 * signatures made for them verify. The clone's hardhat.config.ts and an installed package's harness
 * both use these.
 */
export const KIT_HARDHAT_NETWORKS = {
  cronosTestnet: { type: "edr-simulated", chainType: "l1", chainId: 338 },
  cronosMainnet: { type: "edr-simulated", chainType: "l1", chainId: 25 },
} as const;
