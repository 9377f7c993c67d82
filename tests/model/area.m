-- area.m -- an area's registry entries under destroy, crashes and recovery
-- (pool/area: area_registry.c [entries], area_life.c [destroy],
-- area_recover.c [recovery]; recover.c [dead slots]).
--
-- Acquirers (inside a cache operation: area_cache.c [operations]) claim a FREE entry
-- (INIT, owner = them), put a pool block in it, and publish it (SPAN) with
-- one CAS; or retire a SPAN (its chunks all came back). A destroyer marks
-- the area DESTROYED, waits until no live acquirer is inside an operation
-- (membarrier + sequence numbers in the C code; here an atomic check) or
-- gives up waiting and releases nothing; then takes every entry it may:
-- SPAN ones, and INIT/RETIRED ones of dead owners; the INIT entries of live
-- owners it marks DOOMED. Recovery releases the entries of dead processes.
-- The last reference releases everything. Anyone may crash at any step.
-- Giving an entry back is: CAS to RETIRED(me), exchange the block out and
-- free it, store FREE.
--
-- Checked: a block that an operation is using is never free in the pool;
-- no block is freed twice or sits in two entries; only an entry's owner
-- gives its parts back.
--
-- BUGGY := true models the code before issue 8 (the destroyer did not wait
-- and took INIT entries of live owners; a filler whose publish failed freed
-- whatever block the entry held): rumur finds a live block freed.

const
  NA : 2;        -- acquirers
  NE : 2;        -- entries
  NB : 3;        -- pool blocks
  BUGGY : false;

type
  actor : 1..NA + 1;   -- NA + 1 is the destroyer
  acq : 1..NA;
  ent : 1..NE;
  blk : 0..NB;         -- 0: none
  est : enum { FREE, INIT, SPAN, RETIRED };
  apc : enum { READY, CLAIMED, FILLED, USING, GIVE1, GIVE2, GIVE3, RET2, RET3, DETACHED };
  dpc : enum { D_IDLE, D_WAIT, D_RELEASE, D_DONE };

var
  area_live : boolean;
  st : array [ent] of est;
  owner : array [ent] of 0..NA + 1;
  doomed : array [ent] of boolean;
  eblk : array [ent] of blk;
  pool_used : array [1..NB] of boolean;
  pc : array [acq] of apc;
  tgt : array [acq] of ent;
  mine : array [acq] of blk;
  alive : array [actor] of boolean;
  dstate : dpc;
  dtaken : array [ent] of boolean;    -- the destroyer owns this entry now (RETIRED(it))
  held : array [ent] of 0..NA;        -- whose cache still holds chunks of this span (0: none)
  rstep : array [ent] of 0..2;        -- recovery / final progress on an entry
  final_done : boolean;

procedure free_block(b : blk);
begin
  if b != 0 then
    assert pool_used[b] "a block freed twice";
    pool_used[b] := false;
  end;
end;

function in_op(a : acq) : boolean;
begin
  return pc[a] != READY & pc[a] != DETACHED;
end;

startstate
begin
  area_live := true;
  for e : ent do st[e] := FREE; owner[e] := 0; doomed[e] := false; eblk[e] := 0; dtaken[e] := false; rstep[e] := 0; held[e] := 0; end;
  for b : 1..NB do pool_used[b] := false; end;
  for a : acq do pc[a] := READY; tgt[a] := 1; mine[a] := 0; end;
  for x : actor do alive[x] := true; end;
  dstate := D_IDLE;
  final_done := false;
end;

ruleset x : actor do
  rule "crash" alive[x] & !final_done ==> alive[x] := false; end;
end;

ruleset a : acq do
  -- an operation begins only on a LIVE area (it reads the state inside it)
  ruleset e : ent do
    rule "claim a FREE entry"
      alive[a] & pc[a] = READY & area_live & st[e] = FREE
    ==>
      st[e] := INIT; owner[e] := a; doomed[e] := false; pc[a] := CLAIMED; tgt[a] := e;
    end;

    -- a span retires when its last chunk comes back (area_span.c [retire])
    rule "retire a whole span"
      alive[a] & pc[a] = READY & area_live & st[e] = SPAN & held[e] = 0
    ==>
      st[e] := RETIRED; owner[e] := a; pc[a] := RET2; tgt[a] := e;
    end;
  end;

  ruleset b : 1..NB do
    rule "put a pool block in"
      alive[a] & pc[a] = CLAIMED & !pool_used[b]
    ==>
      pool_used[b] := true; eblk[tgt[a]] := b; mine[a] := b; pc[a] := FILLED;
    end;
  end;

  ruleset e : ent do
    rule "drain: a cache gives a span's chunks back (one operation)"
      alive[a] & pc[a] = READY & area_live & held[e] = a
    ==>
      held[e] := 0;
    end;
  end;

  rule "publish (CAS INIT(me) -> SPAN)"
    alive[a] & pc[a] = FILLED
  ==>
    if st[tgt[a]] = INIT & owner[tgt[a]] = a & !doomed[tgt[a]] then
      st[tgt[a]] := SPAN; owner[tgt[a]] := 0; pc[a] := USING; held[tgt[a]] := a;
    else
      pc[a] := GIVE1;
    end;
  end;

  rule "the operation ends"
    alive[a] & pc[a] = USING
  ==>
    pc[a] := READY; mine[a] := 0;
  end;

  rule "give back: own the entry (CAS to RETIRED(me))"
    alive[a] & pc[a] = GIVE1
  ==>
    if BUGGY | (st[tgt[a]] = INIT & owner[tgt[a]] = a) then
      if !BUGGY then st[tgt[a]] := RETIRED; end;
      pc[a] := GIVE2;
    else
      pc[a] := READY; mine[a] := 0;     -- not ours any more: never touch it
    end;
  end;

  rule "give back: exchange the block out, free it"
    alive[a] & pc[a] = GIVE2
  ==>
    free_block(eblk[tgt[a]]); eblk[tgt[a]] := 0; pc[a] := GIVE3;
  end;

  rule "give back: FREE"
    alive[a] & pc[a] = GIVE3
  ==>
    if !BUGGY then st[tgt[a]] := FREE; owner[tgt[a]] := 0; end;
    pc[a] := READY; mine[a] := 0;
  end;

  rule "retire: exchange the block out, free it"
    alive[a] & pc[a] = RET2
  ==>
    assert st[tgt[a]] = RETIRED & owner[tgt[a]] = a "released by someone who does not own it";
    free_block(eblk[tgt[a]]); eblk[tgt[a]] := 0; pc[a] := RET3;
  end;

  rule "retire: FREE"
    alive[a] & pc[a] = RET3
  ==>
    st[tgt[a]] := FREE; owner[tgt[a]] := 0; pc[a] := READY; held[tgt[a]] := 0;
  end;

  rule "detach"
    alive[a] & pc[a] = READY
  ==>
    pc[a] := DETACHED;
  end;
