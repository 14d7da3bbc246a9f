/**
 * The ledger's schema, written once for both backends: each migration is a list of statements in
 * the SQL both SQLite and PostgreSQL speak, with the few words that differ filled in per dialect.
 * Migrations only ever append: never edit one that has shipped.
 */

/** The words that differ between the two SQL dialects. */
export interface SchemaDialect {
  /** An auto-increment primary key column type. */
  serial: string;
  /** A table whose rows need not survive a crash (PostgreSQL: UNLOGGED, faster). */
  scratchTable: string;
}

export const SQLITE_SCHEMA: SchemaDialect = { serial: "INTEGER PRIMARY KEY AUTOINCREMENT", scratchTable: "TABLE" };
export const POSTGRES_SCHEMA: SchemaDialect = { serial: "BIGSERIAL PRIMARY KEY", scratchTable: "UNLOGGED TABLE" };

/** One migration: a name (its order is the list's) and its statements. */
export interface Migration {
  name: string;
  statements(dialect: SchemaDialect): string[];
}

// Addresses, hashes and nonces are stored lower-case; token amounts (uint256) as decimal text;
// times as milliseconds since the epoch (BIGINT), block timestamps and penalty ends as Unix seconds (chain time).
export const MIGRATIONS: readonly Migration[] = [
  {
    name: "0001_ledger",
    statements: (d) => [
      `CREATE TABLE settlements (
        id ${d.serial},
        chain_id INTEGER NOT NULL,
        token TEXT NOT NULL,
        authorizer TEXT NOT NULL,
        nonce TEXT NOT NULL,
        network TEXT NOT NULL,
        payee TEXT NOT NULL,
        value TEXT NOT NULL,
        valid_before TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('claimed', 'sent', 'settled', 'failed')),
        owner TEXT,
        owner_expires_at BIGINT,
        deadline_at BIGINT,
        call_to TEXT,
        call_data TEXT,
        call_gas TEXT,
        tx_hash TEXT,
        relayer TEXT,
        relayer_nonce BIGINT,
        block_number BIGINT,
        block_timestamp BIGINT,
        error TEXT,
        attempts INTEGER NOT NULL DEFAULT 1,
        next_check_at BIGINT,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        UNIQUE (chain_id, token, authorizer, nonce)
      )`,
      `CREATE INDEX settlements_due ON settlements (next_check_at) WHERE status IN ('claimed', 'sent')`,
      `CREATE INDEX settlements_payer_in_flight ON settlements (chain_id, token, authorizer) WHERE status IN ('claimed', 'sent')`,
      `CREATE INDEX settlements_queued ON settlements (created_at) WHERE status = 'claimed' AND owner IS NULL`,
      `CREATE INDEX settlements_by_authorization ON settlements (chain_id, authorizer, nonce)`,
      `CREATE INDEX settlements_tx_hash ON settlements (tx_hash)`,
      `CREATE TABLE settlement_transactions (
        id ${d.serial},
        hash TEXT NOT NULL UNIQUE,
        settlement_id BIGINT NOT NULL REFERENCES settlements (id),
        chain_id INTEGER NOT NULL,
        relayer TEXT NOT NULL,
        relayer_nonce BIGINT NOT NULL,
        raw TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('signed', 'accepted', 'refused', 'mined', 'reverted', 'dropped')),
        fee_cap TEXT,
        priority_fee TEXT,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
      )`,
      `CREATE INDEX settlement_transactions_settlement ON settlement_transactions (settlement_id)`,
      `CREATE INDEX settlement_transactions_relayer_nonce ON settlement_transactions (chain_id, relayer, relayer_nonce)`,
      `CREATE TABLE relayer_leases (
        address TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        epoch BIGINT NOT NULL,
        acquired_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL
      )`,
      `CREATE TABLE ledger_instances (
        id TEXT PRIMARY KEY,
        info TEXT NOT NULL,
        started_at BIGINT NOT NULL,
        heartbeat_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL
      )`,
      `CREATE TABLE revert_penalties (
        chain_id INTEGER NOT NULL,
        token TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('payer', 'code')),
        subject TEXT NOT NULL,
        until_at BIGINT NOT NULL,
        tx_hash TEXT,
        created_at BIGINT NOT NULL,
        PRIMARY KEY (chain_id, token, kind, subject)
      )`,
      `CREATE ${d.scratchTable} rate_limit_counters (
        key TEXT PRIMARY KEY,
        hits INTEGER NOT NULL,
        reset_at BIGINT NOT NULL
      )`,
    ],
  },
];
