/*
 * dsmpool.c -- the PostgreSQL extension dsmpool: the settings, the
 * operator's view and the maintainer of the pool that the preload library
 * (libdsmpool-preload.so, LD_PRELOAD) makes for a stock server's posix DSM
 * segments. shared_preload_libraries = 'dsmpool'; CREATE EXTENSION dsmpool
 * for the view pg_dsmpool.
 *
 * Layer: a PostgreSQL module beside the preload library, in the same
 * processes. It does not link libdsmpool (the preload library dlopens it in
 * the postmaster alone): it reaches the pool only through what the preload
 * library exports: dsmpool_preload_get_state() and the versioned call table
 * dsmpool_preload_get_ops() (dsmpool_preload.h), found with
 * dlsym(RTLD_DEFAULT) where LD_PRELOAD loaded it, else in the copy this
 * module dlopens on a server with the DSM provider API. It includes
 * dsmpool.h for dsmpool_stats alone.
 *
 * One provider, two ways in: the preload library makes and serves the pool
 * either way; on a stock server it is reached from outside (LD_PRELOAD, its
 * interposed libc calls), on a server with RegisterDsmProvider
 * (integrations/postgresql/provider) from inside, through this module.
 *
 * Rules
 *   [provider] Where the server exports RegisterDsmProvider (asked at run
 *      time, so that one build runs on servers with and without it), the
 *      postmaster's _PG_init loads the preload library itself
 *      (dsmpool.library: a path, or a file name looked up in $libdir and
 *      then on the library path; dlopen, no LD_PRELOAD needed; the
 *      preloaded copy if there is one), sets its state.provider, registers the provider
 *      (calls into the library's seg_* ops) and a shmem_startup_hook that
 *      begins each generation (gen_begin: at the start and at each crash
 *      restart, which so discards the last one) and ends it at shutdown
 *      (on_shmem_exit). Any dynamic_shared_memory_type: the control segment
 *      stays with it, and so do the segments the pool refuses. Children
 *      inherit the registration and the pool by fork. A server built with
 *      EXEC_BACKEND (children exec'd, inheriting nothing) gets no pool, no
 *      provider and no maintainer, said once in the log: every segment is
 *      PostgreSQL's own.
 *   [areas] On a server built with the optional provider/areas patch
 *      (dsa.c's dsa_pool_hook, found with dlsym), the provider sets the
 *      hook too: DSA areas in DSM segments are then dsmpool areas of the
 *      generation's pool (ops->pool; NULL where it does not serve: stock
 *      areas). A crash restart discards them with the pool. Such a server
 *      links libdsmpool: where that is another file than the preload
 *      library's, there is no pool (a WARNING): two copies in one process
 *      would not stay apart.
 *   [settings] dsmpool.size, .huge_pages, .numa, .resident_min,
 *      .idle_release and .warm are PGC_POSTMASTER settings. The postmaster's
 *      _PG_init (shared_preload_libraries load before the control segment
 *      is made) checks them together and writes them into the preload
 *      library's state.settings, which every generation's pool is made with.
 *      dsmpool.size out of 8 MB .. 64 TB, or resident_min + warm beyond
 *      size, stops the start with an error that says which; a value that
 *      does not parse, or a negative one, is PostgreSQL's own WARNING for a
 *      custom setting (its default kept).
 *   [absent] Without the preload library the postmaster's _PG_init says so
 *      in the log once, with what to do, registers no worker, and the view's
 *      one row says absent. A preload library of another version is absent
 *      the same way.
 *   [inert] dynamic_shared_memory_type sysv or mmap on a server without
 *      the provider API: PostgreSQL never makes a posix segment, so the
 *      preload library never makes a pool. The postmaster's _PG_init says
 *      so once; no worker; the view says inert.
 *   [maintainer] With the preload library and posix segments (or the
 *      provider API, whatever dynamic_shared_memory_type), _PG_init
 *      registers one background worker, "dsmpool maintainer"
 *      (BGWORKER_SHMEM_ACCESS, started with the postmaster, restarted 5 s
 *      after it exits and at once after a crash restart). It is forked by
 *      the postmaster after the generation's pool is made and uses that pool
 *      through the call table, read at each call; a crash restart kills it
 *      with every child and starts it again on the new generation, so it
 *      never holds an old pool. Each step: dsmpool_maintain (give back what
 *      stayed free dsmpool.idle_release; refill released memory to keep
 *      dsmpool.warm free: the prefault ahead of need) when either is set,
 *      then the counts; it sleeps as long as maintain says, at most 1 s.
 *      It claims DSMPOOL_PRELOAD_CLAIM_MAINTAINER, so that destroys leave the
 *      release to it (dsmpool_preload.c [maintained]).
 *   [who logs] Nothing is logged where the pool refuses a segment (inside
 *      a backend's posix_fallocate, where nothing may log). The maintainer
 *      is the one process that logs the pool's life: what each generation's
 *      pool is (and, with dsmpool.huge_pages, that it fell back to 4 kB
 *      pages and why), why a generation has no pool, the first refusal of a
 *      generation (one LOG with a HINT: the CLAIM_REFUSAL bit, taken once
 *      per generation, even across the worker's own restarts), and the first
 *      of failing maintenance steps in a row. The postmaster's _PG_init logs
 *      [absent] and [inert]. The view logs nothing.
 *   [view] pg_dsmpool, one row from this process's state: serving,
 *      generation, size (dsmpool.size in bytes), page size, resident,
 *      released and free bytes, the segments served and refused in this
 *      generation (all processes), and a note (absent, inert, no pool, what
 *      creation noted). Revoked from PUBLIC, granted to pg_read_all_stats,
 *      as pg_shmem_allocations is (dsmpool--1.0.sql).
 *   [errors] ereport with a hint; the library's calls return -errno and
 *      their messages are quoted.
 */
