# A parallel worker SIGKILLed in the middle of a parallel hash join, again
# and again (what the core patches' crash test did): each time the server
# reinitializes, the next generation's pool starts with what an idle pool
# has free (the dead generation's segments are not carried over: a crash
# restart discards the pool), the next join is right, and after the last
# stop nothing is left in /dev/shm.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use DsmpoolTest;

my ($lib, $way) = dsmpool_way();
my $rounds = $ENV{DSMPOOL_CRASH_ROUNDS} // 5;
my $before = shm_objects();
my $node = dsmpool_node('crash', $lib, "dsmpool.size = '256MB'");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION dsmpool');
my $idle_q = 'SELECT generation, free, segments_served FROM pg_dsmpool';
my ($gen0, $idle) = split /\|/, $node->safe_psql('postgres', $idle_q);
my $right = dsmpool_seed($node, 1000000);

# kill_a_worker(): starts the join in a psql of its own, SIGKILLs its first
# parallel worker (a child of the postmaster) as soon as one runs, and
# waits for the psql; true where a worker was killed
sub kill_a_worker
{
	my $pm = postmaster_pid($node);
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-d', $node->connstr('postgres'), '-c', $DsmpoolTest::JOIN ],
		'>', \$out, '2>', \$err);
	my $killed = 0;
	for (1 .. 3000)    # up to 30 s for a worker to appear
	{
		for my $w (children_of($pm))
		{
			next unless cmdline_of($w) =~ /parallel worker/;
			$killed = kill('KILL', $w);
			last;
		}
		last if $killed || !$h->pumpable;
		usleep(10_000);
	}
	$h->finish;
	return $killed;
}

my ($killed, $right_after, $fresh) = (0, 0, 0);
for my $r (1 .. $rounds)
{
	my $log_at = -s $node->logfile;
	# a join that ended before a worker was seen is tried again
	my $k = 0;
	for (1 .. 5) { last if ($k = kill_a_worker()); }
	$killed += $k;
	$node->wait_for_log(qr/all server processes terminated; reinitializing/, $log_at);
	wait_accepting($node) or die 'the server did not come back';
	my ($gen, $free, $served) = split /\|/, $node->safe_psql('postgres', $idle_q);
	if ($gen == $gen0 + $r && $free == $idle)
	{
		$fresh++;
	}
	else
	{
		diag "round $r: generation $gen, free $free (idle: generation 1, $idle free)";
	}
	my $got = $node->safe_psql('postgres', $DsmpoolTest::JOIN);
	$right_after++ if $got eq $right;
}
is($killed, $rounds, "a parallel worker killed in each of $rounds joins");
is($fresh, $rounds,
	"after each crash restart a new generation, its pool as free as an idle one ($idle bytes)");
is($right_after, $rounds, 'the join after each crash restart is right');

$node->stop;
is(shm_new($before), '', 'after the stop: nothing left in /dev/shm');
done_testing();
