// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/**
 * @title Multicall3
 * @notice A Multicall3-compatible batcher for the local chains, placed at the canonical address
 * 0xcA11bde05977b3631167028862bE2a173976CA11 that viem's `cronos` and `cronosTestnet` chain
 * definitions (and ethers, and most tooling) expect. Written for this kit from the published
 * interface: same function signatures, same return shapes, same revert strings and the same
 * rules for `allowFailure`, `requireSuccess` and `msg.value`.
 *
 * No constructor, no immutables and no storage: the runtime bytecode alone is the contract, so it
 * can be placed with `hardhat_setCode`. Every aggregate function is payable, as in the original;
 * only {aggregate3Value} forwards value, the others keep whatever was sent.
 */
contract Multicall3 {
    /// @notice A call for {aggregate}, {tryAggregate}, {blockAndAggregate} and {tryBlockAndAggregate}.
    struct Call {
        address target;
        bytes callData;
    }

    /// @notice A call for {aggregate3}: when `allowFailure` is false, its failure reverts the whole batch.
    struct Call3 {
        address target;
        bool allowFailure;
        bytes callData;
    }

    /// @notice A call for {aggregate3Value}, sent with `value` wei.
    struct Call3Value {
        address target;
        bool allowFailure;
        uint256 value;
        bytes callData;
    }

    /// @notice The outcome of one call: whether it succeeded, and its return (or revert) data.
    struct Result {
        bool success;
        bytes returnData;
    }

    string private constant _CALL_FAILED = "Multicall3: call failed";
    string private constant _VALUE_MISMATCH = "Multicall3: value mismatch";

    /**
     * @notice Runs every call; reverts with "Multicall3: call failed" if any fails.
     * @return blockNumber The current block number.
     * @return returnData Each call's return data, in order.
     */
    function aggregate(Call[] calldata calls) public payable returns (uint256 blockNumber, bytes[] memory returnData) {
        blockNumber = block.number;
        returnData = new bytes[](calls.length);
        for (uint256 i = 0; i < calls.length; ++i) {
            (bool success, bytes memory data) = calls[i].target.call(calls[i].callData);
            require(success, _CALL_FAILED);
            returnData[i] = data;
        }
    }

    /**
     * @notice Runs every call and reports each outcome; with `requireSuccess`, any failure reverts
     * with "Multicall3: call failed".
     */
    function tryAggregate(bool requireSuccess, Call[] calldata calls) public payable returns (Result[] memory returnData) {
        returnData = new Result[](calls.length);
        for (uint256 i = 0; i < calls.length; ++i) {
            (bool success, bytes memory data) = calls[i].target.call(calls[i].callData);
            if (requireSuccess) require(success, _CALL_FAILED);
            returnData[i] = Result(success, data);
        }
    }

    /**
     * @notice {tryAggregate} with the block number and `blockhash(block.number)`. Like the original,
     * the hash is of the current block, which the EVM does not know yet: it is always zero.
     */
    function tryBlockAndAggregate(
        bool requireSuccess,
        Call[] calldata calls
    ) public payable returns (uint256 blockNumber, bytes32 blockHash, Result[] memory returnData) {
        blockNumber = block.number;
        blockHash = blockhash(block.number);
        returnData = tryAggregate(requireSuccess, calls);
    }

    /// @notice {tryBlockAndAggregate} with `requireSuccess` true.
    function blockAndAggregate(
        Call[] calldata calls
    ) public payable returns (uint256 blockNumber, bytes32 blockHash, Result[] memory returnData) {
        (blockNumber, blockHash, returnData) = tryBlockAndAggregate(true, calls);
    }

    /**
     * @notice Runs every call and reports each outcome; a failing call whose `allowFailure` is false
     * reverts the batch with "Multicall3: call failed".
     */
    function aggregate3(Call3[] calldata calls) public payable returns (Result[] memory returnData) {
        returnData = new Result[](calls.length);
        for (uint256 i = 0; i < calls.length; ++i) {
            Call3 calldata item = calls[i];
            (bool success, bytes memory data) = item.target.call(item.callData);
            if (!item.allowFailure) require(success, _CALL_FAILED);
            returnData[i] = Result(success, data);
        }
    }

    /**
     * @notice {aggregate3} where each call carries `value` wei. The values must add up to exactly
     * `msg.value` ("Multicall3: value mismatch"), counted whether or not each call succeeded; the
     * value of a failed call that was allowed to fail stays in this contract, as in the original.
     */
    function aggregate3Value(Call3Value[] calldata calls) public payable returns (Result[] memory returnData) {
        uint256 total = 0;
        returnData = new Result[](calls.length);
        for (uint256 i = 0; i < calls.length; ++i) {
            Call3Value calldata item = calls[i];
            // Wraps like the original's unchecked sum; a wrapped total then fails the check below.
            unchecked {
                total += item.value;
            }
            (bool success, bytes memory data) = item.target.call{value: item.value}(item.callData);
            if (!item.allowFailure) require(success, _CALL_FAILED);
            returnData[i] = Result(success, data);
        }
        require(msg.value == total, _VALUE_MISMATCH);
    }

    /// @notice The hash of block `blockNumber` (zero outside the last 256 blocks).
    function getBlockHash(uint256 blockNumber) public view returns (bytes32 blockHash) {
        blockHash = blockhash(blockNumber);
    }

    /// @notice The current block number.
    function getBlockNumber() public view returns (uint256 blockNumber) {
        blockNumber = block.number;
    }

    /// @notice The current block's coinbase.
    function getCurrentBlockCoinbase() public view returns (address coinbase) {
        coinbase = block.coinbase;
    }

    /// @notice The current block's difficulty opcode (PREVRANDAO since the merge), under its original name.
    function getCurrentBlockDifficulty() public view returns (uint256 difficulty) {
        difficulty = block.prevrandao;
    }

    /// @notice The current block's gas limit.
    function getCurrentBlockGasLimit() public view returns (uint256 gaslimit) {
        gaslimit = block.gaslimit;
    }

    /// @notice The current block's timestamp.
    function getCurrentBlockTimestamp() public view returns (uint256 timestamp) {
        timestamp = block.timestamp;
    }

    /// @notice The native balance of `addr`, in wei.
    function getEthBalance(address addr) public view returns (uint256 balance) {
        balance = addr.balance;
    }

    /// @notice The hash of the previous block (reverts on block 0, as the original's checked subtraction does).
    function getLastBlockHash() public view returns (bytes32 blockHash) {
        blockHash = blockhash(block.number - 1);
    }

    /// @notice The current block's base fee.
    function getBasefee() public view returns (uint256 basefee) {
        basefee = block.basefee;
    }

    /// @notice The chain id.
    function getChainId() public view returns (uint256 chainid) {
        chainid = block.chainid;
    }
}