#include "postgres.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "access/htup_details.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/dsm_impl.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/wait_event.h"

#include "dsmpool.h"
#include "dsmpool_preload.h"

#if PG_VERSION_NUM >= 180000
PG_MODULE_MAGIC_EXT(.name = "dsmpool", .version = "1.0");
#else
PG_MODULE_MAGIC;
#endif

void _PG_init(void);
PGDLLEXPORT void dsmpool_maintainer_main(Datum main_arg);
PG_FUNCTION_INFO_V1(pg_dsmpool_stats);

#define MB ((size_t) 1024 * 1024)
/* libdsmpool's largest pool: 64 TiB */
#define SIZE_MIN_MB 8
#define SIZE_MAX_MB ((int) Min((uint64) INT_MAX, (UINT64CONST(1) << 46) / MB))

static int	guc_size = (int) (DSMPOOL_PRELOAD_DEFAULT_SIZE / MB);
static bool guc_huge_pages = false;
static bool guc_numa = false;
static int	guc_resident_min = 0;
static int	guc_idle_release = 0;
static int	guc_warm = 0;
static char *guc_library = NULL;

/* _PG_init ran from shared_preload_libraries (inherited by every child) */
static bool preloaded = false;

/* ---- the preload library ------------------------------------------------ */

typedef dsmpool_preload_state *(*get_state_fn) (void);
typedef const dsmpool_preload_ops *(*get_ops_fn) (void);

/*
 * [provider] PostgreSQL's DSM provider (storage/dsm.h's DsmProvider, of a
 * server with integrations/postgresql/provider's patch), mirrored so that
 * this module builds against servers without it.
 */
typedef struct
{
	const char *name;
	bool		(*create) (Size size, uint64 *id, void **address, Size *mapped_size);
	void		(*attach) (uint64 id, void **address, Size *mapped_size);
	void		(*detach) (uint64 id, void *address, Size mapped_size);
	void		(*destroy) (uint64 id);
} provider_api;
typedef void (*register_provider_fn) (const provider_api *provider);

