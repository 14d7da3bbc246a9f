// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC1271} from "@openzeppelin/contracts/interfaces/IERC1271.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";

/**
 * @title GasBurnerWallet
 * @notice Test helper (an attacker's wallet): accepts its owner's signature, but only after hashing
 * `rounds` times, so each `isValidSignature` burns as much gas as its deployer likes.
 */
contract GasBurnerWallet is IERC1271 {
    address public immutable owner;
    uint256 public immutable rounds;

    constructor(address walletOwner, uint256 hashRounds) {
        owner = walletOwner;
        rounds = hashRounds;
    }

    function isValidSignature(bytes32 digest, bytes memory signature) external view returns (bytes4) {
        bytes32 h = digest;
        for (uint256 i = 0; i < rounds; i++) h = keccak256(abi.encode(h, i));
        (address signer, ECDSA.RecoverError err, ) = ECDSA.tryRecover(digest, signature);
        if (h != bytes32(0) && err == ECDSA.RecoverError.NoError && signer == owner) {
            return IERC1271.isValidSignature.selector;
        }
        return 0xffffffff;
    }
}
