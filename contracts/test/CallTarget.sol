// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/**
 * @title CallTarget
 * @notice Test helper for Multicall3: a target that reports who called it with how much value,
 * functions that always revert, and a relay that calls another contract inside a mined transaction
 * and logs the outcome (so block-context getters can be read as a real block sees them).
 */
contract CallTarget {
    error Refused(uint256 code);

    /// @notice Emitted by {relay} with the outcome of the call it made.
    event Relayed(bool success, bytes returnData);

    /// @notice Returns the caller and the value it sent.
    function echo() external payable returns (address caller, uint256 value) {
        return (msg.sender, msg.value);
    }

    /// @notice Always reverts with `reason`.
    function fail(string calldata reason) external payable {
        revert(reason);
    }

    /// @notice Always reverts with the custom error {Refused}.
    function refuse(uint256 code) external pure {
        revert Refused(code);
    }

    /// @notice Calls `target` with `data` and all the value sent, and logs the outcome.
    function relay(address target, bytes calldata data) external payable {
        (bool success, bytes memory returnData) = target.call{value: msg.value}(data);
        emit Relayed(success, returnData);
    }
}
