-- resident.m -- the residency protocol under crashes: trim, refill ahead,
-- refill on demand, the maintenance step's idle stamps, and recovery
-- (pool/ledger/resident.c [resident when held], [refill on demand],
-- [idle stamps]; pool/top/elastic.c [trim], [refill ahead], [policy];
-- pool/ledger/proc.c [pool blocks]; pool/top/recover.c [dead slots],
-- [leak sweep]; the kill_* tests of tests/test_elastic.c).
--
-- The data: G = 2 granules (2 MiB each, one residency word each: a
-- released bit and an idle stamp), of 2 frames each. The allocator is
-- abstract (palloc.m checks it): a block is taken by one CAS that succeeds
-- only when every frame of it is free -- an allocation taking any free block
-- of its size, or a claim by address (dp_pool_claim) -- and given back by
-- one CAS. Blocks: a frame (half a granule), a granule, both granules (an
-- allocation of 4 MiB, or a trimmer's piece of two granules). The pages of
-- each granule are present or gone (what the kernel holds).
--
-- Actors: N processes, each runs one call at a time and may die at any step
-- (every rule below is one atomic access, one system call's effect on one
-- granule, or one CAS of the C code):
--   an allocation (proc.c [pool blocks]): take a block, inside a bracket;
--     dp_res_ensure: the inline load (a block in one granule), else the
--     slow path: the "any" loads, then per granule: released? (a run of
--     released granules: populate each -- MADV_POPULATE_WRITE, which may
--     fail: the block goes back and the caller gets -ENOMEM -- then mark
--     each resident); not released: load the word and CAS a stamp away.
--     Then it is handed out (recorded; the bracket ends), touched, freed.
--   a trim (elastic.c el_release): claim a piece by address, [idle: check
--     the stamps again,] mark each granule released, give each granule's
--     pages back (the release may fail part way: the marks stay), free it.
--   a refill ahead (el_refill): claim, per run of released granules:
--     populate (may fail: the piece goes back as it is), mark resident; free.
--   a maintenance step (dsmpool_maintain, under DP_LOCK_MAINTAIN, which the
--     kernel drops at death): (1) el_stamp over every granule: load the
--     word; released: skip; unstamped: look (wholly free?), CAS the stamp
--     in; then look again and CAS a stamp off a granule that is not wholly
--     free; (2) maybe an idle trim of a piece (the trim above, with the
--     stamp check); (3) maybe a refill ahead of a piece. (The policy's
--     counts only decide whether (2) and (3) run: here they may run or not.)
--   recovery of a dead slot (recover.c [dead slots]): its recorded block is
--     freed (the segment's references go); a death inside a bracket makes
--     the leak sweep due; the slot then serves a new process. The leak
--     sweep frees what is allocated and owned by nothing, only in a quiet
--     window (no live process inside a bracket, no dead slot unrecovered).
--
-- Checked, in every state:
--   A  (no caller touches a released page) a block handed out lies in
--      resident granules whose pages are there; a granule whose pages are
--      (partly) gone is marked released;
--   B  (released only while held whole) a granule is marked released, and
--      its pages given back, only by a trimmer that holds all of it;
--   C  (recovery) no block is freed twice, nor handed to two; the sweep
--      frees only what a dead process left; and when quiet (every slot
--      alive and outside its brackets, no sweep due), a frame is allocated
--      iff a caller holds it (free bytes exact) and no released granule
--      holds an allocated frame (dsmpool_check's step 6: dp_res_verify);
--   S  (idle stamps) once a step is done with a granule, a stamp on it is
--      not on a granule some caller took before the stamp was written and
--      still holds (that one did not see it, and would free it as if idle);
-- and, as liveness (from every state a quiet pool with nothing held can be
-- reached): L  no state is stuck -- no allocation waits for a trim (D: an
--      allocation only ever takes a free block, or gives up), and a dead
--      trimmer's piece comes back.
--
-- Broken variants (run.sh flips one to true; each must fail):
--   MARK_AFTER_RELEASE        the trimmer gives the pages back before it
--                             marks them: a kill between leaves a resident
--                             mark over gone pages (A);
--   RESIDENT_BEFORE_POPULATE  an allocation marks a released granule
--                             resident before it populates it: the holder
--                             of the other half takes the fast path (A);
--   NO_RESIDENCY_CHECK        an allocation hands a block out without
--                             looking at the word (A);
--   MARK_BEFORE_CLAIM         the trimmer marks a piece released before it
--                             holds it (B);
--   STAMP_NO_RECHECK          the step stamps a granule and does not look
--                             again (S: the stamp stays on a granule in use);
--   SWEEP_NOT_QUIET           the leak sweep frees unowned blocks without a
--                             quiet window: a live trimmer's piece (C);
--   ALLOC_WAITS               an allocation that finds its block claimed by a
--                             trimmer waits for it; with one death (the
--                             trimmer's), it waits inside its bracket for a
--                             sweep that its bracket keeps from running (L).

const
  N : 2;                        -- processes
  G : 2;                        -- granules (the block table below is for 2)
  MARK_AFTER_RELEASE : false;
  RESIDENT_BEFORE_POPULATE : false;
  NO_RESIDENCY_CHECK : false;
  MARK_BEFORE_CLAIM : false;
  STAMP_NO_RECHECK : false;
  SWEEP_NOT_QUIET : false;
  ALLOC_WAITS : false;
  LIVE : false;                 -- check L (see the end)
  NO_MAINT : false;             -- no maintenance step (the L run)

type
  pid : 1..N;
  who : 0..N + 1;               -- 0: nobody; N + 1: a dead process's leftover (the sweep's)
  gran : 0..G - 1;
  gcur : 0..G;                  -- a cursor over granules (G: past the end)
  frame : 0..2 * G - 1;
  blk : 0..6;                   -- 0..3 a frame, 4..5 a granule, 6 both granules
  pc_t : enum {
    IDLE,
    -- an allocation (A_*: inside its bracket until HELD)
    A_FAST, A_ANY, A_UNIT, A_RUN, A_POP, A_MARK, A_CLR, A_CAS, A_FAIL, A_WAIT,
    HELD,
    -- a trim (T_*) and a refill ahead (R_*), inside a bracket
    T_PRE, T_CHECK, T_MARK, T_REL, T_FREE,
    R_SCAN, R_RUN, R_POP, R_MARK, R_FREE,
    -- a maintenance step's (1), outside any bracket
    M_LOAD, M_STAMP, M_LOOK2, M_CLEAR, M_POLICY2
  };

var
  -- shared memory and the kernel
  used : array [frame] of boolean;       -- the allocator: frame allocated
  rel : array [gran] of boolean;         -- residency word: released bit
  st : array [gran] of boolean;          -- residency word: stamped (idle since)
  pg : array [gran] of boolean;          -- the granule's pages are there
  sweep_due : boolean;                   -- hdr->sweep_needed
  mlock : 0..N;                          -- DP_LOCK_MAINTAIN's holder
  -- processes
  alive : array [pid] of boolean;
  pc : array [pid] of pc_t;
  b : array [pid] of blk;                -- the block or piece it works on
  cur : array [pid] of gcur;             -- its granule cursor
  rs : array [pid] of gcur;              -- the start of the run of released granules
  hend : array [pid] of gcur;            -- its end (last + 1)
  acc : array [pid] of boolean;          -- the "any" loads found something / newly released
  idle : array [pid] of boolean;         -- a trim of the maintenance step (2)
  inmaint : array [pid] of boolean;      -- inside a maintenance step (holds mlock)
  -- ghosts
  holder : array [frame] of who;         -- who was handed the frame
  blind : array [pid] of array [gran] of boolean; -- holds part of it since before its stamp
  crashed : boolean;                     -- ALLOC_WAITS: one death only

function first(x : blk) : frame;
begin
  if x < 4 then return x; elsif x = 5 then return 2; else return 0; end;
end;

function len(x : blk) : 1..4;
begin
  if x < 4 then return 1; elsif x < 6 then return 2; else return 4; end;
end;

function glo(x : blk) : gran; begin return first(x) / 2; end;
function ghi(x : blk) : gran; begin return (first(x) + len(x) - 1) / 2; end;

function covers(x : blk; f : frame) : boolean;
begin
  return f >= first(x) & f < first(x) + len(x);
end;

function gcovers(x : blk; g : gran) : boolean;
begin
  return g >= glo(x) & g <= ghi(x);
end;

function blk_free(x : blk) : boolean;
begin
  for f : frame do
    if covers(x, f) & used[f] then return false; end;
  end;
  return true;
end;

-- dp_pool_granule_free: nothing of granule g is allocated (a relaxed look)
function gfree(g : gran) : boolean;
begin
  return !used[2 * g] & !used[2 * g + 1];
end;

-- does p hold all of granule g (a trimmer's or refiller's claim)?
function holds_all(p : pid; g : gran) : boolean;
begin
  return holder[2 * g] = p & holder[2 * g + 1] = p;
end;

function holds_part(p : pid; g : gran) : boolean;
begin
  return holder[2 * g] = p | holder[2 * g + 1] = p;
end;

-- the states inside a bracket (dp_bracket_open .. dp_bracket_close)
function inbr(p : pid) : boolean;
begin
  return pc[p] != IDLE & pc[p] != HELD & pc[p] != M_LOAD & pc[p] != M_STAMP &
         pc[p] != M_LOOK2 & pc[p] != M_CLEAR & pc[p] != M_POLICY2;
end;

function quiet() : boolean;
begin
  if sweep_due then return false; end;
  for p : pid do
    if !alive[p] | inbr(p) then return false; end;
  end;
  return true;
end;

-- the allocator's CAS: take every frame of x (the caller checked they are free)
procedure take(x : blk; p : pid);
begin
  for f : frame do
    if covers(x, f) then
      assert !used[f] & holder[f] = 0 "a frame handed to two";
      used[f] := true; holder[f] := p;
    end;
  end;
end;

procedure give(x : blk; p : pid);
begin
  for f : frame do
    if covers(x, f) then
      assert used[f] "a block freed twice";
      assert holder[f] = p "a block freed by one that does not hold it";
      used[f] := false; holder[f] := 0;
    end;
  end;
  for g : gran do blind[p][g] := false; end;
end;

-- the word of g loses its stamp (whoever takes it off): nobody is blind to it
procedure unstamp(g : gran);
begin
  st[g] := false;
  for q : pid do blind[q][g] := false; end;
end;

procedure reset(p : pid);
begin
  pc[p] := IDLE; b[p] := 0; cur[p] := 0; rs[p] := 0; hend[p] := 0; acc[p] := false; idle[p] := false;
end;

-- S: the step is done with granule g
procedure step_done(p : pid; g : gran);
begin
  if st[g] then
    for q : pid do
      assert !(blind[q][g] & holds_part(q, g)) "a stamp left on a granule in use (taken before the stamp, still held)";
    end;
  end;
  if g + 1 < G then
    cur[p] := g + 1; pc[p] := M_LOAD;
  else
    cur[p] := 0; pc[p] := M_POLICY2;
  end;
end;

-- the allocation is through dp_res_ensure: handed out (and recorded)
procedure handed(p : pid);
begin
  pc[p] := HELD; cur[p] := 0; rs[p] := 0; hend[p] := 0; acc[p] := false;
end;

-- dp_res_ensure_slow's loop: the next granule, or done
procedure a_next(p : pid; g : gcur);
begin
  if g > ghi(b[p]) then handed(p); else cur[p] := g; pc[p] := A_UNIT; end;
end;

-- after a trim's piece, or a refill's: the bracket ends; back in the step, or idle
procedure piece_done(p : pid);
begin
  if inmaint[p] & idle[p] then
    reset(p); pc[p] := M_POLICY2; idle[p] := true; -- (3) may follow (2) in the same step
  elsif inmaint[p] then
    reset(p); inmaint[p] := false; mlock := 0;
  else
    reset(p);
  end;
end;

-- a refill's next run, from granule g (the piece is b[p])
procedure r_next(p : pid; g : gcur);
begin
  if g > ghi(b[p]) then pc[p] := R_FREE; else cur[p] := g; pc[p] := R_SCAN; end;
end;

startstate
begin
  for f : frame do used[f] := false; holder[f] := 0; end;
  for g : gran do rel[g] := false; st[g] := false; pg[g] := true; end;
  sweep_due := false; mlock := 0; crashed := false;
  for p : pid do
    alive[p] := true; inmaint[p] := false; reset(p);
    for g : gran do blind[p][g] := false; end;
  end;
end;

ruleset p : pid do

  rule "crash"
    alive[p] & !(ALLOC_WAITS & crashed)
  ==>
    alive[p] := false;
    if ALLOC_WAITS then crashed := true; end;
    -- the kernel drops its locks: DP_LOCK_MAINTAIN is free again
    if mlock = p then mlock := 0; end;
  end;

  -- recover.c [dead slots], then a new process in the slot
  rule "recover the dead slot"
    !alive[p]
  ==>
    if inbr(p) then sweep_due := true; end;        -- it died inside a bracket
    if pc[p] = HELD then give(b[p], p); end;        -- its recorded block goes with its references
    for f : frame do
      if holder[f] = p then holder[f] := N + 1; end; -- owned by nothing now: the sweep's
    end;
    for g : gran do blind[p][g] := false; end;
    alive[p] := true; inmaint[p] := false; reset(p);
  end;

  -- ---- an allocation (proc.c [pool blocks]) ----------------------------------
  ruleset x : blk do
    rule "alloc: take a free block"
      alive[p] & pc[p] = IDLE & blk_free(x)
    ==>
      take(x, p); b[p] := x; cur[p] := glo(x); acc[p] := false;
      if NO_RESIDENCY_CHECK then handed(p);
      elsif len(x) <= 2 then pc[p] := A_FAST;   -- one granule: dp_res_ensure's inline load
      else pc[p] := A_ANY;
      end;
    end;

    rule "alloc: wait for a block a trimmer holds (ALLOC_WAITS)"
      ALLOC_WAITS & alive[p] & pc[p] = IDLE & len(x) = 2 & !blk_free(x) &
      exists q : pid do q != p & (pc[q] = T_CHECK | pc[q] = T_MARK | pc[q] = T_REL | pc[q] = T_FREE) &
                        gcovers(b[q], glo(x)) end
    ==>
      b[p] := x; pc[p] := A_WAIT;
    end;
  end;

  rule "alloc: the block it waited for is free (ALLOC_WAITS)"
    alive[p] & pc[p] = A_WAIT & blk_free(b[p])
  ==>
    take(b[p], p); cur[p] := glo(b[p]); pc[p] := A_FAST;
  end;

  -- (for a block in one granule the slow path's any-load reads the word
  -- again, and what it decides the per-granule loads decide too: the
  -- model goes on to them)
  rule "alloc: the inline load"
    alive[p] & pc[p] = A_FAST
  ==>
    if !rel[glo(b[p])] & !st[glo(b[p])] then handed(p);  -- 0: resident, not stamped
    else cur[p] := glo(b[p]); pc[p] := A_UNIT;
    end;
  end;

  rule "alloc: the slow path's any-load"
    alive[p] & pc[p] = A_ANY
  ==>
    if rel[cur[p]] | st[cur[p]] then acc[p] := true; end;
    if cur[p] < ghi(b[p]) then cur[p] := cur[p] + 1;
    elsif !acc[p] then handed(p);
    else acc[p] := false; a_next(p, glo(b[p]));
    end;
  end;

  rule "alloc: is the granule released (unit_released)"
    alive[p] & pc[p] = A_UNIT
  ==>
    if rel[cur[p]] then
      rs[p] := cur[p]; hend[p] := cur[p] + 1;
      if cur[p] < ghi(b[p]) then pc[p] := A_RUN;
      elsif RESIDENT_BEFORE_POPULATE then pc[p] := A_MARK;
      else pc[p] := A_POP;
      end;
    else
      pc[p] := A_CLR;
    end;
  end;

  rule "alloc: does the run of released granules go on"
    alive[p] & pc[p] = A_RUN
  ==>
    if hend[p] <= ghi(b[p]) & rel[hend[p]] then hend[p] := hend[p] + 1; end;
    if RESIDENT_BEFORE_POPULATE then pc[p] := A_MARK; else pc[p] := A_POP; end;
  end;

  -- MADV_POPULATE_WRITE over the run [rs, hend), a granule at a time (a
  -- death in the call leaves part of it populated)
  rule "alloc: populate a granule of the run"
    alive[p] & pc[p] = A_POP
  ==>
    pg[cur[p]] := true;
    if cur[p] + 1 < hend[p] then cur[p] := cur[p] + 1;
    elsif RESIDENT_BEFORE_POPULATE then a_next(p, hend[p]);
    else cur[p] := rs[p]; pc[p] := A_MARK; -- "resident.refill.populated"
    end;
  end;

  rule "alloc: the populate fails (-ENOMEM)"
    alive[p] & pc[p] = A_POP
  ==>
    pc[p] := A_FAIL;
  end;

  rule "alloc: the block goes back, the caller gets -ENOMEM"
    alive[p] & pc[p] = A_FAIL
  ==>
    give(b[p], p); reset(p);
  end;

  -- dp_res_mark_resident: the CAS loop of one granule
  rule "alloc: mark a granule resident"
    alive[p] & pc[p] = A_MARK
  ==>
    rel[cur[p]] := false;
    if cur[p] + 1 < hend[p] then cur[p] := cur[p] + 1;
    elsif RESIDENT_BEFORE_POPULATE then cur[p] := rs[p]; pc[p] := A_POP;
    else a_next(p, hend[p]);
    end;
  end;

  rule "alloc: load the word of a resident granule"
    alive[p] & pc[p] = A_CLR
  ==>
    if st[cur[p]] then pc[p] := A_CAS; else a_next(p, cur[p] + 1); end;
  end;

  rule "alloc: CAS the stamp off (used now)"
    alive[p] & pc[p] = A_CAS
  ==>
    if !rel[cur[p]] & st[cur[p]] then unstamp(cur[p]); end;   -- a failed CAS found it changed
    a_next(p, cur[p] + 1);
  end;

  rule "alloc: touch the block"
    alive[p] & pc[p] = HELD
  ==>
    for g : gran do
      if gcovers(b[p], g) then
        assert pg[g] "a caller touches a page that was given back (SIGBUS, or a zeroed page under its data)";
        assert !rel[g] "a caller touches a granule marked released";
      end;
    end;
  end;

  rule "alloc: free the block"
    alive[p] & pc[p] = HELD
  ==>
    give(b[p], p); reset(p);
  end;

  -- ---- a trim (elastic.c [trim]: el_release) ---------------------------------
  ruleset x : 4..6 do
    rule "trim: claim a piece by its address"
      alive[p] & blk_free(x) &
      (pc[p] = IDLE & !MARK_BEFORE_CLAIM & exists g : gran do gcovers(x, g) & !rel[g] end |
       pc[p] = T_PRE & b[p] = x)
    ==>
      take(x, p); b[p] := x; cur[p] := glo(x); acc[p] := false; idle[p] := false;
      if MARK_AFTER_RELEASE then pc[p] := T_REL; else pc[p] := T_MARK; end;
      if MARK_BEFORE_CLAIM then pc[p] := T_REL; end;
    end;

    rule "trim: mark a piece it does not hold yet (MARK_BEFORE_CLAIM)"
      MARK_BEFORE_CLAIM & alive[p] & pc[p] = IDLE & exists g : gran do gcovers(x, g) & !rel[g] end
    ==>
      b[p] := x; cur[p] := glo(x); acc[p] := false; idle[p] := false; pc[p] := T_MARK;
    end;

    rule "maintain (2): claim an idle piece"
      alive[p] & pc[p] = M_POLICY2 & !idle[p] & blk_free(x) &
      exists g : gran do gcovers(x, g) & !rel[g] end
    ==>
      take(x, p); b[p] := x; cur[p] := glo(x); acc[p] := false; idle[p] := true; pc[p] := T_CHECK;
    end;
  end;

  -- "elastic.trim.claimed"; the stamps again, now that it holds them
  rule "trim: check the stamps again"
    alive[p] & pc[p] = T_CHECK
  ==>
    if forall g : gran do gcovers(b[p], g) -> rel[g] | st[g] end then
      cur[p] := glo(b[p]);
      if MARK_AFTER_RELEASE then pc[p] := T_REL; else pc[p] := T_MARK; end;
    else
      pc[p] := T_FREE; -- used since: keep it
    end;
  end;

  -- dp_res_mark_released: the CAS loop of one granule
  rule "trim: mark a granule released"
    alive[p] & pc[p] = T_MARK
  ==>
    if !rel[cur[p]] then rel[cur[p]] := true; acc[p] := true; unstamp(cur[p]); end;
    if cur[p] < ghi(b[p]) then cur[p] := cur[p] + 1;
    elsif MARK_AFTER_RELEASE then pc[p] := T_FREE;
    elsif MARK_BEFORE_CLAIM then pc[p] := T_PRE; -- then the claim
    else
      cur[p] := glo(b[p]);
      if acc[p] then pc[p] := T_REL; else pc[p] := T_FREE; end; -- "elastic.trim.marked"
    end;
  end;

  -- dp_res_release (MADV_REMOVE / PUNCH_HOLE), a granule at a time
  rule "trim: give a granule's pages back"
    alive[p] & pc[p] = T_REL
  ==>
    assert holds_all(p, cur[p]) "pages given back by one that does not hold all of the granule";
    if !rel[cur[p]] then acc[p] := true; end;
    pg[cur[p]] := false;
    if cur[p] < ghi(b[p]) then cur[p] := cur[p] + 1;
    elsif MARK_AFTER_RELEASE & acc[p] then cur[p] := glo(b[p]); pc[p] := T_MARK;
    else pc[p] := T_FREE; -- "elastic.trim.released"
    end;
  end;

  rule "trim: the release fails part way (the marks stay)"
    alive[p] & pc[p] = T_REL & !MARK_AFTER_RELEASE
  ==>
    pc[p] := T_FREE;
  end;

  rule "trim: free the piece"
    alive[p] & pc[p] = T_FREE
  ==>
    give(b[p], p); piece_done(p);
  end;

  -- ---- a refill ahead (elastic.c [refill ahead]: el_refill) -------------------
  ruleset x : 4..6 do
    rule "refill: claim a piece by its address"
      alive[p] & (pc[p] = IDLE | pc[p] = M_POLICY2) & blk_free(x) &
      exists g : gran do gcovers(x, g) & rel[g] end
    ==>
      if pc[p] = M_POLICY2 then idle[p] := false; end; -- (3): the step ends after it
      take(x, p); b[p] := x; cur[p] := glo(x); pc[p] := R_SCAN;
    end;
  end;

  rule "refill: is the granule released"
    alive[p] & pc[p] = R_SCAN
  ==>
    if !rel[cur[p]] then r_next(p, cur[p] + 1);
    else
      rs[p] := cur[p]; hend[p] := cur[p] + 1;
      if cur[p] < ghi(b[p]) then pc[p] := R_RUN; else pc[p] := R_POP; end;
    end;
  end;

  rule "refill: does the run go on"
    alive[p] & pc[p] = R_RUN
  ==>
    if hend[p] <= ghi(b[p]) & rel[hend[p]] then hend[p] := hend[p] + 1; end;
    pc[p] := R_POP;
  end;

  rule "refill: populate a granule of the run"
    alive[p] & pc[p] = R_POP
  ==>
    pg[cur[p]] := true;
    if cur[p] + 1 < hend[p] then cur[p] := cur[p] + 1;
    else cur[p] := rs[p]; pc[p] := R_MARK; -- "elastic.refill.populated"
    end;
  end;

  rule "refill: the populate fails (the piece goes back as it is)"
    alive[p] & pc[p] = R_POP
  ==>
    pc[p] := R_FREE;
  end;

  rule "refill: mark a granule resident"
    alive[p] & pc[p] = R_MARK
  ==>
    assert holds_part(p, cur[p]) "a granule marked resident by one that holds none of it";
    assert pg[cur[p]] "a granule marked resident before its pages are there";
    rel[cur[p]] := false;
    if cur[p] + 1 < hend[p] then cur[p] := cur[p] + 1; else r_next(p, hend[p]); end;
  end;

  rule "refill: free the piece"
    alive[p] & pc[p] = R_FREE
  ==>
    give(b[p], p); piece_done(p);  -- "elastic.refill.marked" before it
  end;

  -- ---- a maintenance step (elastic.c [policy]) --------------------------------
  rule "maintain: take DP_LOCK_MAINTAIN"
    !NO_MAINT & alive[p] & pc[p] = IDLE & mlock = 0
  ==>
    mlock := p; inmaint[p] := true; cur[p] := 0; pc[p] := M_LOAD;
  end;

  -- (1) el_stamp, granule cur[p]: the load of the word and, when it is 0,
  -- the look at the allocator, as one step (the stamp CAS checks the word
  -- again, and only this step stamps: a word read 0 is 0 or released at the
  -- look, and the CAS decides the same either way)
  rule "maintain (1): load the word (and look: wholly free?)"
    alive[p] & pc[p] = M_LOAD
  ==>
    if rel[cur[p]] then step_done(p, cur[p]);
    elsif st[cur[p]] then
      if STAMP_NO_RECHECK then step_done(p, cur[p]); else pc[p] := M_LOOK2; end;
    elsif gfree(cur[p]) then pc[p] := M_STAMP;
    else step_done(p, cur[p]);
    end;
  end;

  rule "maintain (1): CAS the stamp in (only on 0)"
    alive[p] & pc[p] = M_STAMP
  ==>
    if !rel[cur[p]] & !st[cur[p]] then
      st[cur[p]] := true;
      -- ghost: a caller that holds part of it handed out took it before
      -- the stamp, and read its word before (one still in dp_res_ensure may
      -- read it yet, and take the stamp off)
      for q : pid do
        if holds_part(q, cur[p]) & pc[q] = HELD then blind[q][cur[p]] := true; end;
      end;
      if STAMP_NO_RECHECK then step_done(p, cur[p]); else pc[p] := M_LOOK2; end;
    else
      step_done(p, cur[p]);
    end;
  end;

  rule "maintain (1): look again"
    alive[p] & pc[p] = M_LOOK2
  ==>
    if gfree(cur[p]) then step_done(p, cur[p]); else pc[p] := M_CLEAR; end;
  end;

  rule "maintain (1): CAS the stamp off a granule in use"
    alive[p] & pc[p] = M_CLEAR
  ==>
    if !rel[cur[p]] & st[cur[p]] then unstamp(cur[p]); end; -- a failed CAS found it changed
    step_done(p, cur[p]);
  end;

  rule "maintain: the step ends"
    alive[p] & pc[p] = M_POLICY2
  ==>
    reset(p); inmaint[p] := false; mlock := 0;
  end;
end;

-- ---- recover.c [leak sweep] -----------------------------------------------------
rule "the leak sweep"
  sweep_due & (SWEEP_NOT_QUIET | forall p : pid do alive[p] & !inbr(p) end)
==>
  for f : frame do
    -- allocated and named by no record (a handed-out block is recorded)
    if used[f] & !(holder[f] >= 1 & holder[f] <= N & pc[holder[f]] = HELD) then
      assert holder[f] = N + 1 "the leak sweep frees a block a live process holds";
      used[f] := false; holder[f] := 0;
    end;
  end;
  sweep_due := false;
end;

-- ---- invariants -------------------------------------------------------------------

invariant "A: a block handed out is resident, its pages there"
  forall p : pid do
    pc[p] = HELD -> forall g : gran do gcovers(b[p], g) -> !rel[g] & pg[g] end
  end;

-- the ensure steps: the block is held, not yet handed out
function ensuring(q : pid) : boolean;
begin
  return pc[q] = A_FAST | pc[q] = A_ANY | pc[q] = A_UNIT | pc[q] = A_RUN | pc[q] = A_POP |
         pc[q] = A_MARK | pc[q] = A_CLR | pc[q] = A_CAS | pc[q] = A_FAIL;
end;

function piece_step(q : pid) : boolean;
begin
  return pc[q] = T_CHECK | pc[q] = T_MARK | pc[q] = T_REL | pc[q] = T_FREE |
         pc[q] = R_SCAN | pc[q] = R_RUN | pc[q] = R_POP | pc[q] = R_MARK | pc[q] = R_FREE;
end;

invariant "B: a released granule is free, held whole by a trimmer or refiller, or still being made resident"
  forall g : gran do
    rel[g] -> forall f : frame do
      f / 2 = g -> (holder[f] = 0 | holder[f] = N + 1 |
                    (holder[f] <= N & (ensuring(holder[f]) | piece_step(holder[f]) & holds_all(holder[f], g))))
    end
  end;

-- (a trimmer marks first: a granule whose pages are gone is marked released,
-- but while a live trimmer that holds it is in its steps, so that it takes
-- a kill to break it in MARK_AFTER_RELEASE)
invariant "A: pages gone only under a released mark"
  forall g : gran do
    !pg[g] -> rel[g] | exists q : pid do alive[q] & piece_step(q) & holds_all(q, g) end
  end;

invariant "a released word has no stamp"
  forall g : gran do !(rel[g] & st[g]) end;

invariant "C: allocated iff someone (or a dead one's leftover) holds it"
  forall f : frame do used[f] = (holder[f] != 0) end;

invariant "C: quiet, free bytes are exact (nothing left over from the dead)"
  quiet() -> forall f : frame do
    used[f] -> (holder[f] >= 1 & holder[f] <= N & pc[holder[f]] = HELD & covers(b[holder[f]], f))
  end;

invariant "C: quiet, no released granule holds an allocated frame (dp_res_verify)"
  quiet() -> forall g : gran do rel[g] -> gfree(g) end;

liveness "D: no allocation waits for a trim"
  forall p : pid do pc[p] != A_WAIT end;

-- (costly to prove: run.sh checks it in a run of its own, without the
-- maintenance step)
liveness "L: a quiet pool with nothing held can always be reached"
  !LIVE | quiet() & forall f : frame do !used[f] end;
