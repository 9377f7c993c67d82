# The elastic pool and its maintainer (what patch 0004 did in core): a 256 MB
# reservation of which dsmpool.resident_min = 16 MB is resident at the start;
# a hash join makes what it takes resident, and the maintainer (a background
# worker, a child of the postmaster) gives it back once it has stayed free
# dsmpool.idle_release; the join after is right again, no maintenance step
# failed, and nothing is left in /dev/shm.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DsmpoolTest;

my ($lib, $way) = dsmpool_way();
my $before = shm_objects();
my $node = dsmpool_node(
	'elastic', $lib,
	"dsmpool.size = '256MB'",
	'dsmpool.huge_pages = off',
	"dsmpool.resident_min = '16MB'",
	"dsmpool.idle_release = '500ms'");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION dsmpool');
my $mb = 1024 * 1024;
sub resident { return $node->safe_psql('postgres', 'SELECT resident FROM pg_dsmpool') }

my $pm = postmaster_pid($node);
my @maintainer = grep { cmdline_of($_) =~ /dsmpool maintainer/ } children_of($pm);
is(scalar @maintainer, 1, 'one dsmpool maintainer runs, a child of the postmaster');

# (the server's own start may take a block beyond dsmpool.resident_min)
my $r0 = resident();
ok($r0 <= 32 * $mb, sprintf('%.0f MB of the 256 MB pool resident at the start', $r0 / $mb));

my $right = dsmpool_seed($node, 1000000);
is($node->safe_psql('postgres', $DsmpoolTest::JOIN), $right, 'the hash join of 1M rows is right');
my $r1 = resident();
ok($r1 >= $r0 + 16 * $mb,
	sprintf('it made %.0f MB resident (of the reservation beyond resident_min)', ($r1 - $r0) / $mb));

ok($node->poll_query_until('postgres', "SELECT resident <= 32 * 1024 * 1024 FROM pg_dsmpool"),
	'the maintainer gives it back once it has stayed free 500 ms');
my $r2 = resident();
ok($r2 + 16 * $mb <= $r1, sprintf('%.0f MB resident after, %.0f MB during the join', $r2 / $mb, $r1 / $mb));
is($node->safe_psql('postgres', $DsmpoolTest::JOIN), $right, 'the join after the release is right');

$node->stop;
ok(!$node->log_contains(qr/dsmpool: the pool's maintenance failed/), 'no maintenance step failed');
is(shm_new($before), '', 'after the stop: nothing left in /dev/shm');
done_testing();
