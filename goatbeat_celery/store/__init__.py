"""Schedule stores: PostgreSQL (production), SQLite (one host, the default), memory (tests)."""
