// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC1271} from "@openzeppelin/contracts/interfaces/IERC1271.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";

/**
 * @title FlipWallet
 * @notice Test helper (an attacker's wallet): accepts its owner's signature until anyone calls the
 * cheap `poke()`, and again after `unpoke()`. Sent in the same block just before a settlement, a poke
 * makes a settlement that simulated fine revert on chain, at the relayer's expense. The owner is in
 * storage, so every FlipWallet has the same runtime code (one code hash).
 */
contract FlipWallet is IERC1271 {
    address public owner;
    bool public poked;

    constructor(address walletOwner) {
        owner = walletOwner;
    }

    function poke() external {
        poked = true;
    }

    function unpoke() external {
        poked = false;
    }

    function isValidSignature(bytes32 digest, bytes memory signature) external view returns (bytes4) {
        if (poked) return 0xffffffff;
        (address signer, ECDSA.RecoverError err, ) = ECDSA.tryRecover(digest, signature);
        if (err == ECDSA.RecoverError.NoError && signer == owner) return IERC1271.isValidSignature.selector;
        return 0xffffffff;
    }
}
