# On a server built with the optional provider/areas patch (dsa.c's
# dsa_pool_hook, which the extension sets), DSA areas in DSM segments are
# dsmpool areas: a parallel hash join's shared table is carved from the pool
# in 32 kB chunks, not from DSA segments of its own, so the join makes only
# a few DSM segments however large its table grows (a stock area makes one
# segment after another as it grows); a parallel VACUUM's shared TidStore
# lives in one too. A preload library that loads a libdsmpool other than
# the server's makes no pool, and says why. Skipped on
# other servers.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use File::Copy;
use DsmpoolTest;

my ($lib, $way) = dsmpool_way();
plan skip_all => 'the server is not built with provider/areas (no dsa_pool_hook)'
  unless dsmpool_areas($way);

my $before = shm_objects();
my $node = dsmpool_node('areas', $lib, "dsmpool.size = '1GB'", "work_mem = '256MB'");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION dsmpool');
my $right = dsmpool_seed($node, 1000000);
sub served
{
	return $node->safe_psql('postgres', 'SELECT segments_served FROM pg_dsmpool');
}

like(
	$node->safe_psql('postgres', "EXPLAIN (COSTS OFF) $DsmpoolTest::JOIN"),
	qr/Parallel Hash Join/,
	'the join is a parallel hash join');
my $s0 = served();
is($node->safe_psql('postgres', $DsmpoolTest::JOIN), $right, 'the parallel hash join of 1M rows is right');
my $made = served() - $s0;
# (a stock area's join here makes 10: one segment after another as its
# table grows)
ok($made <= 4, "it made $made DSM segments: its hash table is in the pool's area, not in segments of its own");

# a parallel VACUUM: its dead items in a shared TidStore (a DSA area)
$node->safe_psql(
	'postgres', q{
CREATE INDEX ON t (a); CREATE INDEX ON t (b);
DELETE FROM t WHERE a % 3 = 0;
VACUUM (PARALLEL 2) t;
});
my $left = 1000000 - int(1000000 / 3);
is( $node->safe_psql(
		'postgres', q{
SET enable_seqscan = off; SET enable_bitmapscan = off;
SELECT count(*) FROM t WHERE a > 0 AND b >= 0;
}),
	$left,
	'a parallel VACUUM (its dead items in a pool area): the index finds every live row');
is($node->safe_psql('postgres', 'SELECT count(*) FROM t'), $left, 'and so does a scan of the table');
ok(!$node->log_contains(qr/dsmpool: no pool/), 'the pool served all along');

# A preload library that loads another libdsmpool than the server's (a
# copy of both elsewhere): two copies in one process would not stay apart
# (the copy's calls of its own functions bind to the server's), so there is
# no pool at all, said as a WARNING
my $dir = PostgreSQL::Test::Utils::tempdir;
my ($libdir) = $lib =~ m{^(.*)/[^/]+$};
for my $f ('libdsmpool-preload.so', 'libdsmpool.so.0')
{
	copy("$libdir/$f", "$dir/$f") or die "copy $f: $!";
}
$node->append_conf('postgresql.conf', "dsmpool.library = '$dir/libdsmpool-preload.so'");
my $log_at = -s $node->logfile;
$node->restart;
ok( $node->log_contains(
		qr/WARNING:  dsmpool: no pool: the server is linked with .*, and the preload library loads \Q$dir\E/,
		$log_at),
	'a preload library with a libdsmpool of its own: no pool, and a WARNING that says why');
is($node->safe_psql('postgres', 'SELECT serving FROM pg_dsmpool'), 'f', 'the view says it does not serve');
my ($n, $sum) = (0, 0);
for my $g (1 .. 1000000) { next unless $g % 3; $n++; $sum += $g % 1000; }
is($node->safe_psql('postgres', $DsmpoolTest::JOIN), "$n|$sum", 'and the join is right');

$node->stop;
is(shm_new($before), '', 'after the stop: nothing left in /dev/shm');
done_testing();
