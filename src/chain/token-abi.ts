import { parseAbi } from "viem";

/**
 * The part of USDC.e's ABI the kit uses: ERC-20, EIP-3009, EIP-712/ERC-5267 and FiatToken's
 * controls. Function signatures are FiatToken v2's, so the same calls work against the real
 * token (test/token checks this list against the compiled BridgedUSDC artifact).
 */
export const tokenAbi = parseAbi([
  "function name() view returns (string)",
  "function symbol() view returns (string)",
  "function decimals() view returns (uint8)",
  "function version() view returns (string)",
  "function totalSupply() view returns (uint256)",
  "function balanceOf(address account) view returns (uint256)",
  "function allowance(address holder, address spender) view returns (uint256)",
  "function approve(address spender, uint256 value) returns (bool)",
  "function transfer(address to, uint256 value) returns (bool)",
  "function transferFrom(address from, address to, uint256 value) returns (bool)",
  "function DOMAIN_SEPARATOR() view returns (bytes32)",
  "function eip712Domain() view returns (bytes1 fields, string name, string version, uint256 chainId, address verifyingContract, bytes32 salt, uint256[] extensions)",
  "function TRANSFER_WITH_AUTHORIZATION_TYPEHASH() view returns (bytes32)",
  "function RECEIVE_WITH_AUTHORIZATION_TYPEHASH() view returns (bytes32)",
  "function CANCEL_AUTHORIZATION_TYPEHASH() view returns (bytes32)",
  "function authorizationState(address authorizer, bytes32 nonce) view returns (bool)",
  "function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, uint8 v, bytes32 r, bytes32 s)",
  "function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, bytes signature)",
  "function receiveWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, uint8 v, bytes32 r, bytes32 s)",
  "function receiveWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, bytes signature)",
  "function cancelAuthorization(address authorizer, bytes32 nonce, uint8 v, bytes32 r, bytes32 s)",
  "function cancelAuthorization(address authorizer, bytes32 nonce, bytes signature)",
  "function masterMinter() view returns (address)",
  "function configureMinter(address minter, uint256 minterAllowedAmount) returns (bool)",
  "function mint(address to, uint256 amount) returns (bool)",
  "function pause()",
  "function unpause()",
  "function paused() view returns (bool)",
  "function blacklist(address account)",
  "function unBlacklist(address account)",
  "function isBlacklisted(address account) view returns (bool)",
  "event Transfer(address indexed from, address indexed to, uint256 value)",
  "event Approval(address indexed owner, address indexed spender, uint256 value)",
  "event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)",
  "event AuthorizationCanceled(address indexed authorizer, bytes32 indexed nonce)",
  "event Pause()",
  "event Unpause()",
]);

/** Set-up call of the kit's BridgedUSDC (not part of the real token's public surface). */
export const tokenInitializeAbi = parseAbi([
  "function initialize(string tokenName, string tokenSymbol, string tokenVersion, uint8 tokenDecimals, address newOwner)",
]);

/** ERC-1271 `isValidSignature`. */
export const erc1271Abi = parseAbi([
  "function isValidSignature(bytes32 digest, bytes signature) view returns (bytes4)",
]);

/** The magic value ERC-1271 wallets return for a valid signature. */
export const ERC1271_MAGIC_VALUE = "0x1626ba7e" as const;
