-- giveback.m -- what a populate leaves behind, under crashes: the busy
-- counts of the residency word, the give-back of a refill that failed, the
-- stray bit, the trimmer that leaves a granule being populated alone,
-- dsmpool_prefault, and the leak sweep that settles what the dead left
-- (pool/ledger/resident.c [busy], [give back]; proc.c dp_pool_giveback;
-- pool/top/elastic.c [trim], [refill ahead], [prefault]; recover.c [leak
-- sweep]; tests/test_limits.c, tests/test_elastic.c).
--
-- resident.m checks the residency protocol itself (trim, refills, stamps,
-- recovery); this model adds what makes pages go back when a populate
-- fails or its populator dies, on one granule (what the rules say of one
-- granule they say of each: every step below is about one word), with two
-- frames, so that two holders can share it.
--
-- The granule: a residency word (released, busy count, stray bit), its pages
-- (there or gone). Blocks: frame 0, frame 1, the granule (2). Actors: N
-- processes, each runs one call at a time and may die at any step, inside a
-- bracket except when idle or holding a block handed out:
--   an allocation: take a free block; released? count itself busy (one
--     CAS), populate (may fail), mark resident (its count out, the stray bit
--     off) and hand it out. A populate that failed: the block goes back,
--     then the give-back: claim the granule whole if it is free and give a
--     released one's pages back (then the bit off and the count out in one
--     CAS), else mark it stray and make the leak sweep due, and count itself
--     out; free what it claimed.
--   a trim: claim the resident granule whole; mark it released and count
--     itself busy -- unless someone populates it (busy): then it stays;
--     release its pages (may fail: the mark stays); count itself out (and
--     the stray bit off with the pages); free.
--   a refill ahead: claim the released granule whole, count itself busy,
--     populate (a failure: its pages go back, the count out), mark resident.
--   a prefault: count itself in on a resident word (one CAS; a released one
--     is skipped), populate (may fail), count itself out.
--   recovery of a dead slot: its handed-out block goes with its references,
--     what else it held is the sweep's; a death inside a bracket makes the
--     sweep due. Its counts stay in the word. The leak sweep, in a quiet
--     window, frees what nobody owns and notes the count and the stray bit;
--     then, while others run, it settles: claims the granule if free, gives
--     a released one's pages back, takes the noted counts out and the bit
--     off; a released granule it cannot claim keeps them (the sweep stays
--     due).
--
-- Checked in every state:
--   A   a block handed out is resident and its pages are there; pages are
--       gone only under a released mark;
--   K   the count is the live populators' plus the dead's not yet settled;
--   G   pages under a released mark only where someone will give them back
--       (a count, the stray bit, or a holder);
--   R3  when quiet (every slot alive and outside its brackets, no sweep due
--       or settling): nobody counted busy, nothing stray, no page under a
--       released mark but what a release the kernel refused left;
-- and, as liveness (LIVE): a quiet pool with nothing held is reachable.
--
-- Broken variants (run.sh flips one; each must fail on the property named):
--   NO_GIVEBACK        a refill that fails keeps what it populated (R3);
--   TRIM_IGNORES_BUSY  the trimmer marks released, and releases, a granule a
--                      prefault populates: its pages stay under the mark (R3);
--   SWEEP_NO_SETTLE    the sweep leaves the dead's counts and bits (R3);
--   SWEEP_GIVES_UP     the sweep takes the counts out of a released granule
--                      it cannot claim (G);
--   STRAY_FORGOTTEN    a give-back that cannot claim the granule only counts
--                      itself out: when the holder dies before counting
--                      itself in, nobody gives the pages back (G).

const
  N : 2;
  NO_GIVEBACK : false;
  TRIM_IGNORES_BUSY : false;
  SWEEP_NO_SETTLE : false;
  SWEEP_GIVES_UP : false;
  STRAY_FORGOTTEN : false;
  LIVE : false;

type
  pid : 1..N;
  who : 0..N + 2;               -- 0 nobody; N + 1 a dead process's leftover; N + 2 the sweeper
  cnt : 0..2 * N;
  frame : 0..1;
  blk : 0..2;                   -- frame 0, frame 1, the granule
  pc_t : enum {
    IDLE,
    A_LOAD, A_BUSY, A_POP, A_MARK, A_FAIL, A_GB, A_GB_REL, A_GB_LOW,
    HELD,
    T_MARK, T_REL, T_LOW, T_FREE,
    R_BUSY, R_POP, R_MARK, R_GB, R_FREE,
    P_RAISE, P_POP, P_LOW
  };