/* the copy of the preload library this module loaded, inherited by children */
static void *library_handle = NULL;

/* RegisterDsmProvider, where the server has it */
static register_provider_fn
provider_api_of_server(void)
{
	void	   *f = dlsym(RTLD_DEFAULT, "RegisterDsmProvider");
	register_provider_fn fn;

	memcpy(&fn, &f, sizeof fn);
	return fn;
}

/* [provider] the library by dsmpool.library, once per process; why, if not */
static void *
library_open(const char **why)
{
	static char buf[512];

	if (library_handle == NULL && guc_library != NULL && guc_library[0] != 0)
	{
		char		path[MAXPGPATH];

		/* a bare name: $libdir first, where packages put it, then the library path */
		snprintf(path, sizeof path, "%s/%s", pkglib_path, guc_library);
		if (strchr(guc_library, '/') == NULL && access(path, R_OK) == 0)
			library_handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		if (library_handle == NULL)
			library_handle = dlopen(guc_library, RTLD_NOW | RTLD_LOCAL);
		if (library_handle == NULL)
		{
			const char *e = dlerror();

			snprintf(buf, sizeof buf, "dsmpool.library \"%s\" could not be loaded: %s",
					 guc_library, e ? e : "no reason given");
			*why = buf;
		}
	}
	return library_handle;
}

/*
 * The preload library's state and calls, or NULL (and why, in *why) when
 * it is not there or of another version.
 */
static dsmpool_preload_state *
preload_find(const dsmpool_preload_ops **ops, const char **why)
{
	void	   *s = dlsym(RTLD_DEFAULT, "dsmpool_preload_get_state");
	void	   *o = dlsym(RTLD_DEFAULT, "dsmpool_preload_get_ops");
	get_state_fn gs;
	get_ops_fn	go;
	dsmpool_preload_state *st;

	*ops = NULL;
	*why = "the preload library libdsmpool-preload.so is not loaded";
	if (s == NULL && provider_api_of_server() != NULL)
	{
		void	   *lib = library_open(why);

		s = lib ? dlsym(lib, "dsmpool_preload_get_state") : NULL;
		o = lib ? dlsym(lib, "dsmpool_preload_get_ops") : NULL;
	}
	if (s == NULL)
		return NULL;
	if (o == NULL)
	{
		*why = "the preload library is older than this extension (it exports no dsmpool_preload_get_ops)";
		return NULL;
	}
	memcpy(&gs, &s, sizeof gs);
	memcpy(&go, &o, sizeof go);
	st = gs();
	*ops = go();
	if (st == NULL || st->version != DSMPOOL_PRELOAD_STATE_VERSION ||
		*ops == NULL || (*ops)->version != DSMPOOL_PRELOAD_OPS_VERSION)
	{
		*why = "the preload library is of another version than this extension: install both from one dsmpool build";
		*ops = NULL;
		return NULL;
	}
	return st;
}

static const char *
dsm_type_name(void)
{
	switch (dynamic_shared_memory_type)
	{
		case DSM_IMPL_POSIX:
			return "posix";
		case DSM_IMPL_SYSV:
			return "sysv";
		case DSM_IMPL_MMAP:
			return "mmap";
		default:
			return "windows";
	}
}

static const char *absent_hint =
	"Start the server with LD_PRELOAD naming libdsmpool-preload.so (installed beside libdsmpool.so.0); "
	"with pg_ctlcluster, put LD_PRELOAD = '/path/to/libdsmpool-preload.so' in /etc/postgresql/VERSION/CLUSTER/environment. "
	"Or remove dsmpool from shared_preload_libraries.";
#ifdef EXEC_BACKEND
static const char *exec_backend_why =
	"this server is built with EXEC_BACKEND, whose children inherit no memory of the postmaster's";
#endif
static const char *absent_hint_api =
	"This server has the DSM provider API: set dsmpool.library to the path of libdsmpool-preload.so "
	"(installed beside libdsmpool.so.0), no LD_PRELOAD needed. Or remove dsmpool from shared_preload_libraries.";

