# DsmpoolTest: what the extension's TAP tests (t/*.pl) share: the way in
# (DSMPOOL_WAY: api, the server's DSM provider API, or preload, LD_PRELOAD
# on a stock server), a cluster with the extension preloaded and parallel
# hash joins cheap, the tables of the join, and this user's objects in
# /dev/shm (what a test leaves there must be none: it compares the objects
# of this user before and after, so others' objects never fail it).
package DsmpoolTest;

use strict;
use warnings FATAL => 'all';
use Exporter 'import';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

our @EXPORT =
  qw(dsmpool_way dsmpool_areas dsmpool_node dsmpool_seed shm_objects shm_new children_of cmdline_of postmaster_pid
  wait_accepting);

# The join of dsmpool_seed's tables: count and sum.
our $JOIN = 'SELECT count(*), sum(t.b) FROM t JOIN u USING (a)';

# dsmpool_way(): (library, way, what it goes through) or skip_all where
# DSMPOOL_PRELOAD_LIB names no file or the server is built with
# EXEC_BACKEND (t/002_exec_backend.pl judges that one). The preload way
# puts LD_PRELOAD into the environment of every server the test starts.
sub dsmpool_way
{
	my $lib = $ENV{DSMPOOL_PRELOAD_LIB};
	plan skip_all => 'DSMPOOL_PRELOAD_LIB names no file' unless defined $lib && -f $lib;
	my ($cppflags) = run_command([ 'pg_config', '--cppflags' ]);
	plan skip_all => 'the server is built with EXEC_BACKEND (t/002_exec_backend.pl)'
	  if $cppflags =~ /-DEXEC_BACKEND\b/;
	my $way = $ENV{DSMPOOL_WAY} // 'api';
	die "DSMPOOL_WAY is api or preload, not $way" unless $way =~ /^(api|preload)$/;
	$ENV{LD_PRELOAD} = $lib if $way eq 'preload';
	my $through =
	  $way eq 'api'
	  ? "the server's DSM provider API"
	  : "the preload library's interposed calls";
	return ($lib, $way, $through);
}

# dsmpool_areas(way): true on a server built with the optional
# provider/areas patch (dsa.c's dsa_pool_hook, which the extension sets
# through the API): its DSA areas are the pool's, so a join makes few DSM
# segments
sub dsmpool_areas
{
	my ($way) = @_;
	my ($bindir) = run_command([ 'pg_config', '--bindir' ]);
	chomp $bindir;
	return $way eq 'api' && slurp_file("$bindir/postgres") =~ /\bdsa_pool_hook\b/;
}

# dsmpool_node(name, lib, conf lines): initialized, not started
sub dsmpool_node
{
	my ($name, $lib, @conf) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf(
		'postgresql.conf', join(
			"\n", qq{
shared_preload_libraries = 'dsmpool'
dsmpool.library = '$lib'
max_worker_processes = 16
max_parallel_workers_per_gather = 4
restart_after_crash = on
parallel_setup_cost = 0
parallel_tuple_cost = 0
min_parallel_table_scan_size = 0
enable_parallel_hash = on
}, @conf));
	return $node;
}

# dsmpool_seed(node, rows): the tables t (a, b = a % 1000) and u (a) of the
# join, and the join's right answer
sub dsmpool_seed
{
	my ($node, $rows) = @_;
	$node->safe_psql(
		'postgres', qq{
CREATE TABLE t AS SELECT g AS a, g % 1000 AS b FROM generate_series(1, $rows) g;
CREATE TABLE u AS SELECT g AS a FROM generate_series(1, $rows) g;
ANALYZE t; ANALYZE u;
});
	my $sum = 0;
	$sum += $_ % 1000 for 1 .. $rows;
	return "$rows|$sum";
}

# shm_objects(): { name => inode } of this user's dynamic shared memory
# objects: PostgreSQL's segments and dsmpool's objects in /dev/shm
sub shm_objects
{
	my %o;
	opendir(my $d, '/dev/shm') or die "/dev/shm: $!";
	for my $n (readdir $d)
	{
		next unless $n =~ /^(PostgreSQL|dsmpool)\./;
		my @st = lstat("/dev/shm/$n");
		$o{$n} = $st[1] if @st && $st[4] == $>;
	}
	closedir $d;
	return \%o;
}

# shm_new(before): the names of this user's objects there now that were not
# there before (or are other files of the same name), sorted, space-separated
sub shm_new
{
	my ($before) = @_;
	my $now = shm_objects();
	return join ' ',
	  sort grep { !exists $before->{$_} || $before->{$_} != $now->{$_} } keys %$now;
}

# postmaster_pid(node): the running postmaster's, from postmaster.pid
sub postmaster_pid
{
	my ($node) = @_;
	my ($pid) = split /\n/, slurp_file($node->data_dir . '/postmaster.pid');
	return $pid;
}

# children_of(pid): the pids whose parent is pid (from /proc)
sub children_of
{
	my ($ppid) = @_;
	my @kids;
	opendir(my $d, '/proc') or die "/proc: $!";
	for my $p (grep { /^\d+$/ } readdir $d)
	{
		open(my $f, '<', "/proc/$p/stat") or next;
		my $stat = <$f>;
		close $f;
		# the name in parentheses may hold spaces: the fields after its ')'
		push @kids, $p if defined $stat && $stat =~ /\)\s+\S+\s+(\d+)/ && $1 == $ppid;
	}
	closedir $d;
	return @kids;
}

# cmdline_of(pid): the process's command line, or '' where it has gone (a
# child listed by children_of may exit before it is read: a backend whose
# session just ended)
sub cmdline_of
{
	my ($pid) = @_;
	open(my $f, '<', "/proc/$pid/cmdline") or return '';
	my $c = <$f>;
	close $f;
	return $c // '';
}

# wait_accepting(node): true once the server accepts connections again
# (after a crash restart), false after PostgreSQL's test timeout. Not
# poll_query_until: it gives psql its query on stdin, and a psql refused
# during recovery ("not yet accepting connections") can exit before the
# write, which IPC::Run then dies of ("ack Broken pipe"), ending the test
# before its plan on a loaded machine. pg_isready reads nothing.
sub wait_accepting
{
	my ($node) = @_;
	my $until = time + ($PostgreSQL::Test::Utils::timeout_default // 180);
	while (time < $until)
	{
		return 1
		  if system('pg_isready', '-q', '-d', $node->connstr('postgres')) == 0;
		usleep(100_000);
	}
	return 0;
}

1;