var
  used : array [frame] of boolean;
  holder : array [frame] of who;
  rel : boolean;                -- the word: released
  busy : cnt;                   -- the word: populators counted in
  stray : boolean;              -- the word: pages left for the sweep
  pg : boolean;                 -- the granule's pages are there
  sweep_due : boolean;
  owe : cnt;                    -- the counts the sweep noted
  ostray : boolean;             -- the bit the sweep noted
  sw : boolean;                 -- the sweeper holds the granule
  alive : array [pid] of boolean;
  pc : array [pid] of pc_t;
  b : array [pid] of blk;
  -- ghosts
  mine : array [pid] of boolean; -- its count is in busy
  trm : array [pid] of boolean;  -- the trimmer marked it (and will release it)
  gbh : array [pid] of boolean;  -- the give-back claimed the granule
  dead : cnt;                    -- counts in busy of processes that died
  relfail : boolean;             -- a release the kernel refused left the pages

function covers(x : blk; f : frame) : boolean;
begin
  return x = 2 | x = f;
end;

function blk_free(x : blk) : boolean;
begin
  for f : frame do
    if covers(x, f) & used[f] then return false; end;
  end;
  return true;
end;

function holds_all(p : pid) : boolean;
begin
  return holder[0] = p & holder[1] = p;
end;

function inbr(p : pid) : boolean;
begin
  return pc[p] != IDLE & pc[p] != HELD;
end;

function quiet() : boolean;
begin
  if sweep_due | owe > 0 | ostray | sw then return false; end;
  for p : pid do
    if !alive[p] | inbr(p) then return false; end;
  end;
  return true;
end;

procedure take(x : blk; p : who);
begin
  for f : frame do
    if covers(x, f) then
      assert !used[f] & holder[f] = 0 "a frame handed to two";
      used[f] := true; holder[f] := p;
    end;
  end;
end;

procedure give(x : blk; p : who);
begin
  for f : frame do
    if covers(x, f) then
      assert used[f] & holder[f] = p "a block freed by one that does not hold it";
      used[f] := false; holder[f] := 0;
    end;
  end;
end;

procedure raise(p : pid);
begin
  assert !mine[p] "counted twice";
  busy := busy + 1; mine[p] := true;
end;

procedure lower(p : pid);
begin
  assert mine[p] & busy > 0 "a count taken out that was never put in";
  busy := busy - 1; mine[p] := false;
end;

-- the pages go (a release that worked): the stray bit with them
procedure pages_gone();
begin
  pg := false; stray := false; relfail := false;
end;

-- the counts of the dead not yet recovered
function dying() : cnt;
var n : cnt;
begin
  n := 0;
  for q : pid do
    if !alive[q] & mine[q] then n := n + 1; end;
  end;
  return n;
end;

procedure reset(p : pid);
begin
  pc[p] := IDLE; b[p] := 0; trm[p] := false; gbh[p] := false;
end;

startstate
begin
  for f : frame do used[f] := false; holder[f] := 0; end;
  rel := true; busy := 0; stray := false; pg := false; -- an elastic pool's released granule
  sweep_due := false; owe := 0; ostray := false; sw := false; dead := 0; relfail := false;
  for p : pid do alive[p] := true; mine[p] := false; reset(p); end;
end;

