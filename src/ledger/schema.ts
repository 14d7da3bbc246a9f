/**
 * The ledger's schema, written once for both backends: each migration is a list of statements in
 * the SQL both SQLite and PostgreSQL speak, with the few words that differ filled in per dialect.
 * Migrations only ever append: never edit one that has shipped.
 */

/** The words that differ between the two SQL dialects. */
export interface SchemaDialect {
  /** Which database: for the rare statement that cannot be written in words both speak (a changed CHECK). */
  backend: "sqlite" | "postgres";
  /** An auto-increment primary key column type. */
  serial: string;
  /** A table whose rows need not survive a crash (PostgreSQL: UNLOGGED, faster). */
  scratchTable: string;
}

export const SQLITE_SCHEMA: SchemaDialect = { backend: "sqlite", serial: "INTEGER PRIMARY KEY AUTOINCREMENT", scratchTable: "TABLE" };
export const POSTGRES_SCHEMA: SchemaDialect = { backend: "postgres", serial: "BIGSERIAL PRIMARY KEY", scratchTable: "UNLOGGED TABLE" };

/** One migration: a name (its order is the list's) and its statements. */
export interface Migration {
  name: string;
  statements(dialect: SchemaDialect): string[];
}

/**
 * A table indexing the discovery catalog's entries by its leading column (a word, a network): one row per key of
 * an entry, carrying the entry's order in the columns after it, whose primary key is the index (clustered on
 * SQLite); the rows go with their entry.
 */