/* ---- [provider] ------------------------------------------------------------ */

static const dsmpool_preload_ops *provider_ops = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static bool
provider_create(Size size, uint64 *id, void **address, Size *mapped_size)
{
	size_t		len;

	if (provider_ops->seg_create(size, id, address, &len) != 0)
		return false;			/* full, or no room: PostgreSQL's own segment */
	*mapped_size = len;
	return true;
}

static void
provider_attach(uint64 id, void **address, Size *mapped_size)
{
	size_t		len;
	int			r = provider_ops->seg_attach(id, address, &len);

	if (r != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("dsmpool: could not attach the pool's segment %llx: %s",
						(unsigned long long) id,
						r == -ENOSPC ? "this process maps as many pool segments as PostgreSQL has slots"
						: provider_ops->last_error()),
				 errhint("The segment's creator went with its pool generation; retry the query.")));
	*mapped_size = len;
}

/* detach and destroy must not throw: a failure is a bounded leak that the
 * generation's end frees */
static void
provider_detach(uint64 id, void *address, Size mapped_size)
{
	(void) provider_ops->seg_detach(address);
}

static void
provider_destroy(uint64 id)
{
	(void) provider_ops->seg_destroy(id);
}

static const provider_api provider = {
	.name = "dsmpool",
	.create = provider_create,
	.attach = provider_attach,
	.detach = provider_detach,
	.destroy = provider_destroy,
};

static void
provider_gen_end(int code, Datum arg)
{
	provider_ops->gen_end();
}

/* the postmaster's, each time it makes shared memory: the next generation */
static void
provider_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	if (IsUnderPostmaster)
		return;
	(void) provider_ops->gen_begin(); /* why not, if not: the maintainer logs it */
	on_shmem_exit(provider_gen_end, (Datum) 0);
}

/*
 * [areas] A server built with provider/areas (its dsa.c links libdsmpool
 * and has dsa_pool_hook) makes its DSA areas in the pool this returns: the
 * generation's, in each process while it serves, else NULL (stock areas).
 */
typedef struct dsmpool *(*areas_hook_fn) (void);

static struct dsmpool *
areas_pool(void)
{
	return provider_ops->pool();
}

/*
 * [areas] One libdsmpool in the process: where the server is linked with
 * one (a provider/areas build), it must be the file that the preload
 * library loads (beside itself, where there is one; else by its name,
 * which then finds the server's). Two copies would not stay apart: the
 * preload library's copy, loaded RTLD_LOCAL, binds its calls of its own
 * exported functions to the server's copy (global scope), each with its
 * own process state, on one pool. So where they differ there is no pool
 * at all, said as a WARNING; where the server links none, nothing to say.
 * Returns false for no pool, with *why set.
 */
static bool
areas_libraries_agree(const char **why)
{
	static char msg[2 * PATH_MAX + 128];
	void	   *linked = dlsym(RTLD_DEFAULT, "dsmpool_area_create");
	void	   *ours = dlsym(library_handle ? library_handle : RTLD_DEFAULT, "dsmpool_preload_get_ops");
	Dl_info		li,
				pi;
	char		beside[PATH_MAX];
	struct stat a,
				b;
	const char *slash;

	if (linked == NULL)
		return true;			/* the server links no libdsmpool */
	if (ours == NULL || !dladdr(linked, &li) || !li.dli_fname ||
		!dladdr(ours, &pi) || !pi.dli_fname || (slash = strrchr(pi.dli_fname, '/')) == NULL ||
		snprintf(beside, sizeof beside, "%.*s/libdsmpool.so.0", (int) (slash - pi.dli_fname),
				 pi.dli_fname) >= (int) sizeof beside)
	{
		*why = "the libdsmpool that the server is linked with, or the preload library's, cannot be found";
		return false;
	}
	if (stat(beside, &b) == 0 &&
		(stat(li.dli_fname, &a) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino))
	{
		snprintf(msg, sizeof msg, "the server is linked with %s, and the preload library loads %s",
				 li.dli_fname, beside);
		*why = msg;
		return false;
	}
	return true;
}