end;

-- the destroyer (actor NA + 1)
rule "destroy: mark DESTROYED"
  alive[NA + 1] & dstate = D_IDLE & area_live
==>
  area_live := false; dstate := D_WAIT;
end;

rule "destroy: every live operation has ended"
  alive[NA + 1] & dstate = D_WAIT & (BUGGY | forall a : acq do !alive[a] | !in_op(a) end)
==>
  dstate := D_RELEASE;
end;

rule "destroy: an operation is still running when the wait ends: release nothing"
  alive[NA + 1] & dstate = D_WAIT
==>
  dstate := D_DONE;
end;

ruleset e : ent do
  rule "destroy: take or doom an entry"
    alive[NA + 1] & dstate = D_RELEASE & !dtaken[e] & st[e] != FREE
  ==>
    if (st[e] = INIT | st[e] = RETIRED) & owner[e] != 0 & alive[owner[e]] & !BUGGY then
      if st[e] = INIT then doomed[e] := true; end;   -- its owner gives it back
    elsif st[e] != RETIRED | (owner[e] != 0 & !alive[owner[e]]) then
      st[e] := RETIRED; owner[e] := NA + 1; dtaken[e] := true;
    end;
  end;

  rule "destroy: give a taken entry back"
    alive[NA + 1] & dtaken[e]
  ==>
    assert st[e] = RETIRED & owner[e] = NA + 1 "released by someone who does not own it";
    free_block(eblk[e]); eblk[e] := 0; st[e] := FREE; owner[e] := 0; dtaken[e] := false; held[e] := 0;
  end;
end;

rule "destroy: done"
  alive[NA + 1] & dstate = D_RELEASE & forall e : ent do !dtaken[e] end
==>
  dstate := D_DONE;
end;

-- recovery of a dead process's entries (it holds the dead slot's lock:
-- one recoverer per dead owner; it may die, and the next starts again)
ruleset e : ent do
  rule "recover: take a dead owner's entry"
    rstep[e] = 0 & (st[e] = INIT | st[e] = RETIRED) & owner[e] != 0 & !alive[owner[e]]
  ==>
    rstep[e] := 1;                      -- CAS to RETIRED in the dead owner's name
    st[e] := RETIRED;
  end;

  rule "recover: give it back"
    rstep[e] = 1
  ==>
    free_block(eblk[e]); eblk[e] := 0; st[e] := FREE; owner[e] := 0; rstep[e] := 0; held[e] := 0;
    for a : acq do if !alive[a] & tgt[a] = e then pc[a] := DETACHED; end; end;
    dtaken[e] := false;
  end;

  rule "recoverer dies"
    rstep[e] = 1
  ==>
    rstep[e] := 0;
  end;
end;

-- the last reference: nobody is attached or alive, so nothing runs
rule "final destroy"
  !final_done & (forall a : acq do !alive[a] | pc[a] = DETACHED end) &
  (!alive[NA + 1] | dstate = D_IDLE | dstate = D_DONE)
==>
  for e : ent do
    if st[e] != FREE then free_block(eblk[e]); eblk[e] := 0; st[e] := FREE; owner[e] := 0; held[e] := 0; end;
  end;
  final_done := true;
end;

invariant "a block an operation uses is never free in the pool"
  forall a : acq do
    alive[a] & (pc[a] = FILLED | pc[a] = USING) -> (mine[a] != 0 & pool_used[mine[a]])
  end;

invariant "no block in two entries"
  forall e : ent do forall f : ent do
    e != f & eblk[e] != 0 -> eblk[e] != eblk[f]
  end end;

invariant "a block in an entry is allocated in the pool"
  forall e : ent do eblk[e] != 0 -> pool_used[eblk[e]] end;

invariant "after the last reference, every block is back"
  final_done -> forall b : 1..NB do !pool_used[b] end;
