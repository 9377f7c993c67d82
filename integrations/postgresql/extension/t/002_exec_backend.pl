# The extension dsmpool on a server with the DSM provider API built with
# EXEC_BACKEND, whose children are exec'd and inherit no memory of the
# postmaster's: no pool is made and no provider registered, the log says
# so once, the view says why, and every segment is PostgreSQL's own.
#
# Run as t/001_provider.pl is (its README); skipped on other servers.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DsmpoolTest;

my $lib = $ENV{DSMPOOL_PRELOAD_LIB};
plan skip_all => 'DSMPOOL_PRELOAD_LIB names no file' unless defined $lib && -f $lib;
my ($cppflags) = run_command([ 'pg_config', '--cppflags' ]);
plan skip_all => 'the server is not built with EXEC_BACKEND'
  unless $cppflags =~ /-DEXEC_BACKEND\b/;

my $node = dsmpool_node('exec_backend', $lib);
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION dsmpool');
my $right = dsmpool_seed($node, 300000);
is($node->safe_psql('postgres', $DsmpoolTest::JOIN), $right, 'a parallel hash join is right');
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