static void
areas_hook_set(void)
{
	areas_hook_fn *hook = (areas_hook_fn *) dlsym(RTLD_DEFAULT, "dsa_pool_hook");

	if (hook != NULL)
		*hook = areas_pool;
}

/* ---- settings ----------------------------------------------------------- */

static void
define_settings(void)
{
	DefineCustomIntVariable("dsmpool.size",
							"Size of the dsmpool pool that serves dynamic shared memory segments.",
							"A reservation of address space and tables: memory is used only as segments need it.",
							&guc_size, guc_size, 0, INT_MAX,
							PGC_POSTMASTER, GUC_UNIT_MB, NULL, NULL, NULL);
	DefineCustomBoolVariable("dsmpool.huge_pages",
							 "Backs the dsmpool pool with huge pages where they can be had.",
							 "Only after the free huge pages and the hugetlb cgroup leave room for the whole pool "
							 "(for a dsmpool.size beyond the machine's memory, for what it holds from the start; "
							 "refills then take huge pages as they are free); else 4 kB pages, and the log says why.",
							 &guc_huge_pages, false,
							 PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("dsmpool.numa",
							 "Splits the dsmpool pool into a sub-pool per NUMA node.",
							 NULL,
							 &guc_numa, false,
							 PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("dsmpool.resident_min",
							"Memory of the dsmpool pool made resident at startup and never given back by the maintainer.",
							NULL,
							&guc_resident_min, 0, 0, INT_MAX,
							PGC_POSTMASTER, GUC_UNIT_MB, NULL, NULL, NULL);
	DefineCustomIntVariable("dsmpool.idle_release",
							"Gives back memory of the dsmpool pool that stayed free this long.",
							"0: memory goes back when the segment that used it is destroyed, as stock's does. "
							"Set, the dsmpool maintainer (a background worker) gives it back.",
							&guc_idle_release, 0, 0, INT_MAX,
							PGC_POSTMASTER, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomStringVariable("dsmpool.library",
							   "The preload library that a server with the DSM provider API loads (no LD_PRELOAD).",
							   "A path, or a file name: in $libdir, else on the library path.",
							   &guc_library, "libdsmpool-preload.so",
							   PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("dsmpool.warm",
							"Free memory of the dsmpool pool kept resident, ready for the next segment.",
							"The dsmpool maintainer makes released memory resident again to keep this much free.",
							&guc_warm, 0, 0, INT_MAX,
							PGC_POSTMASTER, GUC_UNIT_MB, NULL, NULL, NULL);
	MarkGUCPrefixReserved("dsmpool");
}

/*
 * [settings]: the ranges, checked here rather than by the settings' own
 * bounds: a value a custom setting's bounds refuse at startup is only a
 * WARNING (the default is kept), and a pool of another size than the
 * operator wrote is worse than no start.
 */
static void
check_settings(void)
{
	if (guc_size < SIZE_MIN_MB || guc_size > SIZE_MAX_MB)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("dsmpool.size is %d MB; it must be between %d MB and %d MB", guc_size, SIZE_MIN_MB,
						SIZE_MAX_MB),
				 errhint("The size is a reservation: memory is used only as segments need it.")));
	if ((int64) guc_resident_min + guc_warm > guc_size)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("dsmpool.resident_min (%d MB) and dsmpool.warm (%d MB) together exceed dsmpool.size (%d MB)",
						guc_resident_min, guc_warm, guc_size),
				 errhint("Raise dsmpool.size, or lower dsmpool.resident_min or dsmpool.warm.")));
}

