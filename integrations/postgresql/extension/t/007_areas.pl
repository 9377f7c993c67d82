# On a server built with the optional provider/areas patch (dsa.c's
# dsa_pool_hook, which the extension sets), DSA areas in DSM segments are
# dsmpool areas: a parallel hash join's shared table is carved from the pool
# in 32 kB chunks, not from DSA segments of its own, so the join makes only
# a few DSM segments however large its table grows (a stock area makes one
# segment after another as it grows); a parallel VACUUM's shared TidStore
# lives in one too. A preload library that loads a libdsmpool other than
# the server's leaves the areas PostgreSQL's own, and says so. Skipped on
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
is( $node->safe_psql('postgres', 'SELECT count(*) FROM t'),
	1000000 - int(1000000 / 3),
	'a parallel VACUUM (its TidStore in a pool area) left the table right');

# A preload library that loads another libdsmpool than the server's (a
# copy of both elsewhere): one process must not hand one copy's pool to the
# other's functions, so the areas stay PostgreSQL's own, said in the log
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
		qr/DSA areas stay PostgreSQL's own: the server is linked with .*, and the preload library loads \Q$dir\E/,
		$log_at),
	'a preload library with a libdsmpool of its own: the log says the areas stay PostgreSQL\'s own');
my ($n, $sum) = (0, 0);
for my $g (1 .. 1000000) { next unless $g % 3; $n++; $sum += $g % 1000; }
$s0 = served();
is($node->safe_psql('postgres', $DsmpoolTest::JOIN), "$n|$sum", 'and the join is right');
$made = served() - $s0;
ok($made > 4, "its table in stock areas: $made DSM segments");

$node->stop;
is(shm_new($before), '', 'after the stop: nothing left in /dev/shm');
done_testing();
