// Types of what scripts/bootstrap.mjs exports (for its tests).

export interface Step {
  run: readonly string[];
  before?: () => string;
  after?: (startedMs: number) => string;
}

/** What each npm script runs, by script name. */
export const COMMANDS: Readonly<Record<string, readonly Step[]>>;

/** The version of the `node` devDependency that package-lock.json pins; throws when it pins none. */
export function lockedNodeVersion(lock: unknown): string;

/** The command that installs the dependencies on this Node, platform and architecture. */
export function installCommand(options: { nodeVersion: string; platform: string; arch: string; lock: unknown }): {
  command: string;
  args: string[];
  node: string;
};
