// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC1271} from "@openzeppelin/contracts/interfaces/IERC1271.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";

/**
 * @title ERC1271Wallet
 * @notice Test helper: a contract wallet that accepts a digest signed by its owner's key.
 */
contract ERC1271Wallet is IERC1271 {
    address public immutable owner;

    constructor(address walletOwner) {
        owner = walletOwner;
    }

    function isValidSignature(bytes32 digest, bytes memory signature) external view returns (bytes4) {
        (address signer, ECDSA.RecoverError err, ) = ECDSA.tryRecover(digest, signature);
        if (err == ECDSA.RecoverError.NoError && signer == owner) {
            return IERC1271.isValidSignature.selector;
        }
        return 0xffffffff;
    }
}
