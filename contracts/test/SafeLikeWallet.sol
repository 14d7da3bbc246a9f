// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC1271} from "@openzeppelin/contracts/interfaces/IERC1271.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";

/**
 * @title SafeLikeWallet
 * @notice Test helper: a multi-owner wallet checked the way a Safe checks it. `threshold` owner
 * signatures (65 bytes each, concatenated, signers strictly ascending) over the digest; owners and
 * threshold live in storage, and the wallet runs behind {SafeLikeProxy} (a delegatecall proxy), so an
 * `isValidSignature` pays what a Safe's does: a delegatecall, cold storage reads and one ECDSA
 * recovery per signature. Used to size the facilitator's gas caps from honest contract-wallet payments.
 */
contract SafeLikeWallet is IERC1271 {
    address private _singleton; // slot 0: the proxy's implementation, as in a Safe
    mapping(address => bool) public isOwner;
    uint256 public threshold;

    /// @notice Sets the owners and the threshold; once, through the proxy.
    function setup(address[] calldata owners, uint256 walletThreshold) external {
        require(threshold == 0, "SafeLikeWallet: already set up");
        require(walletThreshold > 0 && walletThreshold <= owners.length, "SafeLikeWallet: bad threshold");
        for (uint256 i = 0; i < owners.length; i++) isOwner[owners[i]] = true;
        threshold = walletThreshold;
    }

    function isValidSignature(bytes32 digest, bytes calldata signatures) external view returns (bytes4) {
        uint256 required = threshold;
        if (required == 0 || signatures.length < required * 65) return 0xffffffff;
        address last = address(0);
        for (uint256 i = 0; i < required; i++) {
            (address signer, ECDSA.RecoverError err, ) = ECDSA.tryRecover(digest, signatures[i * 65:(i + 1) * 65]);
            if (err != ECDSA.RecoverError.NoError || signer <= last || !isOwner[signer]) return 0xffffffff;
            last = signer;
        }
        return IERC1271.isValidSignature.selector;
    }
}

/**
 * @title SafeLikeProxy
 * @notice Test helper: a Safe-style proxy (implementation address in slot 0, every call delegated).
 * All proxies share one runtime code, so they share one code hash, as Safe proxies do.
 */
contract SafeLikeProxy {
    address private _singleton;

    constructor(address singleton, bytes memory initializer) {
        _singleton = singleton;
        (bool ok, ) = singleton.delegatecall(initializer);
        require(ok, "SafeLikeProxy: setup failed");
    }

    fallback() external payable {
        address singleton = _singleton;
        assembly {
            calldatacopy(0, 0, calldatasize())
            let ok := delegatecall(gas(), singleton, 0, calldatasize(), 0, 0)
            returndatacopy(0, 0, returndatasize())
            if iszero(ok) { revert(0, returndatasize()) }
            return(0, returndatasize())
        }
    }
}
