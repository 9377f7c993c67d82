# The extension dsmpool on a server with the DSM provider API built with
# EXEC_BACKEND, whose children are exec'd and inherit no memory of the
# postmaster's: no pool is made and no provider registered, the log says
# so once, the view says why, and every segment is PostgreSQL's own.
#
# Run as t/001_provider.pl is (its README); skipped on other servers.
use strict;
use warnings FATAL => 'all';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $lib = $ENV{DSMPOOL_PRELOAD_LIB};
plan skip_all => 'DSMPOOL_PRELOAD_LIB names no file' unless defined $lib && -f $lib;
my ($cppflags) = run_command([ 'pg_config', '--cppflags' ]);
plan skip_all => 'the server is not built with EXEC_BACKEND'
  unless $cppflags =~ /-DEXEC_BACKEND\b/;

my $node = PostgreSQL::Test::Cluster->new('exec_backend');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'dsmpool'
dsmpool.library = '$lib'
max_parallel_workers_per_gather = 2
parallel_setup_cost = 0
parallel_tuple_cost = 0
min_parallel_table_scan_size = 0
});
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION dsmpool;
CREATE TABLE t AS SELECT g AS a, g % 1000 AS b FROM generate_series(1, 300000) g;
CREATE TABLE u AS SELECT g AS a FROM generate_series(1, 300000) g;
ANALYZE t; ANALYZE u;
});
is( $node->safe_psql('postgres', 'SELECT count(*), sum(t.b) FROM t JOIN u USING (a)'),
	'300000|149850000',
	'a parallel hash join is right');
my $lines = () = slurp_file($node->logfile) =~
  /LOG:  dsmpool: no pool: this server is built with EXEC_BACKEND/g;
is($lines, 1, 'the log says once that there is no pool, and why');
is( $node->safe_psql('postgres', 'SELECT serving, note FROM pg_dsmpool'),
	"f|no pool: this server is built with EXEC_BACKEND, whose children inherit no memory of the postmaster's",
	'the view says why');
unlike(slurp_file($node->logfile), qr/dsmpool: generation/,
	'no generation began: no maintainer ran');

$node->stop;
done_testing();
