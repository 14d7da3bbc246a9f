// Which client a connection counts against, by its address.
import { isIPv4, isIPv6 } from "node:net";

/**
 * The client a connection counts against: its IPv4 address (an IPv4-mapped IPv6 address is read as
 * IPv4), or the first 56 bits of its IPv6 address (`2001:db8:0:ab00::/56`).
 */
export function clientOf(address: string): string {
  const plain = address.replace(/%.*$/, "");
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(plain);
  if (mapped) return mapped[1]!;
  if (isIPv4(plain) || !isIPv6(plain)) return plain;
  const groups = ipv6Groups(plain);
  return `${groups.slice(0, 3).map((g) => g.toString(16)).join(":")}:${(groups[3]! & 0xff00).toString(16)}::/56`;
}

/** The eight 16-bit groups of a valid IPv6 address (`::` expanded, an IPv4 tail read as two groups). */
function ipv6Groups(address: string): number[] {
  let text = address;
  const tail = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (tail) {
    const [a, b, c, d] = tail.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, tail.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = "", rest] = text.split("::");
  const left = head === "" ? [] : head.split(":");
  const right = rest === undefined || rest === "" ? [] : rest.split(":");
  const middle = rest === undefined ? [] : Array<string>(8 - left.length - right.length).fill("0");
  return [...left, ...middle, ...right].map((group) => parseInt(group, 16));
}
