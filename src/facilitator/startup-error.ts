/** A start-up check failed: the message is one line naming the network, the variable and what was found. */
export class StartupError extends Error {
  override name = "StartupError";
}