ruleset p : pid do

  -- (at most N dead counts wait for the sweep: the counts are bounded here
  -- as the C code's 16 bits are)
  rule "crash"
    alive[p] & dead + dying() + (mine[p] ? 1 : 0) <= N
  ==>
    alive[p] := false;
  end;

  rule "recover the dead slot"
    !alive[p]
  ==>
    if inbr(p) then sweep_due := true; end;
    if pc[p] = HELD then give(b[p], p); end;
    for f : frame do
      if holder[f] = p then holder[f] := N + 1; end;
    end;
    if mine[p] then mine[p] := false; dead := dead + 1; end;
    alive[p] := true; reset(p);
  end;

  -- ---- an allocation ----------------------------------------------------------
  ruleset x : blk do
    rule "alloc: take a free block"
      alive[p] & pc[p] = IDLE & blk_free(x)
    ==>
      take(x, p); b[p] := x; pc[p] := A_LOAD;
    end;
  end;

  rule "alloc: load the word"
    alive[p] & pc[p] = A_LOAD
  ==>
    if rel then pc[p] := A_BUSY; else pc[p] := HELD; end;
  end;

  rule "alloc: count itself busy"
    alive[p] & pc[p] = A_BUSY
  ==>
    raise(p); pc[p] := A_POP;
  end;

  rule "alloc: populate"
    alive[p] & pc[p] = A_POP
  ==>
    pg := true; pc[p] := A_MARK;
  end;

  -- MADV_POPULATE_WRITE fails at once, or part way (some pages there)
  ruleset some : boolean do
    rule "alloc: the populate fails"
      alive[p] & pc[p] = A_POP
    ==>
      if some then pg := true; end;
      pc[p] := A_FAIL;
    end;
  end;

  rule "alloc: mark resident (its count out, the bit off)"
    alive[p] & pc[p] = A_MARK
  ==>
    rel := false; stray := false; relfail := false; lower(p); pc[p] := HELD;
  end;

  rule "alloc: the block goes back"
    alive[p] & pc[p] = A_FAIL
  ==>
    give(b[p], p); pc[p] := A_GB;
  end;

  rule "alloc: give back: claim the granule, or mark it stray"
    alive[p] & pc[p] = A_GB
  ==>
    if !NO_GIVEBACK & blk_free(2) then
      take(2, p); gbh[p] := true; pc[p] := A_GB_REL;
    else
      if !NO_GIVEBACK & !STRAY_FORGOTTEN & rel then stray := true; sweep_due := true; end;
      pc[p] := A_GB_LOW;
    end;
  end;

  rule "alloc: give back: release a released granule's pages"
    alive[p] & pc[p] = A_GB_REL
  ==>
    assert holds_all(p) "pages given back by one that does not hold the granule";
    if rel then pg := false; relfail := false; end;
    pc[p] := A_GB_LOW;
  end;

  rule "alloc: give back: the bit off (pages gone), the count out, the claim freed"
    alive[p] & pc[p] = A_GB_LOW
  ==>
    if gbh[p] & rel then stray := false; end;
    lower(p);
    if gbh[p] then give(2, p); end;
    reset(p);
  end;

  rule "alloc: touch the block"
    alive[p] & pc[p] = HELD
  ==>
    assert pg & !rel "a caller touches memory that is not resident";
  end;

  rule "alloc: free the block"
    alive[p] & pc[p] = HELD
  ==>
    give(b[p], p); reset(p);
  end;

  -- ---- a trim -----------------------------------------------------------------
  rule "trim: claim the resident granule"
    alive[p] & pc[p] = IDLE & blk_free(2) & !rel
  ==>
    take(2, p); b[p] := 2; pc[p] := T_MARK;
  end;

  rule "trim: mark it released, counted ours (unless being populated)"
    alive[p] & pc[p] = T_MARK
  ==>
    if rel then raise(p); trm[p] := true;
    elsif busy = 0 | TRIM_IGNORES_BUSY then rel := true; raise(p); trm[p] := true;
    end;
    if trm[p] then pc[p] := T_REL; else pc[p] := T_FREE; end;
  end;

  rule "trim: release the pages"
    alive[p] & pc[p] = T_REL
  ==>
    assert holds_all(p) "pages given back by one that does not hold the granule";
    pg := false; relfail := false; pc[p] := T_LOW;
  end;

  rule "trim: the release fails (the mark stays)"
    alive[p] & pc[p] = T_REL
  ==>
    if pg then relfail := true; end;
    pc[p] := T_LOW;
  end;

  rule "trim: count itself out (the bit off with the pages)"
    alive[p] & pc[p] = T_LOW
  ==>
    if !pg then stray := false; end;
    lower(p); trm[p] := false; pc[p] := T_FREE;
  end;

  rule "trim: free"
    alive[p] & pc[p] = T_FREE
  ==>
    give(2, p); reset(p);
  end;

  -- ---- a refill ahead -----------------------------------------------------------
  rule "refill: claim the released granule"
    alive[p] & pc[p] = IDLE & blk_free(2) & rel
  ==>
    take(2, p); b[p] := 2; pc[p] := R_BUSY;
  end;

  rule "refill: count itself busy"
    alive[p] & pc[p] = R_BUSY
  ==>
    raise(p); pc[p] := R_POP;
  end;

  rule "refill: populate"
    alive[p] & pc[p] = R_POP
  ==>
    pg := true; pc[p] := R_MARK;
  end;

  ruleset some : boolean do
    rule "refill: the populate fails"
      alive[p] & pc[p] = R_POP
    ==>
      if some then pg := true; end;
      pc[p] := R_GB;
    end;
  end;

  rule "refill: its pages go back, its count out"
    alive[p] & pc[p] = R_GB
  ==>
    if !NO_GIVEBACK then pages_gone(); end;
    lower(p); pc[p] := R_FREE;
  end;

  rule "refill: mark resident"
    alive[p] & pc[p] = R_MARK
  ==>
    assert pg "marked resident before its pages are there";
    rel := false; stray := false; relfail := false; lower(p); pc[p] := R_FREE;
  end;

  rule "refill: free"
    alive[p] & pc[p] = R_FREE
  ==>
    give(2, p); reset(p);
  end;

  -- ---- dsmpool_prefault ------------------------------------------------------------
  rule "prefault: count itself in on a resident word"
    alive[p] & pc[p] = IDLE & !rel
  ==>
    raise(p); pc[p] := P_POP;
  end;

  rule "prefault: populate"
    alive[p] & pc[p] = P_POP
  ==>
    pg := true; pc[p] := P_LOW;
  end;

  rule "prefault: the populate fails"
    alive[p] & pc[p] = P_POP
  ==>
    pc[p] := P_LOW;
  end;

  rule "prefault: count itself out"
    alive[p] & pc[p] = P_LOW
  ==>
    lower(p); reset(p);
  end;
end;

-- ---- the leak sweep -------------------------------------------------------------
rule "the leak sweep (a quiet window)"
  sweep_due & owe = 0 & !ostray & !sw & forall p : pid do alive[p] & !inbr(p) end
==>
  for f : frame do
    if used[f] & !(holder[f] >= 1 & holder[f] <= N & pc[holder[f]] = HELD) then
      assert holder[f] = N + 1 "the leak sweep frees a block a live process holds";
      used[f] := false; holder[f] := 0;
    end;
  end;
  assert busy = dead "a live process counted busy in a quiet window";
  if !SWEEP_NO_SETTLE then owe := busy; ostray := stray; end;
  sweep_due := false;
end;

rule "the sweep settles: claim the granule if free"
  (owe > 0 | ostray) & !sw & blk_free(2)
==>
  take(2, N + 2); sw := true;
end;

rule "the sweep settles: the pages, the counts, the bit, the claim"
  (owe > 0 | ostray) & (sw | !blk_free(2))
==>
  if sw | !rel | SWEEP_GIVES_UP then
    if sw & rel then pages_gone(); end;
    if !rel then stray := false; end;
    assert busy >= owe & dead >= owe "the sweep takes out counts that are not there";
    busy := busy - owe; dead := dead - owe;
  else
    sweep_due := true; -- someone holds it: settled by a later sweep
  end;
  owe := 0; ostray := false;
  if sw then give(2, N + 2); sw := false; end;
end;

-- ---- properties ---------------------------------------------------------------------

invariant "A: a block handed out is resident, its pages there"
  forall p : pid do pc[p] = HELD -> !rel & pg end;

invariant "A: pages gone only under a released mark"
  !pg -> rel;

function live_counts() : cnt;
var n : cnt;
begin
  n := 0;
  for q : pid do
    if mine[q] then n := n + 1; end;
  end;
  return n;
end;

invariant "K: the count is the live populators' and the dead's not yet settled"
  busy = dead + live_counts();

invariant "a stray bit only on a released word"
  stray -> rel;

invariant "G: pages under a released mark only where someone will give them back"
  rel & pg & !relfail ->
    busy > 0 | stray | ostray | exists f : frame do holder[f] != 0 end;

invariant "R3: quiet, nobody counted busy, nothing stray, no page under a released mark"
  quiet() -> busy = 0 & !stray & (rel & !relfail -> !pg);

liveness "L: a quiet pool with nothing held can always be reached"
  !LIVE | quiet() & forall f : frame do !used[f] end;