static void
register_maintainer(void)
{
	BackgroundWorker bgw;
	Dl_info		di;
	const char *self = "dsmpool";

	memset(&bgw, 0, sizeof bgw);
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS;
	bgw.bgw_start_time = BgWorkerStart_PostmasterStart;
	bgw.bgw_restart_time = 5;
	/*
	 * The file this code is in, as the postmaster loaded it:
	 * shared_preload_libraries may name a path, and the worker must load
	 * the same file (not $libdir's, whose settings would be another copy's).
	 */
	if (dladdr((void *) register_maintainer, &di) && di.dli_fname &&
		strlen(di.dli_fname) < sizeof bgw.bgw_library_name)
		self = di.dli_fname;
	snprintf(bgw.bgw_library_name, sizeof bgw.bgw_library_name, "%s", self);
	snprintf(bgw.bgw_function_name, sizeof bgw.bgw_function_name, "dsmpool_maintainer_main");
	snprintf(bgw.bgw_name, sizeof bgw.bgw_name, "dsmpool maintainer");
	snprintf(bgw.bgw_type, sizeof bgw.bgw_type, "dsmpool maintainer");
	bgw.bgw_main_arg = (Datum) 0;
	bgw.bgw_notify_pid = 0;
	RegisterBackgroundWorker(&bgw);
}

void
_PG_init(void)
{
	const dsmpool_preload_ops *ops;
	dsmpool_preload_state *st;
	const char *why;
	register_provider_fn register_provider;

	if (!process_shared_preload_libraries_in_progress)
		return;					/* loaded by a function call: the view alone */
	preloaded = true;
	define_settings();
	/* the postmaster only: not single-user mode, nor pg_upgrade's servers */
	if (!IsPostmasterEnvironment || IsUnderPostmaster || IsBinaryUpgrade)
		return;
	check_settings();

	register_provider = provider_api_of_server();
#ifdef EXEC_BACKEND
	if (register_provider != NULL)
	{
		/* [provider] no child would inherit the pool: none is made */
		if (!IsUnderPostmaster)
			ereport(LOG,
					(errmsg("dsmpool: no pool: %s; dynamic shared memory is PostgreSQL's own", exec_backend_why)));
		return;
	}
#endif
	st = preload_find(&ops, &why);
	if (st == NULL)
	{
		/* [absent] */
		ereport(WARNING,
				(errmsg("dsmpool: no pool: %s; dynamic shared memory is PostgreSQL's own", why),
				 errhint("%s", register_provider ? absent_hint_api : absent_hint)));
		return;
	}
	if (!areas_libraries_agree(&why))
	{
		/* [areas]: two libdsmpool files in one process */
		ereport(WARNING,
				(errmsg("dsmpool: no pool: %s; dynamic shared memory is PostgreSQL's own", why),
				 errhint("Install the server's libdsmpool and the preload library from one dsmpool build, in one directory.")));
		return;
	}
	if (register_provider != NULL)
	{
		/* [provider] before the control segment: the interposed calls never serve */
		st->provider = true;
		provider_ops = ops;
		register_provider(&provider);
		prev_shmem_startup_hook = shmem_startup_hook;
		shmem_startup_hook = provider_shmem_startup;
		areas_hook_set();
	}
	else if (dynamic_shared_memory_type != DSM_IMPL_POSIX)
	{
		/* [inert] */
		ereport(LOG,
				(errmsg("dsmpool: inert: dynamic_shared_memory_type is %s; the pool serves posix segments only",
						dsm_type_name()),
				 errhint("Set dynamic_shared_memory_type = posix (the default on Linux) for the pool to serve, "
						 "or take dsmpool out of shared_preload_libraries and LD_PRELOAD.")));
		return;
	}
	st->settings.size = (size_t) guc_size * MB;
	st->settings.huge_pages = guc_huge_pages;
	st->settings.numa = guc_numa;
	st->settings.resident_min = (size_t) guc_resident_min * MB;
	st->settings.warm_bytes = (size_t) guc_warm * MB;
	st->settings.idle_release_ms = (unsigned) guc_idle_release;
	register_maintainer();
}

/* ---- the maintainer ------------------------------------------------------ */

