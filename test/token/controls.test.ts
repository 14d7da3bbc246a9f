import { expect } from "chai";
import { getAddress, maxUint256, zeroAddress } from "viem";
import { expectRevert } from "../helpers/revert.js";
import { BUYER_FUNDS, useTokenChain } from "./fixture.js";

// FiatToken's roles (owner, master minter, pauser, blacklister), minting and plain ERC-20.

describe("BridgedUSDC controls", () => {
  const c = useTokenChain();

  const addr = (wallet: { account: { address: `0x${string}` } }) => getAddress(wallet.account.address);

  describe("minting", () => {
    it("starts with the owner as a minter whose max allowance was reduced by exactly what the fixture minted", async () => {
      expect(await c.contract.read.isMinter([addr(c.owner)])).to.equal(true);
      expect(await c.contract.read.minterAllowance([addr(c.owner)])).to.equal(maxUint256 - 4n * BUYER_FUNDS);
    });

    it("refuses configureMinter from anyone but the master minter with FiatToken: caller is not the masterMinter", async () => {
      for (const caller of [c.stranger, c.payer, c.relayer]) {
        await expectRevert(
          c.contract.write.configureMinter([addr(caller), 1_000_000n], { account: caller.account }),
          "FiatToken: caller is not the masterMinter",
        );
        expect(await c.contract.read.isMinter([addr(caller)])).to.equal(false);
      }
    });

    it("lets the master minter configure a minter: MinterConfigured event, isMinter, minterAllowance", async () => {
      const receipt = await c.receipt(await c.contract.write.configureMinter([addr(c.stranger), 2_000_000n]));
      expect(c.events(receipt)).to.deep.equal([["MinterConfigured", { minter: addr(c.stranger), minterAllowedAmount: 2_000_000n }]]);
      expect(await c.contract.read.isMinter([addr(c.stranger)])).to.equal(true);
      expect(await c.contract.read.minterAllowance([addr(c.stranger)])).to.equal(2_000_000n);
    });

    it("lets a minter mint within its allowance: balance, totalSupply, Mint and Transfer events, allowance reduced", async () => {
      await c.receipt(await c.contract.write.configureMinter([addr(c.stranger), 2_000_000n]));
      const supply = await c.contract.read.totalSupply();
      const receipt = await c.receipt(await c.contract.write.mint([addr(c.payee), 1_500_000n], { account: c.stranger.account }));
      expect(c.events(receipt)).to.deep.equal([
        ["Mint", { minter: addr(c.stranger), to: addr(c.payee), amount: 1_500_000n }],
        ["Transfer", { from: zeroAddress, to: addr(c.payee), value: 1_500_000n }],
      ]);
      expect(await c.balanceOf(addr(c.payee))).to.equal(1_500_000n);
      expect(await c.contract.read.totalSupply()).to.equal(supply + 1_500_000n);
      expect(await c.contract.read.minterAllowance([addr(c.stranger)])).to.equal(500_000n);
    });

    it("refuses a mint from a non-minter with FiatToken: caller is not a minter", async () => {
      await expectRevert(
        c.contract.write.mint([addr(c.stranger), 1n], { account: c.stranger.account }),
        "FiatToken: caller is not a minter",
      );
      expect(await c.balanceOf(addr(c.stranger))).to.equal(0n);
    });

    it("checks the minter role before blacklists, as FiatToken does: a blacklisted non-minter gets FiatToken: caller is not a minter", async () => {
      await c.receipt(await c.contract.write.blacklist([addr(c.stranger)]));
      await expectRevert(
        c.contract.write.mint([addr(c.payee), 1n], { account: c.stranger.account }),
        "FiatToken: caller is not a minter",
      );
    });

    it("refuses a mint by a blacklisted minter or to a blacklisted account with Blacklistable: account is blacklisted", async () => {
      await c.receipt(await c.contract.write.configureMinter([addr(c.stranger), 2_000_000n]));
      await c.receipt(await c.contract.write.blacklist([addr(c.payee)]));
      await expectRevert(
        c.contract.write.mint([addr(c.payee), 1n], { account: c.stranger.account }),
        "Blacklistable: account is blacklisted",
      );
      await c.receipt(await c.contract.write.unBlacklist([addr(c.payee)]));
      await c.receipt(await c.contract.write.blacklist([addr(c.stranger)]));
      await expectRevert(
        c.contract.write.mint([addr(c.payee), 1n], { account: c.stranger.account }),
        "Blacklistable: account is blacklisted",
      );
      expect(await c.balanceOf(addr(c.payee))).to.equal(0n);
    });

    it("refuses a mint above the minter allowance with FiatToken: mint amount exceeds minterAllowance", async () => {
      await c.receipt(await c.contract.write.configureMinter([addr(c.stranger), 2_000_000n]));
      await expectRevert(
        c.contract.write.mint([addr(c.payee), 2_000_001n], { account: c.stranger.account }),
        "FiatToken: mint amount exceeds minterAllowance",
      );
      expect(await c.contract.read.minterAllowance([addr(c.stranger)])).to.equal(2_000_000n);
    });

    it("refuses a zero mint with FiatToken: mint amount not greater than 0 and a mint to 0x0 with FiatToken: mint to the zero address", async () => {
      await expectRevert(c.contract.write.mint([addr(c.payee), 0n]), "FiatToken: mint amount not greater than 0");
      await expectRevert(c.contract.write.mint([zeroAddress, 1n]), "FiatToken: mint to the zero address");
    });
  });

  describe("pausing", () => {
    it("refuses pause and unpause from anyone but the pauser with Pausable: caller is not the pauser", async () => {
      await expectRevert(c.contract.write.pause({ account: c.stranger.account }), "Pausable: caller is not the pauser");
      expect(await c.contract.read.paused()).to.equal(false);
      await c.receipt(await c.contract.write.pause());
      await expectRevert(c.contract.write.unpause({ account: c.stranger.account }), "Pausable: caller is not the pauser");
      expect(await c.contract.read.paused()).to.equal(true);
    });

    it("lets the pauser pause and unpause: Pause and Unpause events, paused()", async () => {
      expect(c.events(await c.receipt(await c.contract.write.pause()))).to.deep.equal([["Pause", undefined]]);
      expect(await c.contract.read.paused()).to.equal(true);
      expect(c.events(await c.receipt(await c.contract.write.unpause()))).to.deep.equal([["Unpause", undefined]]);
      expect(await c.contract.read.paused()).to.equal(false);
    });

    it("while paused, refuses transfer, approve, transferFrom, mint and configureMinter with Pausable: paused", async () => {
      await c.receipt(await c.contract.write.approve([addr(c.relayer), 10n], { account: c.payer.account }));
      await c.receipt(await c.contract.write.pause());
      await expectRevert(c.contract.write.transfer([addr(c.payee), 1n], { account: c.payer.account }), "Pausable: paused");
      await expectRevert(c.contract.write.approve([addr(c.payee), 1n], { account: c.payer.account }), "Pausable: paused");
      await expectRevert(
        c.contract.write.transferFrom([addr(c.payer), addr(c.payee), 1n], { account: c.relayer.account }),
        "Pausable: paused",
      );
      await expectRevert(c.contract.write.mint([addr(c.payee), 1n]), "Pausable: paused");
      await expectRevert(c.contract.write.configureMinter([addr(c.stranger), 1n]), "Pausable: paused");
      expect(await c.balanceOf(addr(c.payee))).to.equal(0n);
    });
  });

  describe("blacklisting", () => {
    it("refuses blacklist and unBlacklist from anyone but the blacklister with Blacklistable: caller is not the blacklister", async () => {
      await expectRevert(
        c.contract.write.blacklist([addr(c.payer)], { account: c.stranger.account }),
        "Blacklistable: caller is not the blacklister",
      );
      expect(await c.contract.read.isBlacklisted([addr(c.payer)])).to.equal(false);
      await c.receipt(await c.contract.write.blacklist([addr(c.payer)]));
      await expectRevert(
        c.contract.write.unBlacklist([addr(c.payer)], { account: c.stranger.account }),
        "Blacklistable: caller is not the blacklister",
      );
      expect(await c.contract.read.isBlacklisted([addr(c.payer)])).to.equal(true);
    });

    it("lets the blacklister blacklist and unblacklist: Blacklisted and UnBlacklisted events, isBlacklisted", async () => {
      expect(c.events(await c.receipt(await c.contract.write.blacklist([addr(c.payer)])))).to.deep.equal([
        ["Blacklisted", { account: addr(c.payer) }],
      ]);
      expect(await c.contract.read.isBlacklisted([addr(c.payer)])).to.equal(true);
      expect(c.events(await c.receipt(await c.contract.write.unBlacklist([addr(c.payer)])))).to.deep.equal([
        ["UnBlacklisted", { account: addr(c.payer) }],
      ]);
      expect(await c.contract.read.isBlacklisted([addr(c.payer)])).to.equal(false);
    });

    it("stops a blacklisted account sending, receiving and approving with Blacklistable: account is blacklisted", async () => {
      await c.receipt(await c.contract.write.blacklist([addr(c.payer)]));
      await expectRevert(
        c.contract.write.transfer([addr(c.payee), 1n], { account: c.payer.account }),
        "Blacklistable: account is blacklisted",
      );
      await expectRevert(
        c.contract.write.transfer([addr(c.payer), 1n], { account: c.secondBuyer.account }),
        "Blacklistable: account is blacklisted",
      );
      await expectRevert(
        c.contract.write.approve([addr(c.relayer), 1n], { account: c.payer.account }),
        "Blacklistable: account is blacklisted",
      );
      expect(await c.balanceOf(addr(c.payer))).to.equal(BUYER_FUNDS);
    });
  });

  describe("ownership and initialization", () => {
    it("refuses a second initialize, from the owner or anyone, with FiatToken: contract is already initialized", async () => {
      for (const caller of [c.owner, c.stranger]) {
        await expectRevert(
          c.contract.write.initialize(["Other", "OTH", "9", 18, addr(caller)], { account: caller.account }),
          "FiatToken: contract is already initialized",
        );
      }
      expect(await c.contract.read.name()).to.equal("Bridged USDC (Stargate)");
      expect(await c.contract.read.decimals()).to.equal(6);
      expect(await c.contract.read.owner()).to.equal(addr(c.owner));
    });

    it("refuses transferOwnership from anyone but the owner with Ownable: caller is not the owner", async () => {
      await expectRevert(
        c.contract.write.transferOwnership([addr(c.stranger)], { account: c.stranger.account }),
        "Ownable: caller is not the owner",
      );
      expect(await c.contract.read.owner()).to.equal(addr(c.owner));
    });
  });

  describe("ERC-20", () => {
    it("transfer moves exactly the value and emits Transfer", async () => {
      const receipt = await c.receipt(await c.contract.write.transfer([addr(c.payee), 7n], { account: c.payer.account }));
      expect(c.events(receipt)).to.deep.equal([["Transfer", { from: addr(c.payer), to: addr(c.payee), value: 7n }]]);
      expect(await c.balanceOf(addr(c.payer))).to.equal(BUYER_FUNDS - 7n);
      expect(await c.balanceOf(addr(c.payee))).to.equal(7n);
    });

    it("refuses a transfer above the balance with ERC20: transfer amount exceeds balance", async () => {
      await expectRevert(
        c.contract.write.transfer([addr(c.payee), BUYER_FUNDS + 1n], { account: c.payer.account }),
        "ERC20: transfer amount exceeds balance",
      );
    });

    it("transferFrom spends the allowance, and refuses more with ERC20: transfer amount exceeds allowance", async () => {
      const approval = await c.receipt(await c.contract.write.approve([addr(c.relayer), 10n], { account: c.payer.account }));
      expect(c.events(approval)).to.deep.equal([["Approval", { owner: addr(c.payer), spender: addr(c.relayer), value: 10n }]]);
      await c.receipt(await c.contract.write.transferFrom([addr(c.payer), addr(c.payee), 6n], { account: c.relayer.account }));
      expect(await c.contract.read.allowance([addr(c.payer), addr(c.relayer)])).to.equal(4n);
      await expectRevert(
        c.contract.write.transferFrom([addr(c.payer), addr(c.payee), 5n], { account: c.relayer.account }),
        "ERC20: transfer amount exceeds allowance",
      );
      expect(await c.balanceOf(addr(c.payee))).to.equal(6n);
    });
  });
});
