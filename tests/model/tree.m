-- tree.m -- a trim that gives back the allocator's page of leaves (or of
-- level 1) of the granules it holds, against openers that chose a node before the trim took
-- it, processes that die at any step, and recovery (pool/ledger/resident.c
-- [tree give-back], palloc.c [lazy tree], [tree give-back]; tests/
-- test_elastic.c, "the tree's pages of leaves given back").
--
-- Two granules whose leaves share a page: A, where openers open a node,
-- and B, which only trims and refills take. Each has a residency word (the
-- "no tree" bit, the busy count: trimmers', refills' and openers' counts
-- alike); the page of tree words is there or not; one word on it (A's node
-- an opener opens: IDLE, OPENING by an opener, OPEN, CLOSING); the parent's
-- state for A's node, which stands for the window (FREE, PART, FULL: held
-- whole by a trimmer or a refill). Every step is one access, in one order
-- (the code's RMWs of the residency word are acq_rel, and the parent is
-- read after the count: palloc.c "Memory ordering"). A read or a write of
-- the word while the page is not there brings a zeroed page in (IDLE),
-- outside any room claim: only a stale reader does that, and this model
-- has none (every opener is counted in, and writes only while in).
--
-- Actors:
--   N openers, each (pa_open): choose the node while the parent says FREE
--     (and may then wait any time: a stale choice); count itself in (one
--     CAS: it learns the bit); look at the parent: not FREE, count out and
--     stop (writes nothing); the bit was set: make the page resident and
--     clear the bit (its count stays); read the word, claim it (CAS IDLE
--     -> OPENING), link (CAS the parent FREE -> PART, else store IDLE and
--     stop), store OPEN, count out; later close the node, counted in
--     likewise (a set bit: nothing to close): CLOSING, parent FREE, IDLE,
--     count out. An opener may die at any step: its claim and its count
--     stay, until recovery finishes its step (if it can see the word: not
--     under a set bit) and then the leak sweep takes its count out.
--   a trimmer, any number of times (elastic.c [trim]): claim the window
--     while the parent says FREE (FULL), mark both granules released with
--     its count (a granule another counts in is left resident: the trim
--     stops there, [busy]); set each bit that is clear where its count is
--     the only one (none set: skip to the count out); see both bits set and
--     its count alone on both: else clear the bits it set and keep the
--     page; give the page back (gone, the word 0); its counts out; free.
--   or, as a trim gives back a page of level 1 (elastic.c el_tree_l1:
--     the page tells of granules whose pages of leaves went before): look
--     (a hint) that both bits are set and nobody counts in; later, claim
--     the window (or stop, held), count in on both, set no bit, and go on
--     from the look at the bits and counts as above.
--   a refill (a holder's, or a refill ahead) of B, or of both: claim,
--     populate the page if a bit says so, mark resident (the bits
--     cleared), free.
--
-- Checked in every state:
--   H   no node the bit hides: the parent says PART only while the bit is
--       clear (else walks, the checker and recovery read an open node as
--       IDLE);
--   C   an opener past its claim holds it: the word says OPENING by it (a
--       page given back under it erased it);
--   P   a clear bit has the page there (else the next opener writes it in
--       outside any room claim);
--   R   no recovered opener's claim is left (a leaf lost for good).
--
-- Broken variants (run.sh flips one; each must fail on the property named):
--   OPENER_UNCOUNTED    openers do not count themselves in (only the fill
--                       does, as the first version did): a trim sets its
--                       bits over a dead opener's claim, recovery does not
--                       read under them, and the trim keeps the page and
--                       clears the bits after: the claim is never finished
--                       (R; found by review);
--   NO_PARENT_LOOK      the opener fills before it looks at the parent, and
--                       counts out after a failed link only: its fill
--                       clears the bit under a trimmer that has looked (P);
--   ONE_GRANULE_CHECKED the trimmer looks at the bits and counts of the
--                       granules whose bits it set only (P);
--   UNCOUNTED_CLOSE     a close is not counted in: a closer that dies after
--                       its parent says FREE leaves its CLOSING word under
--                       the bits of a trim that comes next (R);
--   L1_UNHELD           the give-back of a page of level 1 does not hold
--                       the window (no claim): an opener that comes after
--                       its look fills the page and clears the bit, and the
--                       page goes (P; its claim would go with it).

const
  N : 2;
  OPENER_UNCOUNTED : false;
  NO_PARENT_LOOK : false;
  ONE_GRANULE_CHECKED : false;
  UNCOUNTED_CLOSE : false;
  L1_UNHELD : false;

type
  opid : 1..N;
  who : 0..N;                   -- 0: nobody
  ph_t : enum { W_IDLE, W_OPENING, W_OPEN, W_CLOSING };
  par_t : enum { P_FREE, P_PART, P_FULL };
  opc_t : enum {
    O_IDLE, O_CHOSEN, O_PARENT, O_FILL, O_READ, O_CLAIM, O_LINK, O_GIVEUP, O_STORE, O_OUT,
    O_HOLD, O_CLOSE_IN, O_CLOSE_PARENT, O_CLOSE_WORD, O_CLOSE_OUT
  };
  tpc_t : enum { T_IDLE, T_L1SEEN, T_MARKED, T_QUIET, T_UNSET, T_PUNCH, T_OUT, T_FREE };
  rpc_t : enum { R_IDLE, R_POP, R_MARK, R_FREE };

var
  bit : boolean;                -- A's residency word: the "no tree" bit
  busy : 0..N + 1;              -- A's busy count
  bitB : boolean;               -- B's
  busyB : 0..1;                 -- B's busy count (a trimmer's)
  page : boolean;               -- the page of tree words is there
  ph : ph_t;                    -- the word's phase
  owner : who;                  -- its owner (OPENING, CLOSING)
  par : par_t;                  -- the parent's state for the node
  opc : array [opid] of opc_t;
  counted : array [opid] of boolean; -- the opener's count is in A's word
  sawbit : array [opid] of boolean;  -- its count-in found the bit set
  alive : array [opid] of boolean;
  recovered : array [opid] of boolean;
  tpc : tpc_t;
  rpc : rpc_t;
  tmine : boolean;              -- the trimmer set A's bit itself
  tmineB : boolean;             -- and B's
  tA : boolean;                 -- the trimmer marked A (its count is in A's word)
  tl1 : boolean;                -- the trimmer gives back a page of level 1
  theld : boolean;              -- the trimmer holds the window (par FULL is its)
  rboth : boolean;              -- the refill takes A too

startstate
begin
  bit := false; busy := 0; bitB := false; busyB := 0; page := true; ph := W_IDLE; owner := 0; par := P_FREE;
  for o : opid do
    opc[o] := O_IDLE; counted[o] := false; sawbit[o] := false; alive[o] := true; recovered[o] := false;
  end;
  tpc := T_IDLE; rpc := R_IDLE; tmine := false; tmineB := false; tA := false; rboth := false;
  tl1 := false; theld := false;
end;

-- ---- openers ----------------------------------------------------------------

procedure count_out(o : opid);
begin
  if counted[o] then busy := busy - 1; counted[o] := false; end;
end;

ruleset o : opid do
  rule "opener chooses the node (the parent says FREE)"
    alive[o] & opc[o] = O_IDLE & par = P_FREE ==> opc[o] := O_CHOSEN;
  end;

  rule "opener counts itself in (a CAS: it learns the bit)"
    alive[o] & opc[o] = O_CHOSEN ==>
    sawbit[o] := bit;
    if !OPENER_UNCOUNTED then busy := busy + 1; counted[o] := true; end;
    if NO_PARENT_LOOK then
      if sawbit[o] then opc[o] := O_FILL; else opc[o] := O_READ; end;
    else
      opc[o] := O_PARENT;
    end;
  end;

  rule "opener looks at the parent (acquire)"
    alive[o] & opc[o] = O_PARENT ==>
    if par != P_FREE then count_out(o); opc[o] := O_IDLE;
    elsif sawbit[o] then opc[o] := O_FILL;
    else opc[o] := O_READ;
    end;
  end;

  rule "opener fills: the page made resident, the bit cleared"
    alive[o] & opc[o] = O_FILL ==>
    if (OPENER_UNCOUNTED) & bit & busy > 0 then
      opc[o] := O_IDLE; -- (the first version's hook: held under a count)
    else
      if OPENER_UNCOUNTED then busy := busy + 1; counted[o] := true; end;
      page := true; bit := false;
      if OPENER_UNCOUNTED then count_out(o); end;
      opc[o] := O_READ;
    end;
  end;

  rule "opener reads the word"
    alive[o] & opc[o] = O_READ ==>
    if !page then page := true; ph := W_IDLE; owner := 0; end;
    if ph = W_IDLE then opc[o] := O_CLAIM; else count_out(o); opc[o] := O_IDLE; end;
  end;

  rule "opener claims the word (CAS IDLE -> OPENING)"
    alive[o] & opc[o] = O_CLAIM ==>
    if !page then page := true; ph := W_IDLE; owner := 0; end;
    if ph = W_IDLE then ph := W_OPENING; owner := o; opc[o] := O_LINK;
    else count_out(o); opc[o] := O_IDLE;
    end;
  end;

  rule "opener links (CAS the parent FREE -> PART)"
    alive[o] & opc[o] = O_LINK ==>
    if par = P_FREE then par := P_PART; opc[o] := O_STORE; else opc[o] := O_GIVEUP; end;
  end;

  rule "opener gives up (store IDLE)"
    alive[o] & opc[o] = O_GIVEUP ==>
    if !page then page := true; end;
    ph := W_IDLE; owner := 0; opc[o] := O_OUT;
  end;

  rule "opener stores OPEN"
    alive[o] & opc[o] = O_STORE ==>
    if !page then page := true; end;
    ph := W_OPEN; owner := 0; opc[o] := O_OUT;
  end;

  rule "opener counts itself out"
    alive[o] & opc[o] = O_OUT ==>
    count_out(o);
    if par = P_PART & ph = W_OPEN then opc[o] := O_HOLD; else opc[o] := O_IDLE; end;
  end;

  rule "closer counts itself in (a CAS: a set bit, nothing to close)"
    alive[o] & opc[o] = O_HOLD ==>
    if UNCOUNTED_CLOSE then opc[o] := O_CLOSE_IN;
    else
      busy := busy + 1; counted[o] := true;
      if bit then count_out(o); opc[o] := O_IDLE; else opc[o] := O_CLOSE_IN; end;
    end;
  end;

  rule "closer seals the empty node (CAS OPEN -> CLOSING)"
    alive[o] & opc[o] = O_CLOSE_IN ==>
    if page & ph = W_OPEN then ph := W_CLOSING; owner := o; opc[o] := O_CLOSE_PARENT;
    else opc[o] := O_CLOSE_OUT;
    end;
  end;

  rule "closer: the parent PART -> FREE"
    alive[o] & opc[o] = O_CLOSE_PARENT ==> if par = P_PART then par := P_FREE; end; opc[o] := O_CLOSE_WORD;
  end;

  rule "closer stores IDLE"
    alive[o] & opc[o] = O_CLOSE_WORD ==>
    if !page then page := true; end;
    ph := W_IDLE; owner := 0; opc[o] := O_CLOSE_OUT;
  end;

  rule "closer counts itself out"
    alive[o] & opc[o] = O_CLOSE_OUT ==> count_out(o); opc[o] := O_IDLE;
  end;

  rule "opener dies"
    alive[o] & opc[o] != O_IDLE & opc[o] != O_HOLD ==> alive[o] := false;
  end;

  -- recovery of the dead opener's slot (dp_pa_recover, its liveness lock
  -- held): a word under a set bit is not read (pa_untouched)
  rule "recovery finishes the dead opener's step"
    !alive[o] & !recovered[o] ==>
    if !(bit) & page & (ph = W_OPENING | ph = W_CLOSING) & owner = o then
      if par = P_PART then par := P_FREE; end;
      ph := W_IDLE; owner := 0;
    end;
    recovered[o] := true;
  end;

  -- the leak sweep, after the recovery, in a quiet window: the dead's
  -- count out
  rule "the sweep takes the dead opener's count out"
    !alive[o] & recovered[o] & counted[o] ==> count_out(o);
  end;
end;

-- ---- the trimmer --------------------------------------------------------------

rule "trimmer claims the window and marks it released (its counts; A only if nobody is in)"
  tpc = T_IDLE & rpc = R_IDLE & par = P_FREE ==>
  par := P_FULL; theld := true; tl1 := false; busyB := 1;
  tA := bit | busy = 0; -- (a resident granule another counts in stays: [busy])
  if tA then busy := busy + 1; end;
  tpc := T_MARKED;
end;

rule "trimmer of level 1 looks (a hint): both bits set, nobody in"
  tpc = T_IDLE & rpc = R_IDLE & bit & bitB & busy = 0 ==> tpc := T_L1SEEN;
end;

rule "trimmer of level 1 claims the window and counts in on both"
  tpc = T_L1SEEN & rpc = R_IDLE & (par = P_FREE | L1_UNHELD) ==>
  if !L1_UNHELD then par := P_FULL; theld := true; end;
  tl1 := true; busyB := 1; tA := true; busy := busy + 1;
  tpc := T_MARKED;
end;

rule "trimmer of level 1 cannot claim the window (held): it stops"
  tpc = T_L1SEEN & (par != P_FREE | rpc != R_IDLE) & !L1_UNHELD ==> tpc := T_IDLE;
end;

rule "trimmer sets the bits (CASes: clear, and its count the only one; level 1: none)"
  tpc = T_MARKED ==>
  tmine := !tl1 & tA & !bit & busy = 1; tmineB := !tl1 & !bitB;
  if tmine then bit := true; end;
  if tmineB then bitB := true; end;
  if tA & (tmine | tmineB | tl1) then tpc := T_QUIET; else tpc := T_OUT; end;
end;

rule "trimmer looks at the bits and the counts"
  tpc = T_QUIET ==>
  if ONE_GRANULE_CHECKED & ((tmine & busy != 1) | (tmineB & !bitB)) then tpc := T_UNSET;
  elsif !ONE_GRANULE_CHECKED & !(bit & bitB & busy = 1) then tpc := T_UNSET;
  else tpc := T_PUNCH;
  end;
end;

rule "trimmer clears the bits it set again (the page stays)"
  tpc = T_UNSET ==>
  if tmine then bit := false; end;
  if tmineB then bitB := false; end;
  tpc := T_OUT;
end;

rule "trimmer gives the page back"
  tpc = T_PUNCH ==> page := false; ph := W_IDLE; owner := 0; tpc := T_OUT;
end;

rule "trimmer counts itself out"
  tpc = T_OUT ==> if tA then busy := busy - 1; end; busyB := 0; tA := false; tpc := T_FREE;
end;

rule "trimmer frees the window"
  tpc = T_FREE ==> if theld then par := P_FREE; end; theld := false; tpc := T_IDLE;
end;

-- ---- a refill -----------------------------------------------------------------

ruleset both : boolean do
  rule "refill claims the window (B, or both)"
    rpc = R_IDLE & tpc = T_IDLE & par = P_FREE ==> par := P_FULL; rboth := both; rpc := R_POP;
  end;
end;

rule "refill populates the tree page if a bit says so"
  rpc = R_POP ==> if bitB | (rboth & bit) then page := true; end; rpc := R_MARK;
end;

rule "refill marks resident (the bits cleared)"
  rpc = R_MARK ==> bitB := false; if rboth then bit := false; end; rpc := R_FREE;
end;

rule "refill frees the window"
  rpc = R_FREE ==> par := P_FREE; rpc := R_IDLE;
end;

-- ---- properties -----------------------------------------------------------------

invariant "H: no node the bit hides"
  !(bit & par = P_PART);

invariant "C: an opener past its claim holds it"
  forall o : opid do
    (alive[o] & (opc[o] = O_LINK | opc[o] = O_STORE | opc[o] = O_GIVEUP)) -> (ph = W_OPENING & owner = o)
  end;

invariant "P: a clear bit has the page there"
  (!bit | !bitB) -> page;

invariant "R: no recovered opener's claim is left"
  forall o : opid do
    (!alive[o] & recovered[o]) -> !((ph = W_OPENING | ph = W_CLOSING) & owner = o)
  end;