static size_t
stats_free(const dsmpool_stats *s)
{
	size_t		f = 0;

	for (unsigned i = 0; i < s->nsubpools && i < DSMPOOL_MAX_NODES; i++)
		f += s->subpool[i].free;
	return f;
}

/* [who logs]: what this generation's pool is, once per generation */
static void
announce(const dsmpool_preload_state *st, const dsmpool_preload_ops *ops)
{
	dsmpool_stats s;

	memset(&s, 0, sizeof s);
	if (!ops->claim(DSMPOOL_PRELOAD_CLAIM_ANNOUNCE) || ops->get_stats(&s, sizeof s) != 0)
		return;
	ereport(LOG,
			(errmsg("dsmpool: generation %llu: a pool of %zu MB in %zu kB pages serves dynamic shared memory segments "
					"(%zu MB resident; dsmpool.resident_min %d MB, dsmpool.idle_release %d ms, dsmpool.warm %d MB), "
					"through %s",
					(unsigned long long) st->generation, st->pool_size / MB, s.page_size / 1024,
					s.resident_bytes / MB, guc_resident_min, guc_idle_release, guc_warm,
					st->provider ? "the server's DSM provider API" : "the preload library's interposed calls")));
	if (st->settings.huge_pages && !s.huge_pages)
		ereport(LOG,
				(errmsg("dsmpool: the pool is in %zu kB pages (dsmpool.huge_pages is on): %s",
						s.page_size / 1024, st->note[0] ? st->note : "no reason given"),
				 errhint("Reserve huge pages beyond what shared memory takes (shared_memory_size_in_huge_pages) "
						 "with vm.nr_hugepages, or raise the hugetlb cgroup's limit; the pool serves meanwhile.")));
}

/* [who logs]: the first refusal of this generation, once */
static void
report_refusal(const dsmpool_preload_ops *ops)
{
	dsmpool_preload_counts c;

	if (ops->counts(&c) != 0 || c.first_refused_bytes == 0 ||
		!ops->claim(DSMPOOL_PRELOAD_CLAIM_REFUSAL))
		return;
	ereport(LOG,
			(errmsg("dsmpool: the pool could not serve a dynamic shared memory segment of %llu bytes: %s",
					(unsigned long long) c.first_refused_bytes,
					c.first_refused_why[0] ? c.first_refused_why : "no reason given"),
			 errdetail("PostgreSQL made it in /dev/shm, as it does without the pool, and does so for every segment the pool cannot serve."),
			 errhint("Consider increasing \"dsmpool.size\" (now %d MB), unless the message names a memory limit. "
					 "Only the first refusal of each pool generation is logged; pg_dsmpool counts them all.",
					 guc_size)));
}

void
dsmpool_maintainer_main(Datum main_arg)
{
	const dsmpool_preload_ops *ops;
	dsmpool_preload_state *st;
	const char *why;
	bool		failing = false;
	bool		policy;
	uint32		wait_event = PG_WAIT_EXTENSION;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	BackgroundWorkerUnblockSignals();
#if PG_VERSION_NUM >= 170000
	wait_event = WaitEventExtensionNew("DsmpoolMaintain");
#endif

	st = preload_find(&ops, &why);
	if (st == NULL)
		proc_exit(0);			/* cannot be: registered only with it; not restarted */
	if (!st->serving)
	{
		/* [who logs]: why this generation has none (this worker is started again with the next) */
		ereport(LOG,
				(errmsg("dsmpool: generation %llu: %s",
						(unsigned long long) st->generation, st->note[0] ? st->note : "no pool, no reason given"),
				 errhint("Dynamic shared memory is PostgreSQL's own until the next start or crash restart makes a pool.")));
	}
	else
	{
		(void) ops->claim(DSMPOOL_PRELOAD_CLAIM_MAINTAINER);
		announce(st, ops);
	}
	policy = st->settings.idle_release_ms != 0 || st->settings.warm_bytes != 0;

	while (!ShutdownRequestPending)
	{
		unsigned	next_ms = 1000;

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (st->serving && policy)
		{
			int			r = ops->maintain(&next_ms);

			if (r != 0 && r != -ENOENT)
			{
				if (!failing)
					ereport(LOG,
							(errmsg("dsmpool: the pool's maintenance failed: %s", ops->last_error()),
							 errdetail("Failures in a row are logged once; the maintainer goes on.")));
				failing = true;
				next_ms = 1000;
			}
			else
				failing = false;	/* the next failure is news */
		}
		if (st->serving)
			report_refusal(ops);
		if (next_ms > 0)
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 Min(next_ms, 1000), wait_event);
		ResetLatch(MyLatch);
	}
	/* exit 1: started again unless the server is going down */
	proc_exit(1);
}

