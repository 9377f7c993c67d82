# The operator's view pg_dsmpool of an idle pool, who may read it, and that
# a server's start and stop leave nothing in /dev/shm (t/DsmpoolTest.pm
# says how the test runs, either way in).
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
my $node = dsmpool_node('view', $lib, "dsmpool.size = '64MB'", 'dsmpool.huge_pages = off');
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION dsmpool');

# An idle pool: what was asked for; its data (the size less its tables)
# resident or released, most of it free; nothing refused.
my ($serving, $gen, $size, $page, $resident, $released, $free, $refused) = split /\|/,
  $node->safe_psql('postgres',
	'SELECT serving, generation, size, page_size, resident, released, free, segments_refused FROM pg_dsmpool');
is("$serving $gen $size $page", 't 1 67108864 4096',
	'an idle pool: serving generation 1, of dsmpool.size in 4 kB pages');
my $data = $resident + $released;
ok($data <= $size && $data >= $size * 0.9,
	"its data ($data bytes) is resident ($resident) or released ($released)");
ok($free <= $data && $free >= $size / 2, "most of it is free ($free bytes)");
is($refused, 0, 'it refused nothing');

# As pg_shmem_allocations: a member of pg_read_all_stats reads its one row,
# a plain role is refused.
$node->safe_psql('postgres',
	'CREATE ROLE watcher LOGIN; CREATE ROLE monitor LOGIN IN ROLE pg_read_all_stats');
my ($ret, $out, $err) =
  $node->psql('postgres', 'SELECT count(*) FROM pg_dsmpool', extra_params => [ '-U', 'watcher' ]);
ok($ret != 0 && $err =~ /permission denied/, 'a role without pg_read_all_stats is refused')
  or diag "psql said $ret: $out $err";
is( $node->safe_psql(
		'postgres', 'SELECT count(*) FROM pg_dsmpool', extra_params => [ '-U', 'monitor' ]),
	1,
	'a member of pg_read_all_stats reads its one row');

$node->stop;
is(shm_new($before), '', 'after the stop: nothing left in /dev/shm');
done_testing();
