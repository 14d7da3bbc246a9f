import { KitError } from "../protocol/errors.js";
/** What a port of the local stack is for; the CLI maps it to the flag and variable that change it. */
export type PortRole = "cronos-testnet-rpc" | "cronos-mainnet-rpc" | "facilitator";

/** Readable name of each {@link PortRole}. */
export const PORT_ROLE_LABEL: Readonly<Record<PortRole, string>> = {
  "cronos-testnet-rpc": "cronos-testnet JSON-RPC",
  "cronos-mainnet-rpc": "cronos-mainnet JSON-RPC",
  facilitator: "facilitator",
};

/** A port the local stack wanted is already taken (by another program or an earlier run). */
export class PortInUseError extends KitError<"port_in_use"> {
  override name = "PortInUseError";

  /**
   * @param port - The port that was asked for.
   * @param role - What the port was for.
   * @param host - The address it was bound on.
   */
  constructor(
    readonly port: number,
    readonly role: PortRole,
    readonly host: string,
    options?: ErrorOptions,
  ) {
    super("port_in_use", `port ${port} on ${host} (${PORT_ROLE_LABEL[role]}) is already in use`, options);
  }
}

/** True for Node's "address in use" listen error. */
export function isAddressInUse(error: unknown): boolean {
  return typeof error === "object" && error !== null && (error as NodeJS.ErrnoException).code === "EADDRINUSE";
}
