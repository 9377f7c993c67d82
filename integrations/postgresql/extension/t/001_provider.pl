# The extension dsmpool serving dynamic shared memory, either way in:
#   api      (default) a server with the DSM provider API
#            (integrations/postgresql/provider): the pool serves through
#            RegisterDsmProvider, the library loaded by dsmpool.library,
#            no LD_PRELOAD;
#   preload  (DSMPOOL_WAY=preload) a stock server: the preload library by
#            LD_PRELOAD in the server's environment, its interposed calls.
# Either way each crash restart discards the pool's generation for the
# next, a small pool's refusals are PostgreSQL's own segments, and without
# the library the log and the view say what to do.
#
# Run with PGXS against the server, the preload library named by
# DSMPOOL_PRELOAD_LIB (a path):
#   make PG_CONFIG=.../bin/pg_config installcheck TAP_TESTS=1 \
#        DSMPOOL_PRELOAD_LIB=/path/to/libdsmpool-preload.so [DSMPOOL_WAY=preload]
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DsmpoolTest;

my ($lib, $way, $through) = dsmpool_way();
my $node = dsmpool_node('provider', $lib);
$node->start;

# A parallel hash join (dsmpool_node's settings) whose shared hash table is
# in DSM (DSA) segments.
my $join = $DsmpoolTest::JOIN;
sub stats
{
	return $node->safe_psql('postgres',
		'SELECT serving, generation, segments_served, segments_refused FROM pg_dsmpool');
}

# The line is the maintainer's (a background worker), when it starts.
ok( $node->wait_for_log(
		qr/dsmpool: generation 1: a pool of 2048 MB .* through \Q$through\E/),
	"the maintainer says generation 1 serves through $through");
$node->safe_psql('postgres', 'CREATE EXTENSION dsmpool');
my $right = dsmpool_seed($node, 300000);
like(
	$node->safe_psql('postgres', "EXPLAIN (COSTS OFF) $join"),
	qr/Parallel Hash Join/,
	'the join is a parallel hash join');
is($node->safe_psql('postgres', $join), $right, 'the join is right');
like(stats(), qr/^t\|1\|[1-9][0-9]*\|0$/,
	'generation 1 served the join\'s segments, refusing none');
# Crash restart: a killed server process ends the generation, and the next
# generation has a pool of its own.
my $victim = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'");
my $log_at = -s $node->logfile;
kill 'KILL', $victim;
ok( $node->wait_for_log(qr/all server processes terminated; reinitializing/, $log_at),
	'the killed walwriter makes the server reinitialize');
ok($node->wait_for_log(qr/dsmpool: generation 2: a pool of/, $log_at),
	'and the log says generation 2 has a pool');
wait_accepting($node) or die 'the server did not come back';
is($node->safe_psql('postgres', $join), $right, 'the join is right after the crash restart');
like(stats(), qr/^t\|2\|[1-9][0-9]*\|0$/, 'generation 2 served the join');

# A small pool: what it cannot serve PostgreSQL makes itself, the refusals
# are counted, and the first alone is logged; the maintainer gives back
# what the join made resident once the pool is idle.
$node->append_conf('postgresql.conf', "dsmpool.size = '8MB'\ndsmpool.idle_release = '1s'");
$node->restart;
$log_at = 0;
is($node->safe_psql('postgres', $join), $right, 'the join is right in an 8 MB pool');
is($node->safe_psql('postgres', $join), $right, 'and again');
my $refusals = () =
  slurp_file($node->logfile) =~ /could not serve a dynamic shared memory segment/g;
if (!dsmpool_areas($way))
{
	like(stats(), qr/^t\|1\|[1-9][0-9]*\|[1-9][0-9]*$/,
		'the 8 MB pool served some segments and refused others');
	is($refusals, 1, 'the log has the first refusal alone');
}
else
{
	# provider/areas: the join's table is in a pool area, which takes OS
	# memory for what the pool cannot hold; its few segments fit
	like(stats(), qr/^t\|1\|[1-9][0-9]*\|0$/,
		'the 8 MB pool served the segments (the table in a pool area), refusing none');
	is($refusals, 0, 'and the log has no refusal');
}
ok( $node->poll_query_until(
		'postgres', 'SELECT resident <= 2 * 1024 * 1024 FROM pg_dsmpool'),
	'what the joins made resident goes back');

# A library that is not there (a dsmpool.library that names no file; a
# server started without LD_PRELOAD): a WARNING that says what to do, the
# view says absent, and PostgreSQL makes every segment.
$node->append_conf('postgresql.conf',
	"dsmpool.size = '2GB'\ndsmpool.idle_release = 0\ndsmpool.library = '/nonexistent/libdsmpool-preload.so'");
delete $ENV{LD_PRELOAD};
$log_at = -s $node->logfile;
$node->restart;
my ($warning, $hint) =
  $way eq 'api'
  ? (qr/dsmpool.library "\/nonexistent\/libdsmpool-preload.so" could not be loaded/,
	qr/This server has the DSM provider API: set dsmpool.library/)
  : (qr/the preload library libdsmpool-preload.so is not loaded/,
	qr/Start the server with LD_PRELOAD naming libdsmpool-preload.so/);
ok($node->log_contains(qr/WARNING:  dsmpool: no pool: $warning/, $log_at),
	'a missing library is a WARNING naming it');
ok($node->log_contains(qr/HINT:  $hint/, $log_at),
	'with a hint that says what to do');
like($node->safe_psql('postgres', 'SELECT note FROM pg_dsmpool'),
	qr/^absent: /, 'the view says absent');
is($node->safe_psql('postgres', $join), $right, 'the join is right without a pool');

$node->stop;
done_testing();