function entryIndexTable(d: SchemaDialect, name: string, columns: readonly string[]): string {
  return `CREATE TABLE ${name} (
        ${columns.map((column) => `${column} NOT NULL,`).join("\n        ")}
        entry_id BIGINT NOT NULL REFERENCES discovery_entries (id) ON DELETE CASCADE,
        PRIMARY KEY (${[...columns.map((column) => column.split(" ")[0]), "entry_id"].join(", ")})
      )${d.backend === "sqlite" ? " WITHOUT ROWID" : ""}`;
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
  {
    // A transaction superseded by another version at its nonce (a replacement with higher fees) that was
    // mined: `replaced`, told apart from `dropped` (gone from the node). PostgreSQL changes the CHECK in
    // place; SQLite cannot alter a CHECK, so the table is rebuilt (ids kept, AUTOINCREMENT follows them).
    name: "0002_replaced_transactions",
    statements: (d) => {
      const states = `'signed', 'accepted', 'refused', 'mined', 'reverted', 'dropped', 'replaced'`;
      if (d.backend === "postgres") {
        return [
          `ALTER TABLE settlement_transactions DROP CONSTRAINT IF EXISTS settlement_transactions_state_check`,
          `ALTER TABLE settlement_transactions ADD CONSTRAINT settlement_transactions_state_check CHECK (state IN (${states}))`,
        ];
      }
      return [
        `CREATE TABLE settlement_transactions_0002 (
          id ${d.serial},
          hash TEXT NOT NULL UNIQUE,
          settlement_id BIGINT NOT NULL REFERENCES settlements (id),
          chain_id INTEGER NOT NULL,
          relayer TEXT NOT NULL,
          relayer_nonce BIGINT NOT NULL,
          raw TEXT NOT NULL,
          state TEXT NOT NULL CHECK (state IN (${states})),
          fee_cap TEXT,
          priority_fee TEXT,
          created_at BIGINT NOT NULL,
          updated_at BIGINT NOT NULL
        )`,
        `INSERT INTO settlement_transactions_0002 SELECT id, hash, settlement_id, chain_id, relayer, relayer_nonce, raw, state, fee_cap,
           priority_fee, created_at, updated_at FROM settlement_transactions`,
        `DROP TABLE settlement_transactions`,
        `ALTER TABLE settlement_transactions_0002 RENAME TO settlement_transactions`,
        `CREATE INDEX settlement_transactions_settlement ON settlement_transactions (settlement_id)`,
        `CREATE INDEX settlement_transactions_relayer_nonce ON settlement_transactions (chain_id, relayer, relayer_nonce)`,
      ];
    },
  },
  {
    // The x402 `payment-identifier` extension: a payer's identifier is bound to the first authorization it
    // came with (ids are case-sensitive, stored as sent), so a repeat gets that payment's answer and
    // another payment under the same id is refused, whichever instance it reaches.
    name: "0003_payment_identifiers",
    statements: () => [
      `CREATE TABLE payment_identifiers (
        chain_id INTEGER NOT NULL,
        token TEXT NOT NULL,
        payer TEXT NOT NULL,
        id TEXT NOT NULL,
        nonce TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        PRIMARY KEY (chain_id, token, payer, id)
      )`,
    ],
  },
  {
    // The discovery catalog (x402 `bazaar`): the paid resources this facilitator has seen, one row per
    // resource URL (its canonical form) and method (GET, POST, …; mcp:<toolName> for a tool), updated on each payment.
    // And a payment identifier's binding keeps the whole authorization it came with (its EIP-712 digest),
    // not only its nonce: another payment re-signed under the same nonce is not the same payment.
    name: "0004_discovery_resources",
    statements: () => [
      `ALTER TABLE payment_identifiers ADD COLUMN digest TEXT`,
      `CREATE TABLE discovery_resources (
        resource TEXT NOT NULL,
        method TEXT NOT NULL,
        type TEXT NOT NULL,
        entry TEXT NOT NULL,
        last_updated BIGINT NOT NULL,
        PRIMARY KEY (resource, method)
      )`,
      `CREATE INDEX discovery_resources_updated ON discovery_resources (last_updated)`,
    ],
  },
  {
    // The token state index's used and canceled authorization nonces, and how far their backfill reaches per token:
    // shared by every instance and kept across restarts, so the logs since the token's deployment are read once.
    name: "0005_nonce_index",
    statements: () => [
      `CREATE TABLE indexed_nonces (
        chain_id INTEGER NOT NULL,
        token TEXT NOT NULL,
        authorizer TEXT NOT NULL,
        nonce TEXT NOT NULL,
        block_number BIGINT NOT NULL,
        PRIMARY KEY (chain_id, token, authorizer, nonce)
      )`,
      `CREATE TABLE nonce_index_progress (
        chain_id INTEGER NOT NULL,
        token TEXT NOT NULL,
        from_block BIGINT NOT NULL,
        through_block BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        PRIMARY KEY (chain_id, token)
      )`,
    ],
  },
  {
    // The discovery catalog, owned by its sellers: one entry per resource URL, method AND payTo, written only
    // from settled payments (the old table's entries may have been created by verifies or re-pointed by a
    // settle to another payTo, so they are not carried over: each seller is listed again by its next
    // payment). Its distinct payers (counted up to a cap), its words for search (a word table whose B-tree
    // hands back the best entries of a word first: search reads a bounded number of rows, however large the
    // catalog), its networks (listed by network in order from an index), and the entry counts listings
    // answer with and the bounds keep, per type and network (`*`: every network). And finished settlements
    // by age, for retention.
    name: "0007_owned_catalog",
    statements: (d) => [
      `DROP TABLE discovery_resources`,
      `CREATE TABLE discovery_entries (
        id ${d.serial},
        resource TEXT NOT NULL,
        method TEXT NOT NULL,
        pay_to TEXT NOT NULL,
        type TEXT NOT NULL,
        schemes TEXT NOT NULL,
        payers INTEGER NOT NULL,
        first_paid BIGINT NOT NULL,
        last_paid BIGINT NOT NULL,
        entry TEXT NOT NULL,
        UNIQUE (resource, method, pay_to)
      )`,
      `CREATE INDEX discovery_entries_recent ON discovery_entries (last_paid, id)`,
      `CREATE INDEX discovery_entries_typed ON discovery_entries (type, last_paid, id)`,
      `CREATE INDEX discovery_entries_seller ON discovery_entries (pay_to, last_paid, id, payers)`,
      `CREATE INDEX discovery_entries_standing ON discovery_entries (payers, last_paid, id)`,
      `CREATE TABLE discovery_payers (
        entry_id BIGINT NOT NULL REFERENCES discovery_entries (id) ON DELETE CASCADE,
        payer TEXT NOT NULL,
        PRIMARY KEY (entry_id, payer)
      )${d.backend === "sqlite" ? " WITHOUT ROWID" : ""}`,
      entryIndexTable(d, "discovery_words", ["word TEXT", "payers INTEGER", "last_paid BIGINT"]),
      `CREATE INDEX discovery_words_entry ON discovery_words (entry_id, word)`,
      entryIndexTable(d, "discovery_networks", ["network TEXT", "type TEXT", "last_paid BIGINT"]),
      `CREATE INDEX discovery_networks_recent ON discovery_networks (network, last_paid, entry_id)`,
      `CREATE INDEX discovery_networks_entry ON discovery_networks (entry_id)`,
      `CREATE TABLE discovery_counts (
        type TEXT NOT NULL,
        network TEXT NOT NULL,
        entries BIGINT NOT NULL,
        PRIMARY KEY (type, network)
      )`,
      `CREATE INDEX settlements_finished ON settlements (updated_at, id) WHERE status IN ('settled', 'failed')`,
    ],
  },
  {
    // Gap fillers (zero-value self-transfers taking a relayer nonce that no settlement's transaction can
    // use) are written ahead like settlements' transactions, under the key's lease and its generation:
    // the key's next holder follows them.
    name: "0010_relayer_fillers",
    statements: () => [
      `CREATE TABLE relayer_fillers (
        hash TEXT PRIMARY KEY,
        chain_id INTEGER NOT NULL,
        relayer TEXT NOT NULL,
        relayer_nonce BIGINT NOT NULL,
        raw TEXT NOT NULL,
        holder TEXT NOT NULL,
        lease_epoch BIGINT NOT NULL,
        replaces TEXT,
        state TEXT NOT NULL CHECK (state IN ('signed', 'refused')),
        fee_cap TEXT,
        priority_fee TEXT,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
      )`,
      `CREATE INDEX relayer_fillers_key_nonce ON relayer_fillers (chain_id, relayer, relayer_nonce)`,
      `CREATE INDEX relayer_fillers_created ON relayer_fillers (created_at)`,
    ],
  },
  {
    // What the ledger knows is bound to the chain it learned it on: each chain's genesis hash and a trail of its
    // blocks (the index's stored progress, start-ups), so that another history under the same chain id (a local
    // chain restarted, a snapshot reverted) is told apart; and where the rows of the other history are set aside
    // (kept, never served). Indexes for what a changed history looks up: nonces and settlements by block.
    name: "0011_chain_identity",
    statements: (d) => [
      `CREATE TABLE chain_histories (
        chain_id INTEGER PRIMARY KEY,
        genesis_hash TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        updated_at BIGINT NOT NULL
      )`,
      `CREATE TABLE chain_checkpoints (
        chain_id INTEGER NOT NULL,
        block_number BIGINT NOT NULL,
        block_hash TEXT NOT NULL,
        recorded_at BIGINT NOT NULL,
        PRIMARY KEY (chain_id, block_number)
      )`,
      `CREATE TABLE set_aside_rows (
        id ${d.serial},
        chain_id INTEGER NOT NULL,
        genesis_hash TEXT,
        kind TEXT NOT NULL,
        row_data TEXT NOT NULL,
        reason TEXT NOT NULL,
        set_aside_at BIGINT NOT NULL
      )`,
      `CREATE INDEX set_aside_rows_chain ON set_aside_rows (chain_id, id)`,
      `CREATE INDEX indexed_nonces_block ON indexed_nonces (chain_id, token, block_number)`,
      `CREATE INDEX settlements_settled_block ON settlements (chain_id, block_number) WHERE status = 'settled'`,
    ],
  },
  {
    // A failed row records its failure as a code (`error_code`: alreadyUsed, expired, notYetValid,
    // insufficientBalance, invalidSignature, failedOnChain, notSent); the answers' texts are made from it at
    // the HTTP edge. Rows failed by earlier versions get the code of their text; a text of no code (none was
    // ever written by the kit) reads failedOnChain and stays in `error` for operators, where the known texts
    // are cleared. The texts are written out: this migration must map what earlier versions wrote, whatever
    // the texts become.
    name: "0012_error_codes",
    statements: () => {
      const codeOfText: ReadonlyArray<readonly [string, string]> = [
        ["Authorization already used", "alreadyUsed"],
        ["Authorization expired", "expired"],
        ["Authorization not yet valid", "notYetValid"],
        ["ERC20: transfer amount exceeds balance", "insufficientBalance"],
        ["Invalid signature", "invalidSignature"],
        ["Transaction failed on-chain", "failedOnChain"],
        ["Service unavailable: given up before any transaction was sent", "notSent"],
      ];
      const texts = codeOfText.map(([text]) => `'${text}'`).join(", ");
      return [
        `ALTER TABLE settlements ADD COLUMN error_code TEXT`,
        // One pass over the failed rows (each row rewritten once: on PostgreSQL every index gets a new entry).
        `UPDATE settlements SET error_code = CASE error ${codeOfText.map(([text, code]) => `WHEN '${text}' THEN '${code}'`).join(" ")} ELSE 'failedOnChain' END,
           error = CASE WHEN error IN (${texts}) THEN NULL ELSE error END
         WHERE error IS NOT NULL`,
      ];
    },
  },
  {
    // A change of a chain's history is kept whole, so that it can be undone: nothing it sets aside is deleted. Each
    // change records what the history it set aside looked like (its genesis, the trail's blocks after the common one,
    // the settled rows whose disproof was its evidence) and the index's progress then; its rows in `set_aside_rows`
    // name it (`change_id`; rows set aside by earlier versions name none and stay as they are), the index's nonces go
    // to `set_aside_nonces`. A change found wrong (the chain holds that history after all) brings them all back.
    name: "0013_reversible_history",
    statements: (d) => [
      `CREATE TABLE history_changes (
        id ${d.serial},
        chain_id INTEGER NOT NULL,
        genesis_hash TEXT,
        everything INTEGER NOT NULL,
        common_number BIGINT,
        common_hash TEXT,
        trail TEXT NOT NULL,
        disproven TEXT NOT NULL,
        progress TEXT NOT NULL,
        reason TEXT NOT NULL,
        changed_at BIGINT NOT NULL,
        restored_at BIGINT
      )`,
      `CREATE INDEX history_changes_pending ON history_changes (chain_id, id) WHERE restored_at IS NULL`,
      `ALTER TABLE set_aside_rows ADD COLUMN change_id BIGINT`,
      `CREATE INDEX set_aside_rows_change ON set_aside_rows (change_id, kind)`,
      `CREATE TABLE set_aside_nonces (
        change_id BIGINT NOT NULL,
        chain_id INTEGER NOT NULL,
        token TEXT NOT NULL,
        authorizer TEXT NOT NULL,
        nonce TEXT NOT NULL,
        block_number BIGINT NOT NULL,
        PRIMARY KEY (change_id, token, authorizer, nonce)
      )`,
    ],
  },
];
