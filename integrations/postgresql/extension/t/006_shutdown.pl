# Every way down leaves nothing in /dev/shm (what the core patches'
# shutdown test did): an immediate shutdown; and a postmaster killed
# outright, whose leavings (PostgreSQL's control segment, the pool's
# objects) the next start removes: PostgreSQL its own segment, the preload
# library's sweep the objects of pools whose processes all died.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use DsmpoolTest;

my ($lib, $way) = dsmpool_way();
my $before = shm_objects();
my $node = dsmpool_node('shutdown', $lib, "dsmpool.size = '64MB'");
$node->start;
my $right = dsmpool_seed($node, 100000);
is($node->safe_psql('postgres', $DsmpoolTest::JOIN), $right, 'the join is right');
$node->stop('immediate');
is(shm_new($before), '', 'an immediate shutdown leaves nothing in /dev/shm');

# A killed postmaster: its children notice and exit; what is left then
# stays until the next start.
$node->start;
is($node->safe_psql('postgres', $DsmpoolTest::JOIN), $right, 'the join is right after the restart');
my $pm = postmaster_pid($node);
my @kids = children_of($pm);
$node->kill9;
for (1 .. 3000)    # up to 30 s for the children to go
{
	last unless grep { -e "/proc/$_" } @kids;
	usleep(10_000);
}
my $left = shm_new($before);
note "a killed postmaster left in /dev/shm: " . ($left || 'nothing');
$node->start;
my @still = grep { -e "/dev/shm/$_" } split / /, $left;
is("@still", '', 'the next start removed what the killed postmaster left');
is($node->safe_psql('postgres', $DsmpoolTest::JOIN), $right, 'and the join is right');
$node->stop;
is(shm_new($before), '', 'after the stop: nothing left in /dev/shm');
done_testing();
