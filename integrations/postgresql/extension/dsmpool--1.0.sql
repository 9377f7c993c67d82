/* dsmpool--1.0.sql: the operator's view of the dsmpool pool */

\echo Use "CREATE EXTENSION dsmpool" to load this file. \quit

CREATE FUNCTION pg_dsmpool_stats(
    OUT serving boolean,          -- the pool serves this generation's segments
    OUT generation bigint,        -- pools made since the postmaster started (one per start and crash restart)
    OUT size bigint,              -- the pool's size: dsmpool.size, in bytes
    OUT page_size bigint,         -- 4096, or the huge page's size
    OUT resident bigint,          -- bytes of the pool resident now
    OUT released bigint,          -- bytes given back to the system (all free)
    OUT free bigint,              -- bytes free (released ones included)
    OUT segments_served bigint,   -- DSM segments the pool served in this generation
    OUT segments_refused bigint,  -- ... that it could not: PostgreSQL made them in /dev/shm
    OUT note text)                -- absent, inert, no pool, or what the pool's creation noted
RETURNS record
AS 'MODULE_PATHNAME', 'pg_dsmpool_stats'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE VIEW pg_dsmpool AS SELECT * FROM pg_dsmpool_stats();

-- as pg_shmem_allocations: for pg_read_all_stats (and superusers) only
REVOKE ALL ON FUNCTION pg_dsmpool_stats() FROM PUBLIC;
REVOKE ALL ON pg_dsmpool FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pg_dsmpool_stats() TO pg_read_all_stats;
GRANT SELECT ON pg_dsmpool TO pg_read_all_stats;