/* ---- the view ------------------------------------------------------------ */

#define STATS_COLS 10

Datum
pg_dsmpool_stats(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[STATS_COLS];
	bool		nulls[STATS_COLS];
	const dsmpool_preload_ops *ops;
	dsmpool_preload_state *st;
	const char *why;
	char		note[1024];
	dsmpool_stats s;
	dsmpool_preload_counts c;
	bool		serving = false;
	int			i = 0;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("pg_dsmpool_stats: the function must return a row type"),
				 errhint("Reinstall the extension: DROP EXTENSION dsmpool; CREATE EXTENSION dsmpool.")));
	memset(nulls, true, sizeof nulls);
	note[0] = 0;
	memset(&s, 0, sizeof s);
	memset(&c, 0, sizeof c);

	st = preload_find(&ops, &why);
#ifdef EXEC_BACKEND
	if (provider_api_of_server() != NULL)
	{
		/* [provider]: none made */
		st = NULL;
		snprintf(note, sizeof note, "no pool: %s", exec_backend_why);
	}
	else
#endif
	if (st == NULL)
		snprintf(note, sizeof note, "absent: %s. %s", why,
				 provider_api_of_server() ? absent_hint_api : absent_hint);
	else if (!st->provider && dynamic_shared_memory_type != DSM_IMPL_POSIX)
		snprintf(note, sizeof note, "inert: dynamic_shared_memory_type is %s; the pool serves posix segments only",
				 dsm_type_name());
	else
	{
		int			r = st->serving ? ops->get_stats(&s, sizeof s) : -ENOENT;

		serving = st->serving && r == 0;
		if (st->serving && r != 0)
			snprintf(note, sizeof note, "the pool's statistics could not be read: %s", ops->last_error());
		else if (st->note[0])
			snprintf(note, sizeof note, "%s", st->note);
		if (serving)
			(void) ops->counts(&c);
		if (!preloaded)
			snprintf(note + strlen(note), sizeof note - strlen(note),
					 "%sdsmpool is not in shared_preload_libraries: the pool has the preload library's defaults and no maintainer",
					 note[0] ? "; " : "");
	}

	values[i] = BoolGetDatum(serving), nulls[i++] = false;
	if (st != NULL && st->generation > 0)
		values[i] = Int64GetDatum((int64) st->generation), nulls[i] = false;
	i++;
	if (serving)
	{
		values[i] = Int64GetDatum((int64) st->pool_size), nulls[i++] = false;
		values[i] = Int64GetDatum((int64) s.page_size), nulls[i++] = false;
		values[i] = Int64GetDatum((int64) s.resident_bytes), nulls[i++] = false;
		values[i] = Int64GetDatum((int64) s.released_bytes), nulls[i++] = false;
		values[i] = Int64GetDatum((int64) stats_free(&s)), nulls[i++] = false;
		values[i] = Int64GetDatum((int64) c.served), nulls[i++] = false;
		values[i] = Int64GetDatum((int64) c.refused), nulls[i++] = false;
	}
	else
		i += 7;
	if (note[0])
		values[i] = CStringGetTextDatum(note), nulls[i] = false;
	i++;
	Assert(i == STATS_COLS);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
