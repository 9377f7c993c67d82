-- presence.m -- the presence protocol (format 10): who is attached to a pool,
-- and who may clean it up, under crashes, fork() and bounded waits
-- (pool/top/life.c [anchor], life.c [presence], life.c [life], life.c [last out], sweep.c [sweep], live.c [presence and life]). The rules are named by the
-- labels J1..J8 (join), L1..L6 (leave), S1..S5 (sweep) that the C comments
-- use too, so a rule here and a step there can be matched by name. Steps
-- and the C they stand for:
--   J1..J8  pool/top/life.c dp_life_join (and dp_life_joined, J8), called by
--           attach (pool/top/pool.c); J7 is pool/ledger/proc.c's slot claim, with the
--           slot lock of pool/ledger/live.c;
--   adopt   pool/ledger/proc.c adopt (dp_self, the first call of a fork()ed
--           child) with life.c's join hooks (life_enter, dp_life_joined)
--           around its slot claim: J2..J8 on its own description, then the
--           inherited copy closed;
--   L1..L6  pool/top/life.c dp_life_leave (L1: proc.c's slot release), L5's
--           clean-up is last_out;
--   S1..S5  pool/top/sweep.c remove_pool (dsmpool_sweep, dp_life_remove);
--   the anchor sweep: remove_pool for an ANON/MEMFD pool's id, judged by
--           the anchor in /dev/shm.
--
-- Locks are the kernel's: OFD locks belong to an open file description,
-- SEM_UNDO semaphores to a process. Each process p locks on a description of
-- its own (index p: opened at J2, closed at the end of a join that fails or
-- of a leave): L.LIFE (shared or exclusive), L.PRESENT (shared), its slot
-- lock (J7..L1), and, for a pool without a name, the anchor's A.LIFE and
-- A.PRESENT. A description's locks go when it is unlocked explicitly or when
-- the last process that holds it closes it (a crash closes them all).
--
-- Actors:
--   processes 1 .. NP-1 join by name (J1..J8), stay attached, leave
--     (L1..L6), and may join again; a crashed one may be followed by a new
--     process in its place.
--   process NP is a fork()ed child of process 1 (forked at any step that
--     process 1 has its description open, also mid-join or mid-leave: by
--     another thread). With OFD locks it holds a copy of process 1's
--     description, so process 1's locks outlive process 1 until the child
--     closes the copy; with System V (SEM_UNDO is not inherited) it holds
--     none. Its first call adopts: J2..J8 on a description of its own, then
--     the copy is closed without unlocking (its locks are the parent's). A
--     failed adoption keeps the copy and tries again. Once adopted it is a
--     process like the others.
--   a sweeper (dsmpool_sweep / dsmpool_remove / create's replace_stale of a
--     named pool whose region it reaches): S1..S5; it may crash at any
--     step, and a new one may start at any time.
--   FD_POOL: the anchor sweeper instead (an ANON/MEMFD pool, whose region a
--     sweep cannot reach: judged by the anchor's A.LIFE/A.PRESENT, which the
--     home processes hold; it removes the /dev/shm objects).
-- Any process may crash at any step (the kernel drops its locks, those of a
-- description a child still holds excepted). A bounded wait (J3, L3; J6 for
-- the anchor) either gets the lock once it is free or gives up -- a
-- nondeterministic timeout, possible only while another holds the lock; a
-- join that gives up fails (-EAGAIN), a leave that gives up does not clean
-- up (a named pool is marked closed) and drops its presence.
--
-- Ghost: attached(p) = p holds a slot, or is between J4 and J7 (spec P1);
-- joining(p) = p holds L.LIFE shared in a join (J3 done, J8 not).
-- Checked (invariants, in every state, so also "nobody becomes attached
-- while it runs"):
--   P1 while a leaver runs last_out (L5 found nobody present, until L6), no
--      other process is attached or joining;
--   P2 when a sweeper finds a pool dead (S3) and while it removes it (S4),
--      nobody is attached or joining; with FD_POOL, the same of the anchor
--      sweep and attached processes;
--   P3 whenever any clean-up runs, the attached set is empty;
--   J5 no process claims or holds a slot in a pool a sweeper removed.
-- P4 is not checked (rumur runs with deadlock detection off: crashes are
-- always enabled). Every wait here is bounded; the one wait that can never
-- succeed is a child's J3 on its own inherited copy of a parent that died
-- holding L.LIFE exclusive (forked mid-leave): every adoption, and every
-- other join, then times out until the child exits (reachable here).
--
-- Abstracted away: the region's contents, slots' memory and recovery of dead
-- slots (last_out's and the sweep's clean-up is one state: what it does is
-- idempotent); how L.LIFE is built on System V semaphores; the creation
-- (the pool starts published, nobody attached: the creator's window, and the
-- creation lock the sweep tests, are not modelled); dsmpool_destroy; a
-- forced remove (it ignores presence by design); threads of one process
-- (J1+J2, J5+J6, L1+L2 are one step each: nothing another actor can see
-- happens between them, except the anchor of J6 with FD_POOL, which is why
-- a joiner's state J5 is "J4 done, J6 not"). "Closed cleanly" is a
-- nondeterministic choice of the sweep (region kept or removed). A name
-- that is removed is never made again (J1 then fails).
--
-- OTHER_NS := true models the old protocol (presence and LIFE on the anchor
-- in /dev/shm): process 2 lives in another mount namespace and takes its
-- LIFE and PRESENT on an anchor of its own that the others do not see (its
-- slot lock is still on the region's file, which the sweep tests). rumur
-- finds the sweeper removing the pool while process 2 joins it (P2: it
-- holds LIFE and PRESENT, on its own anchor); without the sweeper, process
-- 1 leaving, seeing nobody present and running last_out while process 2
-- joins or holds a slot (P1) -- the bug the old code had.
--
-- Further constants:
--   ADOPT_SLOT_FIRST := true: the child claims its slot before it takes
--     LIFE/PRESENT (pool/ledger/proc.c adopt as it was: dp_slot_claim, then the
--     life hook): a child becomes attached while a sweep removes the pool
--     (P2), or, without the sweeper, while its parent runs last_out (P1):
--     the parent's explicit unlock of PRESENT is its inherited copy's too.
--   FD_POOL := true: an ANON/MEMFD pool (joined by fd, no name: J5 checks
--     nothing; the anchor sweeper; all processes home). run.sh checks it
--     as the C does it: J3 also takes A.LIFE shared (held until J8; the C
--     takes the anchor's A.PRESENT there too, and makes a missing anchor
--     only at J6), so a joiner is seen by the anchor sweep from before J4.
--   ANCHOR_AFTER_PRESENCE := true (with FD_POOL): the first draft's order
--     (J4 L.PRESENT before J6's anchor): P2 fails -- a joiner between J4
--     and J6 holds nothing on the anchor, so the anchor sweep, once the
--     last other home process has passed L2, removes the pool's /dev/shm
--     objects (pinned fallback segments too) under it, also when the pool
--     was never without an attached process. run.sh checks that it fails.

const
  NP : 3;                     -- processes; NP is the fork()ed child of 1
  OTHER_NS : false;
  ADOPT_SLOT_FIRST : false;
  FD_POOL : false;
  ANCHOR_AFTER_PRESENCE : false;

type
  proc : 1..NP;
  lk_t : enum { FREE, SH, EX };
  -- a process's next step (J3: J1, J2 done; J5: J4 done; ...); NOKID: the
  -- child does not exist; LO: last_out runs (L5 found nobody present)
  pc_t : enum { NOKID, OUT, J3, J4, J5, J7, J8, IN, L3, L4, L5, LO, L6, DEAD };
  sw_t : enum { S_IDLE, S_TEST, S_REMOVE, S_DONE };   -- next: S2, S3, S4, S5

var
  pc : array [proc] of pc_t;
  unadopted : boolean;        -- the child's next call adopts
  copy : boolean;             -- the child holds its copy of 1's description
  life : array [proc] of lk_t;          -- L.LIFE, by description
  pres : array [proc] of boolean;       -- L.PRESENT
  slot : array [proc] of boolean;       -- the slot lock (and the slot)
  alife : array [proc] of lk_t;         -- A.LIFE (FD_POOL)
  apres : array [proc] of boolean;      -- A.PRESENT (FD_POOL)
  sw : sw_t;                  -- the sweeper (holds L.LIFE exclusive past S2)
  asw : sw_t;                 -- the anchor sweeper (A.LIFE exclusive past S2)
  removed : boolean;          -- a sweeper removed the region (its name)

-- which L a description's LIFE and PRESENT are on: 1 the region's; 2 the
-- anchor of process 2's mount namespace (OTHER_NS, the old protocol)
function lset(d : proc) : 1..2;
begin
  if OTHER_NS & d = 2 then return 2; end;
  return 1;
end;

function sweeper_holds(s : 1..2) : boolean;
begin
  return s = 1 & sw != S_IDLE;
end;

-- L.LIFE held exclusive by another than d (on the L d locks on)
function l_ex_other(d : proc) : boolean;
begin
  return sweeper_holds(lset(d)) |
         exists e : proc do e != d & lset(e) = lset(d) & life[e] = EX end;
end;

-- L.LIFE held at all by another than d
function l_any_other(d : proc) : boolean;
begin
  return sweeper_holds(lset(d)) |
         exists e : proc do e != d & lset(e) = lset(d) & life[e] != FREE end;
end;

-- L5's test: L.PRESENT held by another than d
function pres_other(d : proc) : boolean;
begin
  return exists e : proc do e != d & lset(e) = lset(d) & pres[e] end;
end;

-- A.LIFE held exclusive by another than d (only the anchor sweeper takes it so)
function a_ex_other(d : proc) : boolean;
begin
  return asw != S_IDLE;
end;

-- the owner has its own description open
function is_open(p : proc) : boolean;
begin
  return pc[p] != NOKID & pc[p] != OUT & pc[p] != DEAD;
end;

function attached(p : proc) : boolean;
begin
  return pc[p] != DEAD & (pc[p] = J5 | pc[p] = J7 | slot[p]);
end;

function joining(p : proc) : boolean;
begin
  return pc[p] = J4 | pc[p] = J5 | pc[p] = J7 | pc[p] = J8;
end;

procedure drop_locks(d : proc);
begin
  life[d] := FREE; pres[d] := false; slot[d] := false; alife[d] := FREE; apres[d] := false;
end;

-- the last holder of description d closed it: the kernel drops its locks
procedure closed(d : proc);
begin
  if !(d = 1 & copy) then drop_locks(d); end;
end;

-- a live process lets its description go: everything is unlocked
-- explicitly first (a close alone would leave a child's copy locked)
procedure let_go(p : proc);
begin
  drop_locks(p);
  if p = 1 then copy := false; end;   -- the child's copy: of a description with no locks now
  pc[p] := OUT;
end;

-- the child closes its inherited copy without unlocking it
procedure close_copy();
begin
  copy := false;
  if !is_open(1) then drop_locks(1); end;
end;

startstate
begin
  for p : proc do
    pc[p] := OUT;
    drop_locks(p);
  end;
  pc[NP] := NOKID;
  unadopted := false;
  copy := false;
  sw := S_IDLE;
  asw := S_IDLE;
  removed := false;
end;

ruleset p : proc do

  rule "crash"
    pc[p] != NOKID & pc[p] != DEAD
  ==>
    pc[p] := DEAD;
    closed(p);
    if p = NP then
      unadopted := false;
      if copy then close_copy(); end;
    end;
  end;

  -- a new process in a dead one's place (not while a child holds the dead
  -- one's description: its locks are still the dead one's)
  rule "a new process"
    pc[p] = DEAD & !(p = 1 & copy)
  ==>
    if p = NP then pc[p] := NOKID; else pc[p] := OUT; end;
  end;

  -- J1 map + validate the region (by name: it must still be there; by fd:
  -- always), J2 open a description of L of its own
  rule "J1+J2: map the region, open own description of L"
    pc[p] = OUT & !(p = NP & unadopted) & (FD_POOL | !removed)
  ==>
    pc[p] := J3;
  end;

  -- J3 L.LIFE shared (waits while someone holds it exclusive)
  rule "J3: L.LIFE shared"
    pc[p] = J3 & !l_ex_other(p) & !(FD_POOL & !ANCHOR_AFTER_PRESENCE & a_ex_other(p))
  ==>
    life[p] := SH;
    if FD_POOL & !ANCHOR_AFTER_PRESENCE then alife[p] := SH; end;
    pc[p] := J4;
  end;

  rule "J3: the wait times out (-EAGAIN)"
    pc[p] = J3 & (l_ex_other(p) | (FD_POOL & !ANCHOR_AFTER_PRESENCE & a_ex_other(p)))
  ==>
    let_go(p);
  end;

  rule "J4: L.PRESENT shared"
    pc[p] = J4
  ==>
    pres[p] := true;
    pc[p] := J5;
  end;

  -- J5 is the name still leading to this region? (named pools; a pool
  -- joined by fd has none) J6 the anchor (home processes): with FD_POOL it
  -- is what the anchor sweep judges by -- A.LIFE shared (waits while the
  -- anchor sweeper holds it), A.PRESENT
  rule "J5+J6: the name still leads to the region; the anchor"
    pc[p] = J5 & !(FD_POOL & ANCHOR_AFTER_PRESENCE & a_ex_other(p))
  ==>
    if !FD_POOL & removed then
      let_go(p);                        -- the pool was removed: fail
    else
      if FD_POOL then alife[p] := SH; apres[p] := true; end;
      if slot[p] then pc[p] := J8; else pc[p] := J7; end;
    end;
  end;

  rule "J6: the wait for the anchor's A.LIFE times out (-EAGAIN)"
    pc[p] = J5 & FD_POOL & ANCHOR_AFTER_PRESENCE & a_ex_other(p)
  ==>
    let_go(p);
  end;

  rule "J7: claim a slot (slot lock, then CAS)"
    pc[p] = J7
  ==>
    slot[p] := true;
    pc[p] := J8;
  end;

  -- J8 release L.LIFE (and A.LIFE); a child closes its copy of the
  -- parent's description now, without unlocking it
  rule "J8: release L.LIFE"
    pc[p] = J8
  ==>
    life[p] := FREE;
    alife[p] := FREE;
    if p = NP & unadopted then
      unadopted := false;
      if copy then close_copy(); end;
    end;
    pc[p] := IN;
  end;

  -- L1 release the slot (FREE, then the slot lock); L2 drop the anchor's
  -- presence
  rule "L1+L2: release the slot, drop anchor presence"
    pc[p] = IN
  ==>
    slot[p] := false;
    apres[p] := false;
    pc[p] := L3;
  end;

  rule "L3: L.LIFE exclusive"
    pc[p] = L3 & !l_any_other(p)
  ==>
    life[p] := EX;
    pc[p] := L4;
  end;

  -- held by another for 10 s: no clean-up (a named pool is marked closed);
  -- presence goes with the description
  rule "L3: the wait times out: leave without cleaning up"
    pc[p] = L3 & l_any_other(p)
  ==>
    let_go(p);
  end;

  rule "L4: release own L.PRESENT"
    pc[p] = L4
  ==>
    pres[p] := false;
    pc[p] := L5;
  end;

  rule "L5: test L.PRESENT"
    pc[p] = L5
  ==>
    if pres_other(p) then pc[p] := L6; else pc[p] := LO; end;
  end;

  rule "L5: last_out done"
    pc[p] = LO
  ==>
    pc[p] := L6;
  end;

  rule "L6: release L.LIFE"
    pc[p] = L6
  ==>
    let_go(p);
  end;
end;

-- fork(): process 1 has its description open (also mid-join or mid-leave,
-- forked by another thread)
ruleset inherit : boolean do
  rule "process 1 forks the child"
    pc[NP] = NOKID & is_open(1)
  ==>
    pc[NP] := OUT;
    unadopted := true;
    copy := inherit;        -- OFD: a copy of the description; System V: nothing
  end;
end;

-- Adopt: J2 a description of its own, then J3..J8 as a joiner (J8 closes
-- the copy); ADOPT_SLOT_FIRST: the slot is claimed first
rule "adopt: J2 own description"
  pc[NP] = OUT & unadopted
==>
  if ADOPT_SLOT_FIRST then slot[NP] := true; end;
  pc[NP] := J3;
end;

-- the sweeper of a pool whose region it reaches (a named pool)
rule "S1+S2: L.LIFE exclusive (try; busy: leave it)"
  !FD_POOL & sw = S_IDLE & !(exists e : proc do lset(e) = 1 & life[e] != FREE end)
==>
  sw := S_TEST;
end;

rule "S3: L.PRESENT or a slot lock held: busy"
  sw = S_TEST
==>
  if (exists e : proc do (lset(e) = 1 & pres[e]) | slot[e] end) then
    sw := S_DONE;
  else
    assert forall q : proc do !attached(q) & !joining(q) end "P2: a sweep found a pool dead that a process is attached to or joining";
    sw := S_REMOVE;
  end;
end;

ruleset gone : boolean do
  rule "S4: remove fallback objects, the region (unless closed cleanly), the anchor"
    sw = S_REMOVE
  ==>
    if gone then removed := true; end;
    sw := S_DONE;
  end;
end;

rule "S5: release L.LIFE"
  sw = S_DONE
==>
  sw := S_IDLE;
end;

rule "the sweeper crashes"
  sw != S_IDLE
==>
  sw := S_IDLE;
end;

-- FD_POOL: the sweep of a pool whose region it cannot reach, by the anchor
rule "anchor S2: A.LIFE exclusive (try)"
  FD_POOL & asw = S_IDLE & !(exists e : proc do alife[e] != FREE end)
==>
  asw := S_TEST;
end;

rule "anchor S3: A.PRESENT held: busy"
  asw = S_TEST
==>
  if (exists e : proc do apres[e] end) then
    asw := S_DONE;
  else
    assert forall q : proc do !attached(q) end "P2: the anchor sweep found a pool dead that a process is attached to";
    asw := S_REMOVE;
  end;
end;

rule "anchor S4: remove the /dev/shm objects, the anchor"
  asw = S_REMOVE
==>
  asw := S_DONE;
end;

rule "anchor S5: release A.LIFE"
  asw = S_DONE
==>
  asw := S_IDLE;
end;

rule "the anchor sweeper crashes"
  asw != S_IDLE
==>
  asw := S_IDLE;
end;

invariant "P1: last_out runs only when no other process is attached or joining"
  forall p : proc do
    pc[p] = LO -> forall q : proc do q != p -> (!attached(q) & !joining(q)) end
  end;

invariant "P2: a sweeper removes a pool only when nobody is attached or joining"
  (sw = S_REMOVE -> forall q : proc do !attached(q) & !joining(q) end) &
  (asw = S_REMOVE -> forall q : proc do !attached(q) end);

invariant "P3: whenever a clean-up runs, the attached set is empty"
  ((exists p : proc do pc[p] = LO end) | sw = S_REMOVE | asw = S_REMOVE) ->
  forall q : proc do !attached(q) end;

invariant "J5: nobody holds a slot in a pool a sweeper removed"
  removed -> forall q : proc do !(pc[q] != DEAD & slot[q]) end;
