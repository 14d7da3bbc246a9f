import type { Address, Hex } from "viem";
import type { BoundPayment, IdentifierStore, TokenScope } from "../types.js";
import { lower } from "./columns.js";
import { SqlStore } from "./driver.js";

/** The binding's columns of a `payment_identifiers` row (migrations 0003, 0004: no digest before 0004). */
interface BindingRow {
  nonce: Hex;
  digest: Hex | null;
}

function toBoundPayment(row: BindingRow): BoundPayment {
  return { nonce: row.nonce, ...(row.digest != null ? { digest: row.digest } : {}) };
}

/** Payment identifiers over SQL. */
export class SqlIdentifierStore extends SqlStore implements IdentifierStore {
  async bindPaymentIdentifier(scope: TokenScope, payer: Address, id: string, payment: BoundPayment): Promise<BoundPayment> {
    const [row] = await this.db.all<BindingRow>(
      `INSERT INTO payment_identifiers (chain_id, token, payer, id, nonce, digest, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (chain_id, token, payer, id) DO UPDATE SET nonce = payment_identifiers.nonce
       RETURNING nonce, digest`,
      [scope.chainId, lower(scope.token), lower(payer), id, lower(payment.nonce), payment.digest ? lower(payment.digest) : null, this.now()],
    );
    return toBoundPayment(row!);
  }

  async paymentIdentifierBinding(scope: TokenScope, payer: Address, id: string): Promise<BoundPayment | undefined> {
    const [row] = await this.db.all<BindingRow>(`SELECT nonce, digest FROM payment_identifiers WHERE chain_id = ? AND token = ? AND payer = ? AND id = ?`, [
      scope.chainId,
      lower(scope.token),
      lower(payer),
      id,
    ]);
    return row ? toBoundPayment(row) : undefined;
  }
}
