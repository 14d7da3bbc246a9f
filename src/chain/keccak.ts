import { createRequire } from "node:module";
import { dirname } from "node:path";
import { keccak256 as jsKeccak256 } from "viem";

/** The sponge of the `keccak` package's native addon (the XKCP code), as its own JS wrapper drives it. */
interface KeccakState {
  initialize(rate: number, capacity: number): void;
  absorb(data: Uint8Array): void;
  squeeze(length: number): Buffer;
}

const require = createRequire(import.meta.url);

// The package's own entry wraps the addon in a stream per hash (about 10 µs); the bare sponge costs about
// a microsecond for the 64-byte public key. Loaded the way the package loads it; JS (viem's) when it cannot be.
function loadNative(): KeccakState | undefined {
  try {
    const root = dirname(require.resolve("keccak/package.json"));
    const addon = createRequire(`${root}/`)("node-gyp-build")(root) as unknown;
    if (typeof addon !== "function") return undefined;
    return new (addon as new () => KeccakState)();
  } catch {
    return undefined;
  }
}

const native = loadNative();

/** Which keccak-256 runs on verify's path: the native addon of the `keccak` package, or viem's JS. */
export const keccakBackend: "native" | "javascript" = native ? "native" : "javascript";

/** keccak-256 of `data` (32 bytes), natively when the addon loads. */
export const keccak256Bytes: (data: Uint8Array) => Uint8Array = native
  ? (data) => {
      native.initialize(1088, 512);
      native.absorb(data);
      return native.squeeze(32);
    }
  : (data) => jsKeccak256(data, "bytes");

/** keccak-256 in JS, whatever the backend (the tests hold the native one to it). */
export const keccak256Js = (data: Uint8Array): Uint8Array => jsKeccak256(data, "bytes");
